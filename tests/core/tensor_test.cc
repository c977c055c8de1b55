// Tensor handles, views sharing storage, copies, dtype conversion and error messages.
#include <catch2/catch.hpp>

#include "core/factory.h"
#include "core/tensor.h"

using namespace tessera;

TEST_CASE("views share storage and see writes", "[core]") {
  Tensor a = arange(0, 6, 1, {.dtype = DType::f32}).view({2, 3});
  Tensor t = a.transpose(0, 1);
  REQUIRE(t.shape() == Shape{3, 2});
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE(t.select(0, 2).select(0, 1).item() == 5.0);
  a.select(1, 2).fill_(-1.0);
  REQUIRE(t.select(0, 2).select(0, 0).item() == -1.0);
  Tensor c = t.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE(c.storage() != a.storage());
  REQUIRE(c.select(0, 1).select(0, 1).item() == 4.0);
}

TEST_CASE("reshape views when it can and copies when it must", "[core]") {
  Tensor a = arange(0, 24, 1, {.dtype = DType::f32}).view({2, 3, 4});
  REQUIRE(a.reshape({6, 4}).storage() == a.storage());
  Tensor t = a.transpose(1, 2);  // (2, 4, 3), not viewable as (2, 12)
  REQUIRE_THROWS_WITH(t.view({2, 12}), Catch::Contains("[view] cannot view"));
  Tensor r = t.reshape({2, 12});
  REQUIRE(r.storage() != a.storage());
  REQUIRE(r.select(0, 0).select(0, 1).item() == 4.0);
  REQUIRE(a.view({-1}).shape() == Shape{24});
  REQUIRE_THROWS_WITH(a.view({5, -1}), Catch::Contains("invalid for input of size 24"));
}

TEST_CASE("slice, narrow, expand, squeeze, unsqueeze", "[core]") {
  Tensor a = arange(0, 10, 1, {.dtype = DType::f32});
  Tensor s = a.slice(0, 1, 9, 3);  // 1, 4, 7
  REQUIRE(s.shape() == Shape{3});
  REQUIRE(s.select(0, 2).item() == 7.0);
  REQUIRE(a.narrow(0, 8, 2).select(0, 1).item() == 9.0);
  REQUIRE_THROWS_WITH(a.narrow(0, 8, 3), Catch::Contains("[narrow]"));
  Tensor e = a.narrow(0, 0, 3).unsqueeze(0).expand({4, 3});
  REQUIRE(e.strides() == Strides{0, 1});
  REQUIRE(e.select(0, 3).select(0, 2).item() == 2.0);
  REQUIRE(e.unsqueeze(-1).shape() == Shape{4, 3, 1});
  REQUIRE(e.unsqueeze(-1).squeeze().shape() == Shape{4, 3});
  REQUIRE_THROWS_WITH(a.expand({3, 4}), Catch::Contains("cannot expand shape (10)"));
}

TEST_CASE("dtype conversion rounds to nearest even", "[core]") {
  Tensor a = from_vector(std::vector<float>{1.0f, 1.00390625f, 1.01171875f, 65520.0f, 1e-8f}, {5});
  Tensor b = a.to(DType::bf16).to(DType::f32);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1.
  REQUIRE(b.select(0, 1).item() == 1.0);
  REQUIRE(b.select(0, 2).item() == 1.015625);
  Tensor h = a.to(DType::f16).to(DType::f32);
  REQUIRE(std::isinf(h.select(0, 3).item()));
  REQUIRE(h.select(0, 4).item() == 0.0);
  Tensor i = from_vector(std::vector<float>{2.7f, -2.7f}, {2}).to(DType::i64);
  REQUIRE(i.select(0, 0).item() == 2.0);
  REQUIRE(i.select(0, 1).item() == -2.0);
}

