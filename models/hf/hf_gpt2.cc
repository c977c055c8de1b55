// Hugging Face GPT-2 -> Tessera GPT names (see hf_names.h and README.md).
#include <cstring>

#include "autograd/ops.h"
#include "models/hf/hf_common.h"

namespace tessera::hf {

using detail::split_layer;
using detail::strip_prefix;

namespace {

// A checkpoint read back holds a tied weight under both names as two tensors of equal bytes.
bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(kCPU).contiguous(), y = b.to(kCPU).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * dtype_size(x.dtype())) == 0;
}

}  // namespace

NamedTensors from_hf_gpt2(const NamedTensors& hf) {
  const char* op = "from_hf_gpt2";
  NamedTensors out;
  Tensor wte, lm_head;
  for (const auto& [hf_name, t] : hf) {
    std::string name = hf_name;
    strip_prefix(name, "transformer.");
    if (name == "lm_head.weight") {
      lm_head = t.detach();
      continue;
    }
    if (name == "wte.weight") wte = t.detach();
    if (name == "wte.weight" || name == "wpe.weight" || name == "ln_f.weight" ||
        name == "ln_f.bias") {
      out.emplace_back(name, t.detach());
      continue;
    }
    auto layer = split_layer(name, "h.");
    TS_CHECK(layer.has_value(), op, "expected a Hugging Face GPT-2 tensor name, got '", hf_name,
             "'");
    const std::string& rest = layer->second;
    // The causal-mask buffers of older files: our attention is causal by construction.
    if (rest == "attn.bias" || rest == "attn.masked_bias") continue;
    if (rest == "ln_1.weight" || rest == "ln_1.bias" || rest == "ln_2.weight" ||
        rest == "ln_2.bias" || rest == "attn.c_attn.bias" || rest == "attn.c_proj.bias" ||
        rest == "mlp.c_fc.bias" || rest == "mlp.c_proj.bias") {
      out.emplace_back(name, t.detach());
    } else if (rest == "attn.c_attn.weight" || rest == "attn.c_proj.weight" ||
               rest == "mlp.c_fc.weight" || rest == "mlp.c_proj.weight") {
      out.emplace_back(name, detail::transposed(t, op, hf_name));  // Conv1D (in, out) -> (out, in)
    } else {
      TS_FAIL(op, "expected a Hugging Face GPT-2 tensor name, got '", hf_name, "'");
    }
  }
  TS_CHECK(wte.defined(), op, "expected wte.weight (the token embedding) among ", hf.size(),
           " tensors, got none");
  out.emplace_back("lm_head.weight", lm_head.defined() ? lm_head : wte);
  return out;
}

NamedTensors to_hf_gpt2(const NamedTensors& ours) {
  const char* op = "to_hf_gpt2";
  NamedTensors out;
  Tensor wte, lm_head;
  for (const auto& [name, t] : ours) {
    if (name == "lm_head.weight") {
      lm_head = t.detach();
      continue;
    }
    if (name == "wte.weight") wte = t.detach();
    const auto layer = split_layer(name, "h.");
    const std::string rest = layer ? layer->second : "";
    const bool conv1d = rest == "attn.c_attn.weight" || rest == "attn.c_proj.weight" ||
                        rest == "mlp.c_fc.weight" || rest == "mlp.c_proj.weight";
    TS_CHECK(layer || name == "wte.weight" || name == "wpe.weight" || name == "ln_f.weight" ||
                 name == "ln_f.bias",
             op, "expected a Tessera GPT tensor name, got '", name, "'");
    // Linear (out, in) -> Conv1D (in, out).
    out.emplace_back("transformer." + name, conv1d ? detail::transposed(t, op, name) : t.detach());
  }
  TS_CHECK(wte.defined(), op, "expected wte.weight among ", ours.size(), " tensors, got none");
  const bool tied = !lm_head.defined() || lm_head.is_same(wte) || same_bytes(lm_head, wte);
  if (!tied) out.emplace_back("lm_head.weight", lm_head);
  return out;
}

}  // namespace tessera::hf
