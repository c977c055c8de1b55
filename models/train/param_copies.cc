#include "models/train/param_copies.h"

namespace tessera::train {

ParamCopies::ParamCopies(const parallel::ParallelContext* context,
                         const std::vector<std::string>& tied)
    : tied_(tied.begin(), tied.end()) {
  if (!context) return;
  if (context->config().tensor.size > 1) {
    const parallel::Communicator& group = *context->tensor_group();
    tensor_copy_ = {.group = "tensor", .parts = group.size(), .index = group.rank()};
  }
  if (const auto& group = context->embedding_group(); group && !tied_.empty())
    embedding_copy_ = {.group = "embedding", .parts = group->size(), .index = group->rank()};
}

parallel::tensor::Placement ParamCopies::on_this_rank(parallel::tensor::Placement p,
                                                      const std::string& param) const {
  if (p.replicated() && tensor_copy_.parts > 1) p.replicas.push_back(tensor_copy_);
  if (embedding_copy_.parts > 1 && tied_.count(param)) p.replicas.push_back(embedding_copy_);
  return p;
}

std::vector<bool> ParamCopies::counted(
    const std::vector<std::pair<std::string, parallel::tensor::Placement>>& placements) const {
  std::vector<bool> out;
  out.reserve(placements.size());
  for (const auto& [name, p] : placements) out.push_back(counted(p, name));
  return out;
}

}  // namespace tessera::train
