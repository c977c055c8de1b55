#include "parallel/mesh/parallel_context.h"

#include "core/error.h"
#include "parallel/comm/config_check.h"

namespace tessera::parallel {

ParallelContext::ParallelContext(const ParallelConfig& config, std::shared_ptr<Communicator> world)
    : config_(config), mesh_(build_mesh(config)), world_(std::move(world)) {
  TS_CHECK(world_ != nullptr, "parallel_context", "expected a world communicator, got null");
  // Ranks with different layouts would make different split calls and deadlock; fail clearly.
  check_same_config(*world_, config_.to_json().dump());
  config_.validate(world_->size());
  const int me = world_->rank();
  for (const GroupSpec& spec : group_specs(config_)) {
    const int color = mesh_.group_index(me, spec.axes);
    const int key = mesh_.index_in_group(me, spec.axes);
    std::shared_ptr<Communicator> comm = world_->split(color, key, spec.name);
    TS_ASSERT(comm != nullptr && comm->rank() == key &&
              comm->size() == int(mesh_.group_ranks(me, spec.axes).size()));
    groups_[spec.name] = std::move(comm);
    group_axes_[spec.name] = spec.axes;
  }
  if (config_.pipeline > 1) {
    const int stage = mesh_.coord(me, "pipeline");
    const bool end_stage = stage == 0 || stage == config_.pipeline - 1;
    embedding_ = world_->split(end_stage ? mesh_.group_index(me, {"pipeline"}) : -1,
                               stage == 0 ? 0 : 1, "embedding");
    TS_ASSERT((embedding_ != nullptr) == end_stage);
  }
}

const std::shared_ptr<Communicator>& ParallelContext::group(const std::string& name) const {
  auto it = groups_.find(name);
  if (it == groups_.end()) {
    std::string known;
    for (const auto& [n, comm] : groups_) known += (known.empty() ? "" : ", ") + n;
    TS_FAIL("parallel_context", "expected a group of tensor mode ", config_.tensor.mode, " (", known,
            "), got '", name, "'");
  }
  return it->second;
}

std::vector<int> ParallelContext::group_ranks(const std::string& name) const {
  group(name);  // throws for unknown names
  return mesh_.group_ranks(rank(), group_axes_.at(name));
}

std::string ParallelContext::describe_tensor() const {
  std::string groups;
  const GroupLayout layout = group_layout(config_);  // outlives the loop over its groups
  for (const std::vector<int>& g : layout.at("tensor")) {
    groups += groups.empty() ? "" : " ";
    for (size_t i = 0; i < g.size(); ++i) groups += (i ? "," : "[") + std::to_string(g[i]);
    groups += "]";
  }
  return str_cat(
      "tensor parallel: ", config_.tensor.mode, " over ", config_.tensor.size, " ranks, groups ",
      groups, config_.tensor.sequence_parallel ? ", sequence parallel (activations T / size)" : "");
}

std::string ParallelContext::describe_sequence(int64_t positions) const {
  const int64_t s = config_.sequence;
  const bool zigzag = config_.layout() == sequence::SequenceLayout::zigzag;
  return str_cat(
      "sequence parallel: ", sequence::mode_name(config_.sequence_mode), " attention over ", s,
      " ranks, each holding ", positions / s, " positions of every sequence",
      zigzag ? str_cat(" (zigzag layout: rank r holds chunks r and ", 2 * s - 1, " - r of ", 2 * s,
                       ", so causal attention costs every rank the same)")
             : std::string(", contiguous"));
}

std::vector<std::string> ParallelContext::group_names() const {
  std::vector<std::string> names;
  for (const auto& [n, comm] : groups_) names.push_back(n);
  return names;
}

}  // namespace tessera::parallel
