// The ZeRO plan: flat slots per group, padded equal shards, and each rank's pieces.
#include "parallel/zero/zero_plan.h"

#include <algorithm>

#include "core/error.h"

namespace tessera::parallel::zero {

std::vector<ShardPiece> ZeroGroupPlan::pieces(int rank) const {
  TS_CHECK(rank >= 0 && rank < ranks, "zero", "expected a rank in [0, ", ranks, "), got ", rank);
  const int64_t begin = int64_t(rank) * shard_numel, end = begin + shard_numel;
  std::vector<ShardPiece> out;
  for (const FlatSlot& s : slots) {
    const int64_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.numel);
    if (hi > lo) out.push_back(ShardPiece{s.param, lo - s.offset, lo - begin, hi - lo});
  }
  return out;
}

std::vector<OwnedPiece> param_owners(const ZeroPlan& plan, size_t param) {
  TS_CHECK(param < plan.group_of.size(), "zero", "expected a parameter index below ",
           plan.group_of.size(), ", got ", param);
  const ZeroGroupPlan& gp = plan.groups[plan.group_of[param]];
  const FlatSlot& s = gp.slots[plan.slot_of[param]];
  std::vector<OwnedPiece> out;
  for (int64_t lo = s.offset; lo < s.offset + s.numel;) {
    const int owner = int(lo / gp.shard_numel);
    const int64_t begin = int64_t(owner) * gp.shard_numel;
    const int64_t hi = std::min(s.offset + s.numel, begin + gp.shard_numel);
    out.push_back(OwnedPiece{owner, ShardPiece{param, lo - s.offset, lo - begin, hi - lo}});
    lo = hi;
  }
  return out;
}

ZeroPlan plan_zero(const std::vector<int64_t>& numels,
                   const std::vector<std::vector<size_t>>& groups, int ranks,
                   const ZeroPlanOptions& options) {
  const char* op = "zero";
  TS_CHECK(ranks >= 1, op, "expected at least one rank, got ", ranks);
  TS_CHECK(options.align >= 1, op, "expected a shard alignment of at least one element, got ",
           options.align);
  ZeroPlan plan;
  plan.ranks = ranks;
  plan.group_of.assign(numels.size(), SIZE_MAX);
  plan.slot_of.assign(numels.size(), 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    ZeroGroupPlan gp;
    gp.ranks = ranks;
    for (size_t p : groups[g]) {
      TS_CHECK(p < numels.size(), op, "expected parameter indices below ", numels.size(), ", got ",
               p, " in group ", g);
      TS_CHECK(plan.group_of[p] == SIZE_MAX, op, "expected each parameter in one group, got ",
               "parameter ", p, " in groups ", plan.group_of[p], " and ", g);
      TS_CHECK(numels[p] >= 0, op, "expected sizes >= 0, got ", numels[p], " for parameter ", p);
      plan.group_of[p] = g;
      plan.slot_of[p] = gp.slots.size();
      gp.slots.push_back(FlatSlot{p, gp.numel, numels[p]});
      gp.numel += numels[p];
    }
    const int64_t per_rank = (gp.numel + ranks - 1) / ranks;
    gp.shard_numel =
        std::max<int64_t>(1, (per_rank + options.align - 1) / options.align) * options.align;
    plan.groups.push_back(std::move(gp));
  }
  for (size_t p = 0; p < numels.size(); ++p)
    TS_CHECK(plan.group_of[p] != SIZE_MAX, op,
             "expected every parameter in a group, got parameter ", p, " in none");
  return plan;
}

std::vector<ReduceBucket> plan_reduce_buckets(const ZeroPlan& plan,
                                              const std::vector<int64_t>& itemsizes,
                                              int64_t cap_bytes) {
  const char* op = "zero";
  TS_CHECK(cap_bytes > 0, op, "expected a positive bucket cap, got ", cap_bytes, " bytes");
  TS_CHECK(itemsizes.size() == plan.groups.size(), op, "expected an element size per group (",
           plan.groups.size(), "), got ", itemsizes.size());
  std::vector<ReduceBucket> buckets;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const ZeroGroupPlan& gp = plan.groups[g];
    bool open = false;
    for (size_t i = gp.slots.size(); i-- > 0;) {
      const FlatSlot& s = gp.slots[i];
      if (s.numel == 0) continue;
      const int64_t bytes = s.numel * itemsizes[g];
      if (!open || (buckets.back().end - s.offset) * itemsizes[g] > cap_bytes) {
        buckets.push_back(ReduceBucket{g, s.offset, s.offset + s.numel, {}, {}});
        open = bytes <= cap_bytes;  // an oversized parameter closes its bucket at once
      }
      buckets.back().begin = s.offset;
      buckets.back().params.push_back(s.param);
    }
  }
  for (ReduceBucket& b : buckets) {
    const int64_t shard = plan.groups[b.group].shard_numel;
    for (int64_t lo = b.begin; lo < b.end;) {
      const int owner = int(lo / shard);
      const int64_t hi = std::min(b.end, int64_t(owner + 1) * shard);
      b.parts.push_back(ReducePart{owner, lo, hi});
      lo = hi;
    }
  }
  // Latest-starting first; ties (none: buckets are disjoint within a group) by group.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [&](const ReduceBucket& a, const ReduceBucket& b) {
                     return a.params.back() > b.params.back();
                   });
  return buckets;
}

}  // namespace tessera::parallel::zero
