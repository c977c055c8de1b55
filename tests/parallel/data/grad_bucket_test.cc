// plan_buckets (pure bucket assignment) and GradBucket's flat buffer, views, pack and unpack.
#include "parallel/data/grad_bucket.h"

#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/factory.h"

using namespace tessera;
using namespace tessera::parallel;

namespace {

std::vector<size_t> reversed(size_t n) {
  std::vector<size_t> order;
  for (size_t i = n; i-- > 0;) order.push_back(i);
  return order;
}

std::vector<size_t> params_of(const BucketPlan& b) {
  std::vector<size_t> out;
  for (const BucketSlot& s : b.slots) out.push_back(s.param);
  return out;
}

}  // namespace

TEST_CASE("plan_buckets fills buckets in the given order up to the cap") {
  // f32 sizes in bytes: 400, 128, 4096, 128, 1024, 32.
  std::vector<BucketParam> params{{100}, {32}, {1024}, {32}, {256}, {8}};
  auto plans = plan_buckets(params, reversed(params.size()), 3000);
  REQUIRE(plans.size() == 3);
  CHECK(params_of(plans[0]) == std::vector<size_t>{5, 4, 3});
  CHECK(params_of(plans[1]) == std::vector<size_t>{2});  // over the cap: alone
  CHECK(params_of(plans[2]) == std::vector<size_t>{1, 0});
  CHECK(plans[0].numel == 8 + 256 + 32);
  CHECK(plans[0].slots[1].offset == 8);
  CHECK(plans[0].slots[2].offset == 8 + 256);
  CHECK(plans[2].numel == 132);
}

TEST_CASE("plan_buckets covers every parameter once and respects dtypes") {
  std::vector<BucketParam> params{
      {10, DType::f32}, {10, DType::bf16}, {10, DType::bf16}, {10, DType::f32}};
  auto plans = plan_buckets(params, {0, 1, 2, 3}, 1 << 20);
  REQUIRE(plans.size() == 3);
  CHECK(plans[0].dtype == DType::f32);
  CHECK(plans[1].dtype == DType::bf16);
  CHECK(params_of(plans[1]) == std::vector<size_t>{1, 2});
  CHECK(params_of(plans[2]) == std::vector<size_t>{3});

  // A cap of one byte: one parameter per bucket.
  CHECK(plan_buckets(params, {3, 2, 1, 0}, 1).size() == 4);
  // One big cap: one bucket per run of equal dtype.
  std::vector<BucketParam> same(7, BucketParam{3, DType::f32});
  auto one = plan_buckets(same, reversed(7), 1 << 20);
  REQUIRE(one.size() == 1);
  CHECK(one[0].numel == 21);
}

TEST_CASE("plan_buckets rejects bad orders and caps") {
  std::vector<BucketParam> params{{1}, {2}};
  CHECK_THROWS_WITH(plan_buckets(params, {0, 0}, 100), Catch::Contains("twice"));
  CHECK_THROWS_WITH(plan_buckets(params, {0, 2}, 100), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(plan_buckets(params, {0}, 100), Catch::Contains("order over all 2"));
  CHECK_THROWS_WITH(plan_buckets(params, {0, 1}, 0), Catch::Contains("positive bucket cap"));
  CHECK(plan_buckets({}, {}, 100).empty());
}

TEST_CASE("GradBucket packs and unpacks parameters through one flat buffer") {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({7, 8}, {2});
  std::vector<Tensor> params{a, b};
  auto plans = plan_buckets({{6}, {2}}, {1, 0}, 1 << 10);
  REQUIRE(plans.size() == 1);
  GradBucket bucket(plans[0], kCPU);
  CHECK(bucket.nbytes() == 32);
  CHECK(bucket.buffer().numel() == 8);
  bucket.pack(params);
  const float* buf = bucket.buffer().data<float>();
  CHECK(buf[0] == 7);  // b first: reverse order
  CHECK(buf[1] == 8);
  CHECK(buf[2] == 1);
  CHECK(buf[7] == 6);

  // Views share the buffer.
  Tensor va = bucket.slot_view(1, {2, 3});
  CHECK(va.shape() == Shape{2, 3});
  va.fill_(-1);
  CHECK(buf[2] == -1);
  bucket.unpack(params);
  CHECK(a.data<float>()[5] == -1);
  CHECK(b.data<float>()[1] == 8);
}
