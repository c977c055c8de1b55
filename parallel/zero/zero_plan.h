// The ZeRO layout (pure, no ranks): each optimizer parameter group's parameters packed in order
// into one flat buffer, padded so that every one of the N data ranks owns an equal contiguous
// shard of it. Sharding is offset arithmetic over this plan (STYLE.md item 14): rank r owns
// elements [r * shard_numel, (r + 1) * shard_numel) of every group's flat buffer, and the pieces
// of parameters that fall there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::parallel::zero {

// A parameter's place in its group's flat buffer: elements [offset, offset + numel).
struct FlatSlot {
  size_t param = 0;  // index into the parameter list given to plan_zero
  int64_t offset = 0;
  int64_t numel = 0;
};

// The part of a parameter inside one rank's shard: its elements [param_offset, param_offset +
// numel) (of the parameter flattened) are the shard's elements [shard_offset, shard_offset +
// numel).
struct ShardPiece {
  size_t param = 0;
  int64_t param_offset = 0;
  int64_t shard_offset = 0;
  int64_t numel = 0;
};

struct ZeroGroupPlan {
  std::vector<FlatSlot> slots;  // in the group's order
  int64_t numel = 0;            // the parameters' elements; the rest up to padded_numel is padding
  int64_t shard_numel = 0;      // elements per rank (at least `align`, a multiple of it)
  int ranks = 1;

  int64_t padded_numel() const { return shard_numel * ranks; }
  int64_t padding() const { return padded_numel() - numel; }
  // The pieces of rank `rank`'s shard, in flat order (parameters split at shard boundaries).
  std::vector<ShardPiece> pieces(int rank) const;
};

struct ZeroPlan {
  int ranks = 1;
  std::vector<ZeroGroupPlan> groups;
  // Per parameter: its group and its slot there.
  std::vector<size_t> group_of;
  std::vector<size_t> slot_of;
};

struct ZeroPlanOptions {
  // Each shard's size is rounded up to a multiple of this many elements (16 f32 = one 64-byte
  // cache line, so every rank's slice of a flat buffer starts aligned). The one sizing rule for
  // now.
  int64_t align = 16;
};

// Stage 2's unit of reduction: a run of whole parameters of one group, flat elements
// [begin, end), and its parts by owner (the bucket cut at shard boundaries).
struct ReducePart {
  int owner = 0;
  int64_t begin = 0, end = 0;  // flat elements of the group, inside rank `owner`'s shard
};
struct ReduceBucket {
  size_t group = 0;
  int64_t begin = 0, end = 0;
  std::vector<size_t> params;  // the parameters it covers, last in flat order first
  std::vector<ReducePart> parts;
};

// Where a parameter's elements live: the part of it in rank `owner`'s shard.
struct OwnedPiece {
  int owner = 0;
  ShardPiece piece;
};

// Stage 3's gather of parameter `param`: its pieces by owner, in rank order (none for an empty
// parameter); together they cover the parameter once.
std::vector<OwnedPiece> param_owners(const ZeroPlan& plan, size_t param);

// groups[g]: indices into numels of group g's parameters, in order; every parameter must be in
// exactly one group. A group with no elements still gets a shard of `align` elements (all
// padding), so every group has a shard on every rank. Throws on a bad partition or sizes.
ZeroPlan plan_zero(const std::vector<int64_t>& numels,
                   const std::vector<std::vector<size_t>>& groups, int ranks,
                   const ZeroPlanOptions& options = {});

// Stage 2's buckets: each group's parameters taken last first (the order backward produces their
// gradients), whole, while the bucket stays within cap_bytes of itemsizes[group]-byte elements (a
// larger parameter gets a bucket of its own); empty parameters are left out. The buckets of all
// groups are ordered by the index of their first parameter in flat order (the last of theirs to
// arrive in backward), highest first, so a bucket of one group does not wait behind a bucket of
// another group that completes later.
std::vector<ReduceBucket> plan_reduce_buckets(const ZeroPlan& plan,
                                              const std::vector<int64_t>& itemsizes,
                                              int64_t cap_bytes);

}  // namespace tessera::parallel::zero
