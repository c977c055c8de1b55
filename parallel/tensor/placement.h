// Where a parameter of the serial model lives under tensor parallelism: its global (serial) shape,
// and how this rank's tensor is cut from it. The one record of rank arithmetic for parameters:
// gradient clipping (a replicated parameter counts once), the data-parallel reducer, the optimizer
// and the checkpoint writer read it; nothing else recomputes offsets.
//
// A shard is cut from `view`, the global tensor regrouped or padded so that every split is along
// one of its dimensions: the fused q|k|v weight (3C, C) split by heads is the view (3, C, C) split
// along dimension 1; a vocabulary padded to a multiple of the split is the view (V_pad, C) whose
// rows past V are padding (zeros, never part of the serial tensor).
//
// Several splits of one dimension nest: the first cuts it into `parts` chunks, each later one cuts
// the earlier one's chunk again (2D's vectors: a grid column's chunk, then the grid row's piece of
// it). gather_full joins them innermost (last) first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace tessera::parallel::tensor {

// One cut: `view` dimension `dim` in `parts` equal chunks over the group named `group` (a
// ParallelContext group name), of which this rank holds chunk `index` (its rank in that group).
struct ShardSplit {
  int64_t dim = 0;
  int parts = 1;
  int index = 0;
  std::string group;
};

// A group over which this rank's tensor is repeated (2.5D's weight blocks over the depth layers,
// "2.5d_dep"; the trainer adds the tensor group for replicated parameters and the embedding group
// for tied ones: models/train/param_copies.h): its `parts` members hold the same values and, after
// backward, the same gradient, so a global norm counts the copy at `index` 0 only and a checkpoint
// needs one of them. `index`: this rank's rank in that group.
struct ShardReplica {
  std::string group;
  int parts = 1;
  int index = 0;
};

struct Placement {
  Shape global_shape;                  // the serial tensor's shape
  Shape view;                          // global regrouped / padded (empty: global_shape itself)
  std::vector<ShardSplit> splits;      // none: replicated over the tensor group
  std::vector<ShardReplica> replicas;  // none: this copy is unique (as far as recorded)

  bool replicated() const { return splits.empty(); }
  // This copy counts (index 0 in every replica group; true without any).
  bool counted_copy() const;
  // How many ranks hold this shard (the product of the replica groups' sizes).
  int copies() const;
  const Shape& view_shape() const { return view.empty() ? global_shape : view; }
  // The shape of this rank's piece of the view, and where it starts in the view.
  Shape local_view() const;
  std::vector<int64_t> view_offsets() const;
  // This rank's tensor shape: local_view() in the layout the layer keeps (the view's dimensions
  // merged back where the view regrouped them: (3, C/P, C) -> (3C/P, C)).
  Shape local_shape() const;
  // True when the view pads the global tensor (then to_global narrows each dimension).
  bool padded() const;
  // "sharded (3, 768, 768) dim 1 / 4 over tensor" (+ " x 2 copies over 2.5d_dep") or "replicated"
  std::string describe() const;
};

// A replicated parameter of `shape`.
Placement replicated(const Shape& shape);
// Splits `shape` (or `view`, when given) along `dim` into `parts` over `group`, taking chunk `index`.
Placement split(const Shape& shape, int64_t dim, int parts, int index, const std::string& group,
                const Shape& view = {});

}  // namespace tessera::parallel::tensor
