// Shared pieces of the Hugging Face name mappings (see hf_common.h).
#include "models/hf/hf_common.h"

#include <set>

#include "autograd/ops.h"

namespace tessera::hf::detail {

bool strip_prefix(std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  name.erase(0, prefix.size());
  return true;
}

std::optional<std::pair<int64_t, std::string>> split_layer(const std::string& name,
                                                           const std::string& head) {
  std::string rest = name;
  if (!strip_prefix(rest, head)) return std::nullopt;
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0 || digits > 9 || digits >= rest.size() || rest[digits] != '.')
    return std::nullopt;
  return std::make_pair(int64_t(std::stoll(rest.substr(0, digits))), rest.substr(digits + 1));
}

void QkvFuser::add(int64_t layer, const std::string& part, const std::string& leaf,
                   const Tensor& t) {
  TS_CHECK(leaf == "weight" || leaf == "bias", op_, "expected ", part, ".weight or .bias in layer ",
           layer, ", got ", part, ".", leaf);
  parts_[{layer, part, leaf}] = t;
}

NamedTensors QkvFuser::finish() const {
  std::set<std::pair<int64_t, std::string>> groups;  // (layer, leaf)
  for (const auto& [key, t] : parts_) groups.insert({std::get<0>(key), std::get<2>(key)});
  NamedTensors out;
  for (const auto& [layer, leaf] : groups) {
    std::vector<Tensor> qkv;
    for (const char* part : {"query", "key", "value"}) {
      auto it = parts_.find({layer, part, leaf});
      TS_CHECK(it != parts_.end(), op_, "expected ", part, ".", leaf, " in layer ", layer,
               " beside the other attention projections, got none");
      qkv.push_back(it->second.detach());
    }
    TS_CHECK(qkv[0].shape() == qkv[1].shape() && qkv[0].shape() == qkv[2].shape(), op_,
             "expected query, key and value ", leaf, "s of one shape in layer ", layer, ", got ",
             qkv[0].describe(), ", ", qkv[1].describe(), " and ", qkv[2].describe());
    out.emplace_back("h." + std::to_string(layer) + ".attn.c_attn." + leaf, cat(qkv, 0));
  }
  return out;
}

std::vector<Tensor> split_qkv(const Tensor& fused, const std::string& op, const std::string& name) {
  TS_CHECK(fused.defined() && fused.dim() >= 1 && fused.size(0) % 3 == 0, op,
           "expected a fused q | k | v tensor with a first dimension divisible by 3 for '", name,
           "', got ", fused.defined() ? fused.describe() : "undefined");
  const int64_t c = fused.size(0) / 3;
  const Tensor t = fused.detach();
  return {t.narrow(0, 0, c).clone(), t.narrow(0, c, c).clone(), t.narrow(0, 2 * c, c).clone()};
}

Tensor transposed(const Tensor& t, const std::string& op, const std::string& name) {
  TS_CHECK(t.defined() && t.dim() == 2, op, "expected a 2-D Conv1D weight for '", name, "', got ",
           t.defined() ? t.describe() : "undefined");
  return t.detach().transpose(0, 1).contiguous();
}

}  // namespace tessera::hf::detail
