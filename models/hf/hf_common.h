// Helpers shared by the Hugging Face name mappings (hf_names.h): prefix matching, per-layer name
// parsing, and fusing separate query / key / value projections into one c_attn.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "models/hf/hf_names.h"

namespace tessera::hf::detail {

// Removes `prefix` from the front of `name` when it is there; returns whether it was.
bool strip_prefix(std::string& name, const std::string& prefix);

// "<head><N>.<rest>" -> (N, rest), e.g. ("encoder.layer.", "encoder.layer.3.output.dense.bias")
// -> (3, "output.dense.bias"); nullopt when name does not have that form.
std::optional<std::pair<int64_t, std::string>> split_layer(const std::string& name,
                                                           const std::string& head);

// Collects query / key / value weights and biases per layer; finish() returns
// h.N.attn.c_attn.{weight, bias} = cat(q, k, v) along dim 0, and throws naming the layer and the
// missing part when a layer lacks one of the three.
class QkvFuser {
 public:
  explicit QkvFuser(std::string op) : op_(std::move(op)) {}
  // part: "query", "key" or "value"; leaf: "weight" or "bias".
  void add(int64_t layer, const std::string& part, const std::string& leaf, const Tensor& t);
  NamedTensors finish() const;

 private:
  std::string op_;
  std::map<std::tuple<int64_t, std::string, std::string>, Tensor> parts_;
};

// The reverse of QkvFuser, for export: a fused c_attn weight (3C, C) or bias (3C) cut along dim 0
// into contiguous query, key and value copies, in that order. Throws naming `name` when dim 0 does
// not divide by 3.
std::vector<Tensor> split_qkv(const Tensor& fused, const std::string& op, const std::string& name);

// A new contiguous copy of t transposed (2-D), checked to be 2-D.
Tensor transposed(const Tensor& t, const std::string& op, const std::string& name);

}  // namespace tessera::hf::detail
