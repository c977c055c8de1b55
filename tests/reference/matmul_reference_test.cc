// matmul (2-D, batched, broadcast batch dims, 1-D operands, non-contiguous operands) and linear
// against PyTorch: fixtures/matmul.json. Tolerances: see reference_runner.h (K <= 8 here, so f32
// accumulation stays well inside them).
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "tests/reference/reference_runner.h"

namespace tessera::reference {
namespace {

using Ins = std::vector<Tensor>;
using nlohmann::json;

OpTable table() {
  OpTable t;
  t["matmul"] = [](const Ins& x, const json&) { return Ins{matmul(x.at(0), x.at(1))}; };
  t["linear"] = [](const Ins& x, const json&) {
    return Ins{linear(x.at(0), x.at(1), x.size() > 2 ? x.at(2) : Tensor())};
  };
  return t;
}

TEST_CASE("matmul and linear match PyTorch values and gradients", "[reference]") {
  check_family("matmul", table());
}

}  // namespace
}  // namespace tessera::reference
