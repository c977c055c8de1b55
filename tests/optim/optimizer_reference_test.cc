// Every optimizer's parameter trajectory over 5 steps against tests/optim/fixtures/optim.json:
// torch.optim's SGD / Adam / AdamW in float32, and float64 references for LAMB and LARS (see
// gen_optim_fixtures.py), with parameter groups, skipped (null) gradients and per-step lrs.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/factory.h"
#include "optim/make_optimizer.h"
#include "tests/testing/compare.h"
#include "tests/testing/fixtures.h"

namespace {

using namespace tessera;
using nlohmann::json;

Tensor tensor_of(const json& j) {
  return from_vector<double>(j.at("values").get<std::vector<double>>(), j.at("shape").get<Shape>());
}

json load_cases() {
  const std::string path = testing::fixture_path("tests/optim/fixtures/optim.json");
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in).at("cases");
}

void run_case(const json& c) {
  INFO("case " << c.at("name").get<std::string>());
  std::vector<Tensor> params;
  for (const json& p : c.at("params")) params.push_back(tensor_of(p).set_requires_grad(true));
  std::vector<optim::ParamGroup> groups;
  for (const json& g : c.at("groups")) {
    optim::ParamGroup group;
    for (const json& i : g.at("params")) group.params.push_back(params.at(i.get<size_t>()));
    if (g.contains("lr")) group.lr = g.at("lr").get<double>();
    if (g.contains("weight_decay")) group.weight_decay = g.at("weight_decay").get<double>();
    groups.push_back(group);
  }
  auto opt = optim::make_optimizer(c.at("optimizer"), groups);
  int step = 0;
  for (const json& s : c.at("steps")) {
    ++step;
    INFO("after step " << step);
    if (s.contains("lr")) opt->set_lr(s.at("lr").get<double>());
    for (size_t i = 0; i < params.size(); ++i) {
      const json& g = s.at("grads").at(i);
      params[i].set_grad(g.is_null() ? Tensor() : tensor_of(g));
    }
    opt->step();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("param " << i);
      testing::require_close(params[i], tensor_of(s.at("expected").at(i)), 1e-5, 1e-6);
    }
  }
}

void run_type(const std::string& type) {
  int n = 0;
  for (const json& c : load_cases()) {
    if (c.at("optimizer").at("type") != type) continue;
    run_case(c);
    ++n;
  }
  REQUIRE(n >= 2);
}

TEST_CASE("SGD matches torch.optim.SGD", "[optim][reference]") { run_type("sgd"); }
TEST_CASE("Adam matches torch.optim.Adam", "[optim][reference]") { run_type("adam"); }
TEST_CASE("AdamW matches torch.optim.AdamW", "[optim][reference]") { run_type("adamw"); }
TEST_CASE("LAMB matches the float64 reference", "[optim][reference]") { run_type("lamb"); }
TEST_CASE("LARS matches the float64 reference", "[optim][reference]") { run_type("lars"); }

}  // namespace
