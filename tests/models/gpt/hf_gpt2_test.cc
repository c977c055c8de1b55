// The Hugging Face GPT-2 name mapping on small synthetic tensors: prefixes, Conv1D transposes,
// skipped mask buffers, the tied head, and errors naming the tensor.
#include <catch2/catch.hpp>
#include <map>

#include "core/factory.h"
#include "models/hf/hf_names.h"
#include "tests/testing/compare.h"

namespace tessera::hf {
namespace {

Tensor seq(const Shape& shape, double start = 0) {
  return arange(start, start + double(shape_numel(shape)), 1.0, {.dtype = DType::f32})
      .reshape(shape);
}

std::map<std::string, Tensor> as_map(const NamedTensors& v) { return {v.begin(), v.end()}; }

TEST_CASE("from_hf_gpt2 renames, transposes Conv1D weights and ties the head", "[hf][gpt]") {
  for (const std::string prefix : {"", "transformer."}) {
    INFO("prefix '" << prefix << "'");
    NamedTensors hf = {
        {prefix + "wte.weight", seq({5, 2})},
        {prefix + "wpe.weight", seq({3, 2}, 100)},
        {prefix + "h.0.attn.bias", ones({1, 1, 3, 3})},
        {prefix + "h.0.attn.masked_bias", scalar_tensor(-1e4)},
        {prefix + "h.0.attn.c_attn.weight", seq({2, 6})},  // Conv1D (in, out)
        {prefix + "h.0.attn.c_attn.bias", seq({6})},
        {prefix + "h.10.mlp.c_proj.weight", seq({8, 2})},
        {prefix + "ln_f.weight", ones({2})},
    };
    auto out = as_map(from_hf_gpt2(hf));
    CHECK(out.size() == 7);  // 2 buffers dropped, lm_head.weight added
    CHECK(out.count("h.0.attn.bias") == 0);
    testing::require_close(out.at("h.0.attn.c_attn.weight"), seq({2, 6}).transpose(0, 1), 0, 0);
    CHECK(out.at("h.0.attn.c_attn.weight").shape() == Shape{6, 2});
    CHECK(out.at("h.10.mlp.c_proj.weight").shape() == Shape{2, 8});
    testing::require_close(out.at("lm_head.weight"), seq({5, 2}), 0, 0);
    testing::require_close(out.at("wpe.weight"), seq({3, 2}, 100), 0, 0);
  }
  // An explicit (untied) head is taken from the file.
  auto out =
      as_map(from_hf_gpt2({{"wte.weight", seq({5, 2})}, {"lm_head.weight", seq({5, 2}, 7)}}));
  testing::require_close(out.at("lm_head.weight"), seq({5, 2}, 7), 0, 0);
}

TEST_CASE("from_hf_gpt2 rejects what it does not know", "[hf][gpt]") {
  auto message = [](const NamedTensors& hf) {
    try {
      from_hf_gpt2(hf);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message({{"wte.weight", seq({5, 2})}, {"h.0.attn.q_proj.weight", seq({2, 2})}})
            .find("h.0.attn.q_proj.weight") != std::string::npos);
  CHECK(message({{"wte.weight", seq({5, 2})}, {"decoder.weight", seq({2, 2})}})
            .find("decoder.weight") != std::string::npos);
  CHECK(message({{"wpe.weight", seq({3, 2})}}).find("wte.weight") != std::string::npos);
  CHECK(message({{"wte.weight", seq({5, 2})}, {"h.0.mlp.c_fc.weight", seq({4})}})
            .find("h.0.mlp.c_fc.weight") != std::string::npos);
}

}  // namespace
}  // namespace tessera::hf
