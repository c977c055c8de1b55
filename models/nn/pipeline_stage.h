// Which part of a model this rank builds under pipeline parallelism. A model of ordered blocks
// (embeddings; blocks 0..N-1; final norm + head + loss) is cut into P * v stages by the partition
// of parallel.pipeline; rank r holds the global stages chunk * P + r (chunk 0..v-1), global stage 0
// adds the embeddings and the last one the head. Without a pipeline there is one stage holding
// everything, and the model's serial forward is that one stage.
//
// A stage builds only its own layers, yet its weights equal the serial model's from the same seed:
// every layer it does not hold is built on the side and dropped (skip()), which advances the
// generator exactly as the serial build does and records the layer's parameter names and global
// shapes, so each stage also knows the serial model's parameter list (checkpoints translate
// between a stage's parameters and the serial model's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/shape.h"
#include "models/nn/build_context.h"
#include "models/nn/module.h"
#include "models/nn/module_list.h"
#include "parallel/pipeline/partition.h"

namespace tessera::nn {

class PipelineStage {
 public:
  PipelineStage() = default;  // serial: one stage, every block (set by plan)

  // The stages of a model of `blocks` blocks of `block_params` parameters each, with
  // `first_extra` parameters in the embeddings and `last_extra` in the head, from ctx's
  // parallel.pipeline (one stage without it). Throws ValueError naming the numbers for a
  // partition that cannot be made (more stages than blocks, a bad list).
  static PipelineStage plan(const BuildContext& ctx, int64_t blocks, int64_t block_params = 0,
                            int64_t first_extra = 0, int64_t last_extra = 0);

  bool pipelined() const { return ranks_ > 1; }
  int rank() const { return rank_; }      // this rank's pipeline index
  int ranks() const { return ranks_; }    // P
  int chunks() const { return chunks_; }  // v: model chunks on this rank
  // This rank holds global stage 0 (embeddings, in chunk 0) / the last one (head, in chunk v-1).
  bool holds_embeddings() const { return rank_ == 0; }
  bool holds_head() const { return rank_ == ranks_ - 1; }
  bool first_chunk(int chunk) const { return holds_embeddings() && chunk == 0; }
  bool last_chunk(int chunk) const { return holds_head() && chunk == chunks_ - 1; }
  // The blocks of local chunk `chunk` (global stage chunk * P + rank).
  parallel::pipeline::BlockRange chunk_blocks(int chunk) const;
  bool holds_block(int64_t block) const;
  // Every global stage's blocks, in global stage order (for the run's header).
  const std::vector<parallel::pipeline::BlockRange>& all_blocks() const { return all_; }

  // Records the parameters of a module this stage holds, registered under `prefix` (a tensor
  // recorded before, a tied weight, counts once, as in the serial model's named_parameters()). An
  // empty prefix records the names as they are (a model's own parameters, ViT's cls_token).
  // `tied` names the module's parameters that are another layer's weight (BERT's MLM decoder, tied
  // to word embeddings this stage may not hold): the serial model lists them under that layer's
  // name, so they are not recorded.
  void hold(const std::string& prefix, const Module& module,
            const std::vector<std::string>& tied = {});
  // Builds a module this stage does not hold with build(ctx) and drops it: the generator advances
  // as in the serial build and the parameters (but `tied`, as for hold) are recorded. Returns
  // nothing: nothing is kept.
  template <typename F>
  void skip(const std::string& prefix, F&& build, const std::vector<std::string>& tied = {}) {
    std::shared_ptr<Module> dropped = build();
    record(prefix, *dropped, /*held=*/false, tied);
  }
  // Builds the model's `count` blocks in serial order with make(): the held ones go into `list`
  // under their global index ("h.4" on a stage holding blocks 4..7), the others are skipped.
  // Returns each block's position in `list` (-1: not held), under `prefix` ("h").
  template <typename F>
  std::vector<int64_t> build_blocks(const std::string& prefix, ModuleList& list, int64_t count,
                                    F&& make) {
    std::vector<int64_t> slots;
    for (int64_t i = 0; i < count; ++i) {
      const std::string name = prefix + "." + std::to_string(i);
      if (!holds_block(i)) {
        skip(name, make);
        slots.push_back(-1);
        continue;
      }
      slots.push_back(int64_t(list.size()));
      block_chunk_ = chunk_of_block(i);
      hold(name, *list.push_back(make(), std::to_string(i)));
      block_chunk_ = -1;
    }
    blocks_built_ = true;
    return slots;
  }
  // The names of the parameters this stage holds, by local model chunk: a block's go with its
  // chunk, what is held before the blocks (embeddings) with chunk 0, what after them (the head)
  // with the last chunk. Each chunk's gradients are final after that chunk's last backward, which
  // is what lets the data-parallel reduction of interleaved chunks start chunk by chunk.
  const std::vector<std::vector<std::string>>& chunk_parameters() const { return chunk_params_; }
  // The serial model's parameters (name, global shape) in the serial model's order.
  const std::vector<std::pair<std::string, Shape>>& serial_parameters() const { return serial_; }

 private:
  int rank_ = 0, ranks_ = 1, chunks_ = 1;
  std::vector<parallel::pipeline::BlockRange> all_;  // per global stage
  std::vector<std::pair<std::string, Shape>> serial_;
  std::unordered_set<const TensorImpl*> recorded_;  // held tensors (they stay alive)
  std::vector<std::vector<std::string>> chunk_params_ = {{}};
  int block_chunk_ = -1;       // the chunk of the block being held, -1 outside build_blocks
  bool blocks_built_ = false;  // build_blocks has run: what is held now goes with the last chunk

  int chunk_of_block(int64_t block) const;

  // held: dedupe against the tensors held before (a dropped module's tensors are freed, and their
  // addresses may come back, so they are never remembered).
  void record(const std::string& prefix, const Module& module, bool held,
              const std::vector<std::string>& tied);
};

}  // namespace tessera::nn
