// Parsing of reference fixture files (see fixtures.h and tests/reference/gen_fixtures.py).
#include "tests/testing/fixtures.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/factory.h"

namespace tessera::testing {

namespace {

using nlohmann::json;

FixtureTensor parse_tensor(const json& j) {
  FixtureTensor t;
  t.shape = j.at("shape").get<Shape>();
  t.dtype = fixture_dtype(j.at("dtype").get<std::string>());
  for (const json& v : j.at("values"))
    t.values.push_back(v.is_boolean() ? double(v.get<bool>()) : v.get<double>());
  if (int64_t(t.values.size()) != shape_numel(t.shape)) {
    throw std::runtime_error("[fixture] expected " + std::to_string(shape_numel(t.shape)) +
                             " values for shape " + shape_str(t.shape) + ", got " +
                             std::to_string(t.values.size()));
  }
  t.requires_grad = j.value("requires_grad", false);
  if (j.contains("views")) {
    for (const json& v : j.at("views")) {
      FixtureView view;
      view.kind = v.at(0).get<std::string>();
      for (size_t i = 1; i < v.size(); ++i) view.args.push_back(v.at(i).get<int64_t>());
      t.views.push_back(std::move(view));
    }
  }
  return t;
}

std::vector<FixtureTensor> parse_tensors(const json& list) {
  std::vector<FixtureTensor> out;
  for (const json& j : list) out.push_back(parse_tensor(j));
  return out;
}

FixtureCase parse_case(const json& j) {
  FixtureCase c;
  c.name = j.at("name").get<std::string>();
  try {
    c.op = j.at("op").get<std::string>();
    c.params = j.at("params");
    c.inputs = parse_tensors(j.at("inputs"));
    c.weights = parse_tensors(j.at("weights"));
    c.outputs = parse_tensors(j.at("outputs"));
    for (const json& g : j.at("grads")) {
      c.grads.push_back(g.is_null() ? std::nullopt : std::optional<FixtureTensor>(parse_tensor(g)));
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("[fixture] case '" + c.name + "': " + e.what());
  }
  if (c.weights.size() != c.outputs.size() || c.grads.size() != c.inputs.size()) {
    throw std::runtime_error("[fixture] case '" + c.name +
                             "': expected one weight per output and one grad entry per input");
  }
  return c;
}

}  // namespace

DType fixture_dtype(const std::string& name) {
  if (name == "f32") return DType::f32;
  if (name == "i64") return DType::i64;
  if (name == "i32") return DType::i32;
  if (name == "bool") return DType::b8;
  throw std::runtime_error("[fixture] expected dtype f32, i64, i32 or bool, got '" + name + "'");
}

Tensor FixtureTensor::to_tensor() const {
  return from_vector<double>(values, shape, {.dtype = dtype, .requires_grad = requires_grad});
}

std::string fixture_path(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    std::filesystem::path p = std::filesystem::path(srcdir) / workspace / relative;
    if (std::filesystem::exists(p)) return p.string();
  }
  return relative;
}

FixtureFile load_fixture_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("[fixture] cannot open '" + path + "'");
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error("[fixture] '" + path + "' is not valid JSON: " + e.what());
  }
  FixtureFile file;
  file.family = root.value("family", "");
  file.compute = root.value("compute", "");
  for (const json& c : root.at("cases")) file.cases.push_back(parse_case(c));
  return file;
}

}  // namespace tessera::testing
