// Differentiable shape ops (views, copies, cat / stack / split / chunk, gather, index_select)
// against PyTorch: fixtures/shape.json. Tolerances: see reference_runner.h (these ops move values,
// so anything but an exact match is a bug; the shared tolerance still applies).
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "tests/reference/reference_runner.h"

namespace tessera::reference {
namespace {

using Ins = std::vector<Tensor>;
using nlohmann::json;

int64_t int_at(const json& p, const char* key) { return p.at(key).get<int64_t>(); }

OpTable table() {
  OpTable t;
  t["reshape"] = [](const Ins& x, const json& p) {
    return Ins{reshape(x.at(0), int_list(p, "shape"))};
  };
  t["view"] = [](const Ins& x, const json& p) { return Ins{view(x.at(0), int_list(p, "shape"))}; };
  t["flatten"] = [](const Ins& x, const json& p) {
    return Ins{flatten(x.at(0), int_at(p, "start"), int_at(p, "end"))};
  };
  t["permute"] = [](const Ins& x, const json& p) {
    return Ins{permute(x.at(0), int_list(p, "dims"))};
  };
  t["transpose"] = [](const Ins& x, const json& p) {
    return Ins{transpose(x.at(0), int_at(p, "d0"), int_at(p, "d1"))};
  };
  t["slice"] = [](const Ins& x, const json& p) {
    return Ins{
        slice(x.at(0), int_at(p, "dim"), int_at(p, "start"), int_at(p, "end"), int_at(p, "step"))};
  };
  t["narrow"] = [](const Ins& x, const json& p) {
    return Ins{narrow(x.at(0), int_at(p, "dim"), int_at(p, "start"), int_at(p, "length"))};
  };
  t["select"] = [](const Ins& x, const json& p) {
    return Ins{select(x.at(0), int_at(p, "dim"), int_at(p, "index"))};
  };
  t["expand"] = [](const Ins& x, const json& p) {
    return Ins{expand(x.at(0), int_list(p, "shape"))};
  };
  t["squeeze"] = [](const Ins& x, const json& p) {
    return Ins{squeeze(x.at(0), int_at(p, "dim"))};
  };
  t["unsqueeze"] = [](const Ins& x, const json& p) {
    return Ins{unsqueeze(x.at(0), int_at(p, "dim"))};
  };
  t["contiguous"] = [](const Ins& x, const json&) { return Ins{contiguous(x.at(0))}; };
  t["cat"] = [](const Ins& x, const json& p) { return Ins{cat(x, int_at(p, "dim"))}; };
  t["stack"] = [](const Ins& x, const json& p) { return Ins{stack(x, int_at(p, "dim"))}; };
  t["split"] = [](const Ins& x, const json& p) {
    return split(x.at(0), int_at(p, "split_size"), int_at(p, "dim"));
  };
  t["chunk"] = [](const Ins& x, const json& p) {
    return chunk(x.at(0), int_at(p, "chunks"), int_at(p, "dim"));
  };
  t["gather"] = [](const Ins& x, const json& p) {
    return Ins{gather(x.at(0), int_at(p, "dim"), x.at(1))};
  };
  t["index_select"] = [](const Ins& x, const json& p) {
    return Ins{index_select(x.at(0), int_at(p, "dim"), x.at(1))};
  };
  return t;
}

TEST_CASE("shape ops match PyTorch values and gradients", "[reference]") {
  check_family("shape", table());
}

}  // namespace
}  // namespace tessera::reference
