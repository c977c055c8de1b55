// Shape ops: views share storage, values, errors for bad dims and indices, and gradients of every
// op (finite differences, including non-contiguous inputs).
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "tests/testing/compare.h"
#include "tests/testing/gradcheck.h"

using namespace tessera;
using tessera::testing::gradcheck;
using tessera::testing::require_close;
using Inputs = std::vector<Tensor>;

namespace {
Generator g_gen(23);

Tensor rand_leaf(Shape shape) {
  Tensor t = empty(shape);
  uniform_(t, -1.0, 1.0, &g_gen);
  t.set_requires_grad(true);
  return t;
}

// (3, 4) viewed through a transpose of (4, 3) memory.
Tensor transposed_leaf() {
  Tensor base = empty({4, 3});
  uniform_(base, -1.0, 1.0, &g_gen);
  Tensor t = base.transpose(0, 1);
  t.set_requires_grad(true);
  return t;
}

Tensor i64s(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s, {.dtype = DType::i64}); }
}  // namespace

TEST_CASE("shape: views share storage and values", "[autograd][shape]") {
  Tensor x = from_vector({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor v = view(x, {3, 2});
  REQUIRE(v.storage() == x.storage());
  require_close(transpose(x, 0, 1), from_vector({0, 3, 1, 4, 2, 5}, {3, 2}), 0, 0);
  require_close(permute(unsqueeze(x, 0), {2, 0, 1}), from_vector({0, 3, 1, 4, 2, 5}, {3, 1, 2}), 0, 0);
  require_close(slice(x, 1, 0, 3, 2), from_vector({0, 2, 3, 5}, {2, 2}), 0, 0);
  require_close(narrow(x, 1, 1, 2), from_vector({1, 2, 4, 5}, {2, 2}), 0, 0);
  require_close(select(x, 0, -1), from_vector({3, 4, 5}, {3}), 0, 0);
  require_close(expand(select(x, 1, 0), {2, 2}), from_vector({0, 3, 0, 3}, {2, 2}), 0, 0);
  require_close(flatten(x), from_vector({0, 1, 2, 3, 4, 5}, {6}), 0, 0);
  REQUIRE(squeeze(unsqueeze(x, 1), 1).shape() == Shape{2, 3});
  REQUIRE(contiguous(transpose(x, 0, 1)).is_contiguous());
  require_close(reshape(transpose(x, 0, 1), {6}), from_vector({0, 3, 1, 4, 2, 5}, {6}), 0, 0);
  REQUIRE(to_dtype(x, DType::bf16).dtype() == DType::bf16);
}

TEST_CASE("shape: cat, stack, split, chunk values", "[autograd][shape]") {
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector({5, 6}, {2, 1});
  require_close(cat({a, b}, 1), from_vector({1, 2, 5, 3, 4, 6}, {2, 3}), 0, 0);
  require_close(cat({a, transpose(a, 0, 1)}, 0), from_vector({1, 2, 3, 4, 1, 3, 2, 4}, {4, 2}), 0, 0);
  require_close(stack({select(a, 0, 0), select(a, 0, 1)}, 1), from_vector({1, 3, 2, 4}, {2, 2}), 0, 0);
  std::vector<Tensor> parts = split(from_vector({0, 1, 2, 3, 4}, {5}), 2, 0);
  REQUIRE(parts.size() == 3);
  require_close(parts[2], from_vector({4}, {1}), 0, 0);
  std::vector<Tensor> chunks = chunk(from_vector({0, 1, 2, 3, 4, 5}, {6}), 4, 0);
  REQUIRE(chunks.size() == 3);
  require_close(chunks[1], from_vector({2, 3}, {2}), 0, 0);
  REQUIRE(cat({a, from_vector<int64_t>({7, 8}, {2, 1}, {.dtype = DType::i64})}, 1).dtype() == DType::f32);
}

TEST_CASE("shape: gather and index_select values", "[autograd][shape]") {
  Tensor x = from_vector({0, 1, 2, 3, 4, 5}, {2, 3});
  require_close(gather(x, 1, i64s({2, 0, 1, 1}, {2, 2})), from_vector({2, 0, 4, 4}, {2, 2}), 0, 0);
  require_close(gather(x, 0, i64s({1, 0, 1}, {1, 3})), from_vector({3, 1, 5}, {1, 3}), 0, 0);
  require_close(index_select(x, 1, i64s({2, 2, 0}, {3})), from_vector({2, 2, 0, 5, 5, 3}, {2, 3}), 0, 0);
  require_close(index_select(x, 0, from_vector<int32_t>({1}, {1}, {.dtype = DType::i32})),
                from_vector({3, 4, 5}, {1, 3}), 0, 0);
}

TEST_CASE("shape: bad dims, shapes and indices are refused", "[autograd][shape]") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(view(x, {4, 2}), Catch::Contains("[view]") && Catch::Contains("invalid for input of size 6"));
  REQUIRE_THROWS_WITH(view(transpose(x, 0, 1), {6}), Catch::Contains("[view] cannot view"));
  REQUIRE_THROWS_WITH(transpose(x, 0, 2), Catch::Contains("[transpose] expected dim in [-2, 1], got 2"));
  REQUIRE_THROWS_WITH(permute(x, {0, 0}), Catch::Contains("[permute]"));
  REQUIRE_THROWS_WITH(select(x, 1, 3), Catch::Contains("[select] index 3 is out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(narrow(x, 1, 2, 2), Catch::Contains("[narrow]"));
  REQUIRE_THROWS_WITH(expand(x, {2, 4}), Catch::Contains("[expand] cannot expand shape (2, 3) to (2, 4)"));
  REQUIRE_THROWS_WITH(unsqueeze(x, 4), Catch::Contains("[unsqueeze] expected dim in [-3, 2], got 4"));
  REQUIRE_THROWS_WITH(cat({x, zeros({2, 2})}, 0), Catch::Contains("[cat] expected shapes that match except in dim 0, got (2, 3) and (2, 2)"));
  REQUIRE_THROWS_WITH(cat({}, 0), Catch::Contains("[cat] expected at least one tensor"));
  REQUIRE_THROWS_WITH(stack({x, zeros({3, 2})}, 0), Catch::Contains("[stack] expected tensors of one shape"));
  REQUIRE_THROWS_WITH(split(x, 0, 1), Catch::Contains("[split] expected a positive split size, got 0"));
  REQUIRE_THROWS_WITH(chunk(x, 0, 1), Catch::Contains("[chunk] expected a positive number of chunks"));
  REQUIRE_THROWS_WITH(gather(x, 1, i64s({0, 3}, {2, 1})), Catch::Contains("[gather] index 3 is out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(gather(x, 1, i64s({-1, 0}, {2, 1})), Catch::Contains("[gather] index -1 is out of range"));
  REQUIRE_THROWS_WITH(gather(x, 1, i64s({0, 1}, {2})), Catch::Contains("[gather] expected an index with as many dims"));
  REQUIRE_THROWS_WITH(gather(x, 1, zeros({2, 1})), Catch::Contains("[gather] expected an i64 or i32 index"));
  REQUIRE_THROWS_WITH(index_select(x, 0, i64s({2}, {1})), Catch::Contains("[index_select] index 2 is out of range for dim 0 of size 2"));
  REQUIRE_THROWS_WITH(index_select(x, 2, i64s({0}, {1})), Catch::Contains("[index_select] expected dim in [-2, 1], got 2"));
}

TEST_CASE("shape: gradients of view ops", "[autograd][shape]") {
  using Fn = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, Fn>> fns = {
      {"reshape", [](const Tensor& x) { return reshape(x, {2, 6}); }},
      {"view", [](const Tensor& x) { return view(contiguous(x), {4, 3}); }},
      {"flatten", [](const Tensor& x) { return flatten(x); }},
      {"permute", [](const Tensor& x) { return permute(unsqueeze(x, 1), {2, 0, 1}); }},
      {"transpose", [](const Tensor& x) { return transpose(x, 0, 1); }},
      {"slice", [](const Tensor& x) { return slice(x, 1, 1, 4, 2); }},
      {"narrow", [](const Tensor& x) { return narrow(x, 0, 1, 2); }},
      {"select", [](const Tensor& x) { return select(x, 1, -1); }},
      {"expand", [](const Tensor& x) { return expand(unsqueeze(x, 0), {2, 3, 4}); }},
      {"expand ones", [](const Tensor& x) { return expand(narrow(x, 1, 0, 1), {3, 5}); }},
      {"squeeze", [](const Tensor& x) { return squeeze(narrow(x, 0, 1, 1), 0); }},
      {"contiguous", [](const Tensor& x) { return contiguous(transpose(x, 0, 1)); }},
      {"to_dtype", [](const Tensor& x) { return to_dtype(mul(to_dtype(x, DType::bf16), 1.0), DType::f32); }},
      {"split", [](const Tensor& x) { auto p = split(x, 3, 1); return mul(p[1], narrow(p[0], 1, 0, 1)); }},
      {"chunk", [](const Tensor& x) { return chunk(x, 2, 0)[1]; }},
  };
  for (auto& [name, f] : fns) {
    INFO(name);
    // bf16 rounding (spacing up to 2^-8 here) needs a wide step; the function is linear.
    testing::GradcheckOptions opts;
    if (std::string(name) == "to_dtype") opts = {.eps = 0.1, .atol = 0.05, .rtol = 0.05};
    CHECK(gradcheck([f = f](const Inputs& in) { return f(in[0]); }, {rand_leaf({3, 4})}, opts));
    CHECK(gradcheck([f = f](const Inputs& in) { return f(in[0]); }, {transposed_leaf()}, opts));
  }
}

TEST_CASE("shape: gradients of joins and indexing", "[autograd][shape]") {
  CHECK(gradcheck([](const Inputs& in) { return cat({in[0], in[1], in[0]}, 1); }, {rand_leaf({3, 2}), transposed_leaf()}));
  CHECK(gradcheck([](const Inputs& in) { return stack({in[0], in[1]}, -1); }, {rand_leaf({3, 4}), transposed_leaf()}));
  Tensor idx = i64s({2, 0, 0, 3, 1, 1}, {3, 2});
  CHECK(gradcheck([&](const Inputs& in) { return gather(in[0], 1, idx); }, {transposed_leaf()}));
  Tensor rows = i64s({1, 1, 0, 2}, {4});
  CHECK(gradcheck([&](const Inputs& in) { return index_select(in[0], 0, rows); }, {transposed_leaf()}));
  CHECK(gradcheck([&](const Inputs& in) { return index_select(in[0], 1, rows); }, {rand_leaf({2, 3})}));
  // A split output that is never used gets a zero gradient.
  Tensor x = rand_leaf({4});
  autograd::backward({sum(split(x, 2, 0)[1])});
  require_close(x.grad(), from_vector({0, 0, 1, 1}, {4}), 0, 0);
}

TEST_CASE("shape: split's gradient takes its input's memory layout", "[autograd][shape]") {
  // Attention's q, k, v: a split of a permuted view of one projection output.
  Tensor base = rand_leaf({4, 6});
  Tensor heads = permute(reshape(base, {4, 2, 3}), {1, 0, 2});  // (2, 4, 3), strides (3, 6, 1)
  std::vector<Tensor> parts = split(heads, 1, 0);
  Tensor w = from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 4, 3});
  Tensor g = autograd::grad({sum(mul(parts[1], w))}, {heads})[0];
  CHECK(g.strides() == heads.strides());
  Tensor want = cat({zeros({1, 4, 3}), w}, 0);  // the unused piece's gradient is zero
  require_close(g, want, 0, 0);
  // Back through the permute and the reshape to the base.
  autograd::backward({sum(mul(parts[1], w))});
  require_close(base.grad(), reshape(permute(want, {1, 0, 2}), {4, 6}), 0, 0);
  // The same join is differentiable again.
  CHECK(gradcheck(
      [](const Inputs& in) {
        std::vector<Tensor> p = split(permute(reshape(in[0], {2, 2, 3}), {1, 0, 2}), 1, 0);
        Tensor y = sum(square(mul(p[0], p[1])));
        return autograd::grad({y}, {in[0]}, {}, {.create_graph = true})[0];
      },
      {rand_leaf({2, 6})}));
}

TEST_CASE("shape: view-op gradients are differentiable again", "[autograd][shape]") {
  // d/dx of sum((select(x) * x[...])^2)-style expressions through create_graph.
  CHECK(gradcheck(
      [](const Inputs& in) {
        Tensor y = sum(square(mul(select(in[0], 0, 1), squeeze(slice(in[0], 0, 0, 1), 0))));
        return autograd::grad({y}, {in[0]}, {}, {.create_graph = true})[0];
      },
      {rand_leaf({2, 3})}));
  CHECK(gradcheck(
      [](const Inputs& in) {
        Tensor idx = from_vector<int64_t>({1, 0, 1}, {1, 3}, {.dtype = DType::i64});
        Tensor y = sum(pow(gather(in[0], 0, idx), 3.0));
        return autograd::grad({y}, {in[0]}, {}, {.create_graph = true})[0];
      },
      {rand_leaf({2, 3})}));
}
