// Element-wise ops (binary with broadcasting, scalar operands, operators, unary math, activations,
// where / masked_fill / clamp) against PyTorch: fixtures/elementwise.json. Tolerances: see
// reference_runner.h (rtol 1e-5, atol 1e-5 at the tensor's scale; the reference is exact f64
// rounded to f32, so this bounds Tessera's own f32 error).
#include <catch2/catch.hpp>
#include <optional>

#include "autograd/ops.h"
#include "tests/reference/reference_runner.h"

namespace tessera::reference {
namespace {

using Ins = std::vector<Tensor>;
using nlohmann::json;

OpFn binary(Tensor (*fn)(const Tensor&, const Tensor&)) {
  return [fn](const Ins& x, const json&) { return Ins{fn(x.at(0), x.at(1))}; };
}
OpFn unary(Tensor (*fn)(const Tensor&)) {
  return [fn](const Ins& x, const json&) { return Ins{fn(x.at(0))}; };
}
OpFn with_scalar(Tensor (*fn)(const Tensor&, double)) {
  return
      [fn](const Ins& x, const json& p) { return Ins{fn(x.at(0), p.at("scalar").get<double>())}; };
}
std::optional<double> bound(const json& p, const char* key) {
  return p.at(key).is_null() ? std::nullopt : std::optional<double>(p.at(key).get<double>());
}

OpTable table() {
  OpTable t;
  using TT = Tensor (*)(const Tensor&, const Tensor&);
  using TD = Tensor (*)(const Tensor&, double);
  t["add"] = binary(static_cast<TT>(&add));
  t["sub"] = binary(static_cast<TT>(&sub));
  t["mul"] = binary(static_cast<TT>(&mul));
  t["div"] = binary(static_cast<TT>(&div));
  t["pow"] = binary(static_cast<TT>(&pow));
  t["maximum"] = binary(&maximum);
  t["minimum"] = binary(&minimum);
  t["add_scalar"] = with_scalar(static_cast<TD>(&add));
  t["sub_scalar"] = with_scalar(static_cast<TD>(&sub));
  t["mul_scalar"] = with_scalar(static_cast<TD>(&mul));
  t["div_scalar"] = with_scalar(static_cast<TD>(&div));
  t["pow_scalar"] = [](const Ins& x, const json& p) {
    return Ins{pow(x.at(0), p.at("exponent").get<double>())};
  };
  // The double-on-the-left operators.
  t["radd_scalar"] = [](const Ins& x, const json& p) {
    return Ins{p.at("scalar").get<double>() + x.at(0)};
  };
  t["rsub_scalar"] = [](const Ins& x, const json& p) {
    return Ins{p.at("scalar").get<double>() - x.at(0)};
  };
  t["rmul_scalar"] = [](const Ins& x, const json& p) {
    return Ins{p.at("scalar").get<double>() * x.at(0)};
  };
  t["rdiv_scalar"] = [](const Ins& x, const json& p) {
    return Ins{p.at("scalar").get<double>() / x.at(0)};
  };
  t["op_add"] = [](const Ins& x, const json&) { return Ins{x.at(0) + x.at(1)}; };
  t["op_sub"] = [](const Ins& x, const json&) { return Ins{x.at(0) - x.at(1)}; };
  t["op_mul"] = [](const Ins& x, const json&) { return Ins{x.at(0) * x.at(1)}; };
  t["op_div"] = [](const Ins& x, const json&) { return Ins{x.at(0) / x.at(1)}; };
  t["op_neg"] = [](const Ins& x, const json&) { return Ins{-x.at(0)}; };

  t["neg"] = unary(&neg);
  t["abs"] = unary(&abs);
  t["exp"] = unary(&exp);
  t["log"] = unary(&log);
  t["sqrt"] = unary(&sqrt);
  t["rsqrt"] = unary(&rsqrt);
  t["square"] = unary(&square);
  t["reciprocal"] = unary(&reciprocal);
  t["sin"] = unary(&sin);
  t["cos"] = unary(&cos);
  t["tanh"] = unary(&tanh);
  t["sigmoid"] = unary(&sigmoid);
  t["relu"] = unary(&relu);
  t["silu"] = unary(&silu);
  t["sign"] = unary(&sign);
  t["gelu"] = [](const Ins& x, const json& p) {
    return Ins{gelu(x.at(0), p.at("approximate").get<std::string>())};
  };

  t["where"] = [](const Ins& x, const json&) { return Ins{where(x.at(0), x.at(1), x.at(2))}; };
  t["masked_fill"] = [](const Ins& x, const json& p) {
    return Ins{masked_fill(x.at(0), x.at(1), p.at("value").get<double>())};
  };
  t["clamp"] = [](const Ins& x, const json& p) {
    return Ins{clamp(x.at(0), bound(p, "lo"), bound(p, "hi"))};
  };
  return t;
}

TEST_CASE("element-wise ops match PyTorch values and gradients", "[reference]") {
  check_family("elementwise", table());
}

}  // namespace
}  // namespace tessera::reference
