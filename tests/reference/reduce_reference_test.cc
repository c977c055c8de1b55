// Reductions (sum, mean, amax, amin, var, std, norm over all / chosen / negative dims, keepdim,
// sum_to) against PyTorch: fixtures/reduce.json. Tolerances: see reference_runner.h.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/ops.h"
#include "tests/reference/reference_runner.h"

namespace tessera::reference {
namespace {

using Ins = std::vector<Tensor>;
using nlohmann::json;

OpFn over_dims(Tensor (*fn)(const Tensor&, const std::vector<int64_t>&, bool)) {
  return [fn](const Ins& x, const json& p) {
    return Ins{fn(x.at(0), int_list(p, "dims"), p.at("keepdim").get<bool>())};
  };
}
OpFn with_correction(Tensor (*fn)(const Tensor&, const std::vector<int64_t>&, int64_t, bool)) {
  return [fn](const Ins& x, const json& p) {
    return Ins{fn(x.at(0), int_list(p, "dims"), p.at("correction").get<int64_t>(),
                  p.at("keepdim").get<bool>())};
  };
}

OpTable table() {
  OpTable t;
  t["sum"] = over_dims(&sum);
  t["mean"] = over_dims(&mean);
  t["amax"] = over_dims(&amax);
  t["amin"] = over_dims(&amin);
  t["var"] = with_correction(&var);
  t["std"] = with_correction(&tessera::std);
  t["norm"] = [](const Ins& x, const json& p) {
    // JSON has no infinity: the generator writes p = "inf" for the max-abs norm.
    const double order = p.at("p").is_string() ? INFINITY : p.at("p").get<double>();
    return Ins{norm(x.at(0), order, int_list(p, "dims"), p.at("keepdim").get<bool>())};
  };
  t["sum_to"] = [](const Ins& x, const json& p) {
    return Ins{sum_to(x.at(0), int_list(p, "shape"))};
  };
  return t;
}

TEST_CASE("reductions match PyTorch values and gradients", "[reference]") {
  check_family("reduce", table());
}

}  // namespace
}  // namespace tessera::reference
