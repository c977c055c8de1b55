// Neural-network ops (softmax, log_softmax, layer_norm, embedding, cross_entropy with
// ignore_index, label smoothing and every reduction) and scaled dot-product attention (causal,
// padding mask, custom scale, fully masked rows; no dropout) against PyTorch: fixtures/nn.json and
// fixtures/attention.json. Tolerances: see reference_runner.h.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "tests/reference/reference_runner.h"

namespace tessera::reference {
namespace {

using Ins = std::vector<Tensor>;
using nlohmann::json;

OpTable nn_table() {
  OpTable t;
  t["softmax"] = [](const Ins& x, const json& p) {
    return Ins{softmax(x.at(0), p.at("dim").get<int64_t>())};
  };
  t["log_softmax"] = [](const Ins& x, const json& p) {
    return Ins{log_softmax(x.at(0), p.at("dim").get<int64_t>())};
  };
  t["layer_norm"] = [](const Ins& x, const json& p) {
    // Inputs are x, then weight and bias when the case has them.
    const bool has_w = p.at("weight").get<bool>(), has_b = p.at("bias").get<bool>();
    const Tensor w = has_w ? x.at(1) : Tensor();
    const Tensor b = has_b ? x.at(has_w ? 2 : 1) : Tensor();
    return Ins{layer_norm(x.at(0), w, b, p.at("eps").get<double>())};
  };
  t["embedding"] = [](const Ins& x, const json&) { return Ins{embedding(x.at(0), x.at(1))}; };
  t["cross_entropy"] = [](const Ins& x, const json& p) {
    CrossEntropyOptions opts;
    opts.ignore_index = p.at("ignore_index").get<int64_t>();
    opts.label_smoothing = p.at("label_smoothing").get<double>();
    opts.reduction = p.at("reduction").get<std::string>();
    return Ins{cross_entropy(x.at(0), x.at(1), opts)};
  };
  return t;
}

OpTable attention_table() {
  OpTable t;
  t["scaled_dot_product_attention"] = [](const Ins& x, const json& p) {
    AttentionArgs args;
    args.causal = p.at("causal").get<bool>();
    if (!p.at("scale").is_null()) args.scale = p.at("scale").get<double>();
    if (p.at("has_mask").get<bool>()) args.key_padding_mask = x.at(3);
    return Ins{scaled_dot_product_attention(x.at(0), x.at(1), x.at(2), args)};
  };
  return t;
}

TEST_CASE("nn ops and cross-entropy match PyTorch values and gradients", "[reference]") {
  check_family("nn", nn_table());
}

TEST_CASE("scaled dot-product attention matches PyTorch values and gradients", "[reference]") {
  check_family("attention", attention_table());
}

}  // namespace
}  // namespace tessera::reference
