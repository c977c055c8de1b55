// ZeRO stage 3's parameters: each rank keeps only its shard of every group's flat buffer
// (zero_plan.h) in the parameters' dtype, and every parameter's Storage is released: it holds no
// bytes until someone reads it. Storage::data() then calls back here (core/storage.h), and the
// parameter is gathered from its owners' shards (one broadcast per owning rank over the data
// group) before the read goes on. This needs no module hooks: forward kernels, and views of the
// parameter saved for backward, all read through the same Storage, so backward re-gathers what it
// needs and the version counter is untouched.
//
// Every rank runs the same model code, so every rank gathers the same parameters in the same order:
// the gathers are collectives like any other. So that a read on some ranks only fails at once
// instead of waiting for the others, a gather runs only inside a GatherWindow (below), which the
// forward, backward, evaluation, sampling and checkpoint-loading paths open on every rank.
// The first training window records that order
// (access_order.h); later windows gather the next `prefetch` parameters ahead while the current op
// computes. At most `live_params` parameters stay gathered: gathering another first releases the
// one gathered longest ago. A kernel takes its inputs' pointers at its start, so live_params must
// cover the parameters one op holds at once. The CPU kernels read one at a time (the fused linear
// copies its bias into its accumulator before it reads the weight; layer norm copies its weight
// and bias), and GPT, BERT and ViT give stage 0's losses with live_params 2 and poison on
// (tests/tools/cli/zero_test.sh): a pointer kept past a release would read NaN.
//
// This class gathers and releases; the compute shards' bytes live in a ChunkStore (chunk_store.h)
// and a ChunkPlacement (chunk_placement.h: device, static or auto) decides where they wait.
//
// In-place writes to a gathered parameter (loading a checkpoint into the model) are kept: a
// parameter whose version moved since its gather is written back into this rank's shard when it
// is released. The optimizer steps the f32 master shards; update() then rounds them into the
// compute shards (for f32 groups they are the same tensors), with no gather: the parameters stay
// released until their next use.
//
// Gathers run on the thread that built this object (MPI may be called from one thread at a time,
// and a collective started by one OpenMP worker would deadlock): a gather asked for on any other
// thread aborts naming the parameter, since it means a kernel read a released parameter from a
// worker without taking its pointer on the calling thread first.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/zero/access_order.h"
#include "parallel/zero/chunk_placement.h"
#include "parallel/zero/chunk_store.h"
#include "parallel/zero/param_placement.h"
#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero {

struct Stage3Options {
  // Gathered parameters kept before the one gathered longest ago is released (at least 2).
  int64_t live_params = 4;
  // Parameters gathered ahead along the recorded order (0: none).
  int prefetch = 1;
  // Fill a parameter's bytes with NaN (all ones) before releasing them, so that a pointer kept past
  // the release reads NaN rather than silently old values. CPU only; one memset per release.
  bool poison = true;
  // Where the compute shards wait between uses: on the device, or in chunks of which some live on
  // the host (param_placement.h).
  ParamPlacement placement;
};

// What stage 3 did since construction or reset_stats().
struct Stage3Stats {
  int64_t gathers = 0;     // parameters gathered (on use or ahead)
  int64_t prefetched = 0;  // of which gathered ahead and then used
  int64_t released = 0;
  int64_t written_back = 0;
  int64_t peak_live_bytes = 0;  // the most bytes of gathered parameters and gathers in flight
  // auto placement, after the warm-up: chunk copies made on the device and dropped within steps
  // (in-step eviction), the bytes those copies moved, and the most bytes of copies held at once.
  int64_t chunk_fetches = 0;
  int64_t chunk_evictions = 0;
  int64_t fetched_bytes = 0;
  int64_t peak_copy_bytes = 0;
};

// Where this rank's compute shards are (param_placement.h).
struct Stage3Placement {
  int64_t chunks = 0;
  int64_t device_chunks = 0;  // living on the device, or (auto) with a device copy now
  int64_t device_bytes = 0;   // of the compute shards
  int64_t host_bytes = 0;
  // auto: the device's peak in the warm-up step, every chunk on the host (0 before it ends).
  int64_t warmup_peak_bytes = 0;
  bool placed = true;  // false while auto's warm-up runs
};