TEST_CASE("random draws depend only on seed, offset and index", "[core]") {
  Generator g1(7), g2(7);
  Tensor whole = randn({8, 4}, {}, &g1);
  // Draw the same tensor in two shards: second shard starts at counter offset 16.
  Generator shard_gen(7);
  Tensor first = randn({4, 4}, {}, &shard_gen);
  Tensor second = randn({4, 4}, {}, &shard_gen);
  REQUIRE(whole.select(0, 5).select(0, 3).item() == second.select(0, 1).select(0, 3).item());
  REQUIRE(whole.select(0, 0).select(0, 0).item() == first.select(0, 0).select(0, 0).item());
  Tensor again = randn({8, 4}, {}, &g2);
  REQUIRE(again.select(0, 7).select(0, 1).item() == whole.select(0, 7).select(0, 1).item());
  Tensor u = rand({10000});
  double mean = 0;
  for (int64_t i = 0; i < 10000; ++i) mean += u.select(0, i).item();
  REQUIRE(std::abs(mean / 10000 - 0.5) < 0.02);
}

TEST_CASE("errors name the op and the shapes", "[core]") {
  Tensor a = zeros({2, 3});
  REQUIRE_THROWS_AS(a.select(2, 0), ValueError);
  REQUIRE_THROWS_WITH(a.select(0, 5), Catch::Contains("[select] index 5 is out of range"));
  REQUIRE_THROWS_WITH(a.data<int64_t>(), Catch::Contains("expected dtype i64, got f32"));
  REQUIRE_THROWS_WITH(a.to(cuda_device(0)), Catch::Contains("CUDA is not available"));
  REQUIRE_THROWS_WITH(a.permute({0, 0}), Catch::Contains("appears twice"));
}

TEST_CASE("printing abbreviates like PyTorch", "[core]") {
  Tensor a = arange(0, 6, 1, {.dtype = DType::f32}).view({2, 3});
  REQUIRE(a.to_string() == "tensor([[0.0000, 1.0000, 2.0000],\n        [3.0000, 4.0000, 5.0000]], shape=(2, 3), dtype=f32, device=cpu)");
  Tensor big = zeros({2000}, {.dtype = DType::i64});
  REQUIRE(big.to_string().find("0, 0, 0, ..., 0, 0, 0]") != std::string::npos);
}

TEST_CASE("factories keep the element type and accept empty shapes", "[core]") {
  REQUIRE(from_vector<int64_t>({1, 2, 3}, {3}).dtype() == DType::i64);
  REQUIRE(from_vector<int32_t>({1, 2}, {2}).dtype() == DType::i32);
  REQUIRE(from_vector<bool>({true, false}, {2}).dtype() == DType::b8);
  REQUIRE(from_vector<double>({0.5}, {1}).dtype() == DType::f32);
  REQUIRE(from_vector<int64_t>({7}, {1}, {.dtype = DType::f32}).dtype() == DType::f32);
  Tensor z = zeros({0, 3});
  REQUIRE(z.numel() == 0);
  REQUIRE(z.clone().shape() == Shape{0, 3});
  REQUIRE(arange(0, 0).numel() == 0);
  REQUIRE_THROWS_WITH(from_vector<float>({1, 2}, {3}), Catch::Contains("[from_vector] expected 3 values"));
}

TEST_CASE("is_sole_owner: only a lone handle to a whole, dense storage", "[core]") {
  Tensor t = zeros({2, 3});
  CHECK(t.is_sole_owner());
  {
    Tensor copy = t;  // a second handle
    CHECK_FALSE(t.is_sole_owner());
  }
  CHECK(t.is_sole_owner());
  {
    Tensor view = t.narrow(0, 0, 1);  // another impl on the same storage
    CHECK_FALSE(t.is_sole_owner());
    CHECK_FALSE(view.is_sole_owner());
  }
  CHECK_FALSE(zeros({3, 2}).transpose(0, 1).is_sole_owner());  // not contiguous
  CHECK_FALSE(Tensor().is_sole_owner());
}
