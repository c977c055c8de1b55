// plan_zero (flat slots, equal padded shards, each rank's pieces) and plan_reduce_buckets.
#include "parallel/zero/zero_plan.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using namespace tessera;
using namespace tessera::parallel::zero;

namespace {

// Every element of the group's flat range, as (param, element) seen through rank pieces, in
// rank order: the pieces of all ranks together must tile the parameters exactly once.
std::vector<std::pair<size_t, int64_t>> tiled(const ZeroGroupPlan& g) {
  std::vector<std::pair<size_t, int64_t>> out;
  for (int r = 0; r < g.ranks; ++r) {
    int64_t expect_shard_offset = -1;
    for (const ShardPiece& p : g.pieces(r)) {
      REQUIRE(p.shard_offset >= 0);
      REQUIRE(p.shard_offset + p.numel <= g.shard_numel);
      REQUIRE(p.shard_offset > expect_shard_offset);
      expect_shard_offset = p.shard_offset + p.numel - 1;
      for (int64_t i = 0; i < p.numel; ++i) out.emplace_back(p.param, p.param_offset + i);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("plan_zero packs groups in order and pads to equal aligned shards") {
  // Parameters 0..4 of 10, 7, 0, 33, 5 elements; group 0 = {3, 0}, group 1 = {1, 2, 4}.
  const std::vector<int64_t> numels{10, 7, 0, 33, 5};
  ZeroPlan plan = plan_zero(numels, {{3, 0}, {1, 2, 4}}, 4, {.align = 4});
  REQUIRE(plan.groups.size() == 2);
  const ZeroGroupPlan& g0 = plan.groups[0];
  CHECK(g0.numel == 43);
  CHECK(g0.shard_numel == 12);  // ceil(43 / 4) = 11, aligned to 4
  CHECK(g0.padded_numel() == 48);
  CHECK(g0.padding() == 5);
  REQUIRE(g0.slots.size() == 2);
  CHECK(g0.slots[0].param == 3);
  CHECK(g0.slots[0].offset == 0);
  CHECK(g0.slots[1].param == 0);
  CHECK(g0.slots[1].offset == 33);
  CHECK(plan.group_of == std::vector<size_t>{0, 1, 1, 0, 1});
  CHECK(plan.slot_of == std::vector<size_t>{1, 0, 1, 0, 2});
  const ZeroGroupPlan& g1 = plan.groups[1];
  CHECK(g1.numel == 12);
  CHECK(g1.shard_numel == 4);
}

TEST_CASE("plan_zero splits parameters at shard boundaries") {
  ZeroPlan plan = plan_zero({10, 7}, {{0, 1}}, 3, {.align = 1});
  const ZeroGroupPlan& g = plan.groups[0];
  CHECK(g.shard_numel == 6);  // 17 over 3 ranks, padding 1
  // rank 0: [0, 6) of param 0; rank 1: [6, 10) of 0 then [0, 2) of 1; rank 2: [2, 7) of 1.
  auto r0 = g.pieces(0), r1 = g.pieces(1), r2 = g.pieces(2);
  REQUIRE(r0.size() == 1);
  CHECK(
      (r0[0].param == 0 && r0[0].param_offset == 0 && r0[0].shard_offset == 0 && r0[0].numel == 6));
  REQUIRE(r1.size() == 2);
  CHECK(
      (r1[0].param == 0 && r1[0].param_offset == 6 && r1[0].shard_offset == 0 && r1[0].numel == 4));
  CHECK(
      (r1[1].param == 1 && r1[1].param_offset == 0 && r1[1].shard_offset == 4 && r1[1].numel == 2));
  REQUIRE(r2.size() == 1);
  CHECK(
      (r2[0].param == 1 && r2[0].param_offset == 2 && r2[0].shard_offset == 0 && r2[0].numel == 5));
  CHECK_THROWS_WITH(g.pieces(3), Catch::Contains("expected a rank in [0, 3)"));
}

TEST_CASE("plan_zero's pieces tile every parameter exactly once for any rank count") {
  const std::vector<int64_t> numels{1, 31, 16, 0, 97, 2, 64};
  for (int ranks : {1, 2, 3, 4, 5, 8, 16}) {
    for (int64_t align : {1, 4, 16}) {
      ZeroPlan plan = plan_zero(numels, {{0, 1, 2, 3, 4, 5, 6}}, ranks, {.align = align});
      const ZeroGroupPlan& g = plan.groups[0];
      CHECK(g.shard_numel % align == 0);
      CHECK(g.padded_numel() >= g.numel);
      CHECK(g.padded_numel() - g.numel < int64_t(ranks) * align);  // the least padding
      std::vector<std::pair<size_t, int64_t>> want;
      for (size_t p = 0; p < numels.size(); ++p)
        for (int64_t i = 0; i < numels[p]; ++i) want.emplace_back(p, i);
      CHECK(tiled(g) == want);
    }
  }
}

TEST_CASE("plan_zero gives an empty group an aligned shard of padding") {
  ZeroPlan plan = plan_zero({5}, {{0}, {}}, 2, {.align = 16});
  CHECK(plan.groups[1].numel == 0);
  CHECK(plan.groups[1].shard_numel == 16);
  CHECK(plan.groups[1].pieces(0).empty());
  CHECK(plan.groups[1].pieces(1).empty());
  // 5 elements over 2 ranks of 16: rank 1 holds only padding.
  CHECK(plan.groups[0].pieces(1).empty());
}

TEST_CASE("plan_zero refuses bad partitions") {
  CHECK_THROWS_WITH(plan_zero({1, 2}, {{0}}, 2), Catch::Contains("parameter 1 in none"));
  CHECK_THROWS_WITH(plan_zero({1, 2}, {{0, 1}, {1}}, 2), Catch::Contains("in groups 0 and 1"));
  CHECK_THROWS_WITH(plan_zero({1}, {{3}}, 2), Catch::Contains("indices below 1"));
  CHECK_THROWS_WITH(plan_zero({1}, {{0}}, 0), Catch::Contains("at least one rank"));
}

TEST_CASE("plan_reduce_buckets takes parameters last first, whole, cut by owner") {
  // One group of 4 f32 parameters: 8, 8, 40, 8 elements = 64 over 2 ranks of 32.
  ZeroPlan plan = plan_zero({8, 8, 40, 8}, {{0, 1, 2, 3}}, 2, {.align = 1});
  auto buckets = plan_reduce_buckets(plan, {4}, 64);  // 16 elements per bucket
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].params == std::vector<size_t>{3});  // 8 + 40 > 16
  CHECK((buckets[0].begin == 56 && buckets[0].end == 64));
  CHECK(buckets[1].params == std::vector<size_t>{2});  // over the cap: alone
  CHECK((buckets[1].begin == 16 && buckets[1].end == 56));
  CHECK(buckets[2].params == std::vector<size_t>{1, 0});
  CHECK((buckets[2].begin == 0 && buckets[2].end == 16));
  // The 40-element parameter straddles the shard boundary at 32.
  REQUIRE(buckets[1].parts.size() == 2);
  CHECK((buckets[1].parts[0].owner == 0 && buckets[1].parts[0].begin == 16 &&
         buckets[1].parts[0].end == 32));
  CHECK((buckets[1].parts[1].owner == 1 && buckets[1].parts[1].begin == 32 &&
         buckets[1].parts[1].end == 56));
  REQUIRE(buckets[0].parts.size() == 1);
  CHECK(buckets[0].parts[0].owner == 1);
}

TEST_CASE("plan_reduce_buckets orders groups' buckets by when backward completes them") {
  // Interleaved groups as param_groups_with_decay makes them: weights 0, 2 and biases 1, 3.
  ZeroPlan plan = plan_zero({16, 4, 16, 4}, {{0, 2}, {1, 3}}, 2, {.align = 1});
  auto buckets = plan_reduce_buckets(plan, {4, 4}, 64);  // 16 elements per bucket
  REQUIRE(buckets.size() == 3);
  // Backward delivers 3, 2, 1, 0: {2} is complete first, then the biases {3, 1}, then {0}.
  CHECK(buckets[0].params == std::vector<size_t>{2});
  CHECK(buckets[1].params == std::vector<size_t>{3, 1});
  CHECK(buckets[2].params == std::vector<size_t>{0});
  for (const ReduceBucket& b : buckets) {
    int64_t covered = 0;
    for (const ReducePart& p : b.parts) covered += p.end - p.begin;
    CHECK(covered == b.end - b.begin);
  }
}

TEST_CASE("param_owners splits a parameter by the ranks whose shards hold it") {
  ZeroPlan plan = plan_zero({10, 7, 0}, {{0, 1, 2}}, 3, {.align = 1});  // shards of 6
  const std::vector<OwnedPiece> p0 = param_owners(plan, 0), p1 = param_owners(plan, 1);
  REQUIRE(p0.size() == 2);
  CHECK((p0[0].owner == 0 && p0[0].piece.param_offset == 0 && p0[0].piece.shard_offset == 0 &&
         p0[0].piece.numel == 6));
  CHECK((p0[1].owner == 1 && p0[1].piece.param_offset == 6 && p0[1].piece.shard_offset == 0 &&
         p0[1].piece.numel == 4));
  REQUIRE(p1.size() == 2);
  CHECK((p1[0].owner == 1 && p1[0].piece.param_offset == 0 && p1[0].piece.shard_offset == 4 &&
         p1[0].piece.numel == 2));
  CHECK((p1[1].owner == 2 && p1[1].piece.param_offset == 2 && p1[1].piece.shard_offset == 0 &&
         p1[1].piece.numel == 5));
  CHECK(param_owners(plan, 2).empty());
  CHECK_THROWS_WITH(param_owners(plan, 3), Catch::Contains("parameter index below 3"));
  // The owners' pieces are the ranks' pieces, seen from the parameter.
  for (int ranks : {1, 2, 4, 5}) {
    ZeroPlan q = plan_zero({1, 31, 16, 97}, {{3, 1}, {0, 2}}, ranks, {.align = 4});
    for (size_t p = 0; p < 4; ++p) {
      int64_t covered = 0;
      for (const OwnedPiece& o : param_owners(q, p)) {
        bool found = false;
        for (const ShardPiece& pc : q.groups[q.group_of[p]].pieces(o.owner))
          found |= pc.param == p && pc.param_offset == o.piece.param_offset &&
                   pc.shard_offset == o.piece.shard_offset && pc.numel == o.piece.numel;
        CHECK(found);
        covered += o.piece.numel;
      }
      CHECK(covered == std::vector<int64_t>{1, 31, 16, 97}[p]);
    }
  }
}
