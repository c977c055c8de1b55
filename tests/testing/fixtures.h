// Loads the PyTorch reference fixtures written by tests/reference/gen_fixtures.py (one JSON file
// per op family) into cases whose tensors become Tessera tensors on demand.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tessera::testing {

// A view the test applies to a stored input before the call, with the differentiable ops:
// {"transpose", {d0, d1}} or {"slice", {dim, start, end, step}}.
struct FixtureView {
  std::string kind;
  std::vector<int64_t> args;
};

struct FixtureTensor {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<double> values;  // row-major, shape_numel(shape) of them
  bool requires_grad = false;
  std::vector<FixtureView> views;

  // A new contiguous CPU leaf holding the stored values (requires_grad as recorded; views not
  // applied).
  Tensor to_tensor() const;
};

struct FixtureCase {
  std::string name;
  std::string op;
  nlohmann::json params;
  std::vector<FixtureTensor> inputs;
  std::vector<FixtureTensor> weights;  // one per output: backward runs on sum(out * w)
  std::vector<FixtureTensor> outputs;
  std::vector<std::optional<FixtureTensor>> grads;  // one per input; nullopt where none is expected
};

struct FixtureFile {
  std::string family;
  std::string compute;  // how the reference was computed (precision), as the generator says
  std::vector<FixtureCase> cases;
};

// Where a fixture lives at test time: `relative` (to the workspace root) under the Bazel runfiles
// tree ($TEST_SRCDIR/$TEST_WORKSPACE) when that exists, else relative to the working directory.
std::string fixture_path(const std::string& relative);

// Parses a fixture file; throws std::runtime_error naming the file and the case on malformed input.
FixtureFile load_fixture_file(const std::string& path);

// "f32", "i64", "i32", "bool" -> DType; throws on anything else.
DType fixture_dtype(const std::string& name);

}  // namespace tessera::testing