class Stage3Params {
 public:
  // Not collective. params: the parameters (equal on every rank, contiguous, each owning its whole
  // storage, each group of one dtype); masters[g]: this rank's shard of group g in the parameters'
  // dtype (its f32 masters rounded), which becomes the compute shard. The parameters are then
  // released (a sharded build, sharded_build.h, released them already).
  Stage3Params(std::shared_ptr<Communicator> comm, const ZeroPlan& plan, std::vector<Tensor> params,
               std::vector<std::string> names, const std::vector<Tensor>& masters,
               const Stage3Options& options = {});
  // The parameters keep their materializer, which then fails naming the parameter.
  ~Stage3Params();
  Stage3Params(const Stage3Params&) = delete;
  Stage3Params& operator=(const Stage3Params&) = delete;

  // A gather is a collective, so a released parameter may be read only inside a window that every
  // rank opens around the same code (forward and backward, evaluation, sampling, loading a
  // checkpoint); a read outside any window throws ValueError at once, naming the parameter,
  // instead of gathering on one rank while the others wait for it until the watchdog. Closing a
  // window releases nothing (end_window() does); windows nest. Must not outlive its Stage3Params.
  class GatherWindow {
   public:
    explicit GatherWindow(Stage3Params* params);  // null: nothing to open (below stage 3)
    GatherWindow(GatherWindow&& other) noexcept;
    GatherWindow& operator=(GatherWindow&&) = delete;
    ~GatherWindow();

   private:
    Stage3Params* params_;
  };
  [[nodiscard]] GatherWindow gather_window() { return GatherWindow(this); }
  bool window_open() const { return open_windows_ > 0; }

  // Collective: waits for gathers in flight and releases every gathered parameter. `training`: the
  // window held a step's forward and backward (its order is recorded if none is yet).
  void end_window(bool training);
  // Collective (ends the window): the compute shards = the f32 masters rounded to the parameters'
  // dtype; the parameters' versions move, as an in-place copy into them would.
  void update(const std::vector<Tensor>& masters);

  // auto: drops every device copy of a host chunk (the homes hold the same values, written-back
  // pieces included), freeing the device for work outside the recorded step, such as evaluation
  // at another batch size; the schedule fetches copies again as the next training step reads
  // them. Not collective; nothing to do under the other placements.
  void evict_copies();

  // Where this rank's compute shards live now.
  Stage3Placement placement() const;
  // The compute shards are chunks of their own (offload_params): update() takes values from any
  // device.
  bool chunked() const { return store_->chunked(); }
  const Stage3Options& options() const { return options_; }
  const AccessOrder& access_order() const { return order_; }
  int64_t live() const { return int64_t(live_.size()); }
  Stage3Stats stats() const;
  void reset_stats();

 private:
  struct Gather {
    Tensor buffer;  // (numel) in the parameter's dtype
    std::vector<WorkPtr> works;
  };
  struct Slot;  // the per-parameter callback target, shared with the materializers

  void check_options(const ZeroPlan& plan, const std::vector<Tensor>& masters) const;
  void release_parameters();
  void materialize(size_t p, Storage& storage);
  Gather start_gather(size_t p);
  void release(size_t p);
  void note_bytes();

  std::shared_ptr<Communicator> comm_;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<size_t> group_of_;
  std::vector<std::vector<OwnedPiece>> owners_;  // per parameter
  Stage3Options options_;
  // The compute shards, and where their chunks live between uses.
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<ChunkPlacement> placement_;
  std::thread::id owner_thread_;
  std::shared_ptr<Slot> slot_;
  int open_windows_ = 0;  // GatherWindows alive

  std::list<size_t> live_;          // gathered parameters, oldest first
  std::vector<uint64_t> version_;   // per parameter: its version when gathered
  std::map<size_t, Gather> ahead_;  // gathers started ahead of use
  AccessOrder order_;
  Stage3Stats stats_;  // the gather counters (the chunk moves are the store's)
};

}  // namespace tessera::parallel::zero
