// Model fixture parsing and gradient comparison (see model_fixture.h).
#include "tests/models/gpt/model_fixture.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/factory.h"
#include "tests/testing/compare.h"
#include "tests/testing/fixtures.h"

namespace tessera::testing {

namespace {

using nlohmann::json;

Tensor parse_tensor(const json& j) {
  const Shape shape = j.at("shape").get<Shape>();
  std::vector<double> values;
  for (const json& v : j.at("values"))
    values.push_back(v.is_boolean() ? double(v.get<bool>()) : v.get<double>());
  if (int64_t(values.size()) != shape_numel(shape))
    throw std::runtime_error("[model fixture] expected " + std::to_string(shape_numel(shape)) +
                             " values for shape " + shape_str(shape) + ", got " +
                             std::to_string(values.size()));
  return from_vector<double>(values, shape,
                             {.dtype = fixture_dtype(j.at("dtype").get<std::string>())});
}

nn::NamedTensors parse_named(const json& list) {
  nn::NamedTensors out;
  for (const json& j : list) out.emplace_back(j.at("name").get<std::string>(), parse_tensor(j));
  return out;
}

std::map<std::string, Tensor> parse_map(const json& obj) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : obj.items()) out.emplace(k, parse_tensor(v));
  return out;
}

}  // namespace

ModelFixture load_model_fixture(const std::string& relative) {
  const std::string path = fixture_path(relative);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("[model fixture] cannot open '" + path + "'");
  const json root = json::parse(in);
  ModelFixture f;
  f.model = root.at("model").get<std::string>();
  f.config = root.at("config");
  f.hf_params = parse_named(root.at("hf_params"));
  f.inputs = parse_map(root.at("inputs"));
  f.outputs = parse_map(root.at("outputs"));
  for (const auto& [k, v] : root.at("losses").items()) f.losses[k] = v.get<double>();
  f.loss = root.at("loss").get<double>();
  f.hf_grads = parse_named(root.at("hf_grads"));
  const json& a = root.at("adamw");
  f.adamw.lr = a.at("lr").get<double>();
  f.adamw.beta1 = a.at("betas").at(0).get<double>();
  f.adamw.beta2 = a.at("betas").at(1).get<double>();
  f.adamw.eps = a.at("eps").get<double>();
  f.adamw.weight_decay = a.at("weight_decay").get<double>();
  f.adamw.losses = a.at("losses").get<std::vector<double>>();
  return f;
}

void require_scalar_close(double actual, double expected, double rtol, double atol,
                          const std::string& what) {
  INFO(what << ": got " << actual << ", expected " << expected << " (difference "
            << actual - expected << ")");
  REQUIRE(std::isfinite(actual));
  REQUIRE(std::abs(actual - expected) <= rtol * std::abs(expected) + atol);
}

size_t require_grads_close(const nn::Module& model, const nn::NamedTensors& expected, double rtol,
                           double atol) {
  std::map<std::string, Tensor> want(expected.begin(), expected.end());
  size_t compared = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter " << name);
    auto it = want.find(name);
    REQUIRE(it != want.end());
    REQUIRE(p.grad().defined());
    require_close(p.grad(), it->second, rtol, atol);
    ++compared;
  }
  return compared;
}

std::string scratch_path(const std::string& file) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return (std::filesystem::path(dir != nullptr ? dir
                                               : std::filesystem::temp_directory_path().c_str()) /
          file)
      .string();
}

}  // namespace tessera::testing
