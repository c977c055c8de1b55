// Hugging Face GPT-2 -> Tessera GPT names (see hf_names.h and README.md).
#include "autograd/ops.h"
#include "models/hf/hf_common.h"

namespace tessera::hf {

using detail::split_layer;
using detail::strip_prefix;

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

}  // namespace tessera::hf
