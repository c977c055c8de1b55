// Stage 3: the materializer that gathers a released parameter inside a gather window, prefetch
// along the recorded order, and release (see stage3_params.h). The compute shards' bytes are the
// chunk store's (chunk_store.h); where they wait between uses, the placement policy's
// (chunk_placement.h).
#include "parallel/zero/stage3_params.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::zero {

namespace {

Tensor flat(const Tensor& t) { return t.view({t.numel()}); }

// The group's compute shards in the dtype its parameters share, checked.
DType group_dtype(const ZeroPlan& plan, size_t g, const std::vector<Tensor>& params,
                  const std::vector<std::string>& names) {
  const auto& slots = plan.groups[g].slots;
  const DType dtype = slots.empty() ? DType::f32 : params[slots[0].param].dtype();
  for (const FlatSlot& s : slots)
    TS_CHECK(params[s.param].dtype() == dtype, "zero",
             "zero stage 3 keeps a group's shard in one dtype: expected '", names[s.param], "' in ",
             dtype_name(dtype), " like '", names[slots[0].param], "', got ",
             params[s.param].describe());
  return dtype;
}

}  // namespace

// The materializers' way back here: cleared when the manager goes, so a parameter read after that
// fails with a message instead of touching freed state.
struct Stage3Params::Slot {
  Stage3Params* self = nullptr;
};

Stage3Params::Stage3Params(std::shared_ptr<Communicator> comm, const ZeroPlan& plan,
                           std::vector<Tensor> params, std::vector<std::string> names,
                           const std::vector<Tensor>& masters, const Stage3Options& options)
    : comm_(std::move(comm)),
      params_(std::move(params)),
      names_(std::move(names)),
      options_(options),
      owner_thread_(std::this_thread::get_id()),
      slot_(std::make_shared<Slot>(Slot{this})) {
  check_options(plan, masters);
  for (size_t p = 0; p < params_.size(); ++p) {
    group_of_.push_back(plan.group_of[p]);
    owners_.push_back(param_owners(plan, p));
  }
  std::vector<std::vector<ShardPiece>> mine;
  std::vector<Tensor> shards;
  int64_t largest = 0;
  for (const Tensor& t : params_) largest = std::max(largest, t.numel() * int64_t(t.itemsize()));
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    mine.push_back(plan.groups[g].pieces(comm_->rank()));
    // The compute shard: the master rounded to the parameters' dtype, which for values drawn or
    // loaded in that dtype is exactly the parameters' own pieces (the parameters may be released
    // already, by a sharded build).
    const DType dtype = group_dtype(plan, g, params_, names_);
    const Tensor shard = masters[g].detach();
    TS_CHECK(shard.dtype() == dtype && shard.numel() == plan.groups[g].shard_numel, "zero",
             "expected group ", g, "'s compute shard in ", dtype_name(dtype), " (",
             plan.groups[g].shard_numel, "), got ", shard.describe());
    shards.push_back(shard);
  }
  // Without offload_params the shard is one chunk, the tensor itself (for f32 the master).
  const ParamPlacement& where = options.placement;
  store_ = std::make_unique<ChunkStore>(comm_->device(), std::move(mine), shards,
                                        where.policy != PlacementPolicy::device, where.chunk_bytes);
  placement_ = make_chunk_placement(where, *store_,
                                    {.comm = comm_,
                                     .params = params_.size(),
                                     .largest_param_bytes = largest,
                                     .prefetch = options.prefetch});
  release_parameters();
}

void Stage3Params::check_options(const ZeroPlan& plan, const std::vector<Tensor>& masters) const {
  const char* op = "zero";
  const ParamPlacement& where = options_.placement;
  TS_CHECK(where.policy != PlacementPolicy::auto_traced || where.device_limit > 0, op,
           "expected a device memory limit above 0 bytes for the auto placement, got ",
           where.device_limit);
  TS_CHECK(options_.live_params >= 2, op, "expected zero stage 3 to keep at least 2 parameters ",
           "gathered (one op may read two), got ", options_.live_params);
  TS_CHECK(options_.prefetch >= 0, op, "expected a prefetch depth >= 0, got ", options_.prefetch);
  TS_CHECK(masters.size() == plan.groups.size(), op, "expected a master shard per group (",
           plan.groups.size(), "), got ", masters.size());
  for (size_t p = 0; p < params_.size(); ++p) {
    const Tensor& t = params_[p];
    TS_CHECK(t.offset() == 0 && t.is_contiguous() &&
                 t.storage()->nbytes() == size_t(t.numel()) * t.itemsize(),
             op, "zero stage 3 releases each parameter's storage: expected '", names_[p],
             "' to own its whole storage, got ", t.describe(), " at offset ", t.offset(), " of ",
             t.storage()->nbytes(), " bytes");
  }
}

// Every parameter's bytes go back to the allocator; reading one later calls materialize().
void Stage3Params::release_parameters() {
  autograd::NoGradGuard no_grad;
  version_.assign(params_.size(), 0);
  std::weak_ptr<Slot> weak = slot_;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (params_[p].numel() == 0) continue;  // nothing to release
    Storage& s = *params_[p].storage();
    s.set_materializer([weak, p, name = names_[p]](Storage& storage) {
      const std::shared_ptr<Slot> slot = weak.lock();
      TS_CHECK(slot && slot->self, "zero", "parameter '", name,
               "' is released by ZeRO stage 3, whose optimizer is gone: it has no data");
      slot->self->materialize(p, storage);
    });
    if (s.released()) continue;  // by a sharded build; it takes this materializer as it is
    if (options_.poison && s.device().is_cpu()) std::memset(s.data(), 0xFF, s.nbytes());
    s.release();
  }
}

// Gathers still in flight finish in their Works' destructors, which keep their buffers alive.
Stage3Params::~Stage3Params() { slot_->self = nullptr; }

void Stage3Params::reset_stats() {
  stats_ = Stage3Stats{};
  store_->reset_moves();
}

Stage3Stats Stage3Params::stats() const {
  Stage3Stats out = stats_;
  const ChunkMoves& moves = store_->moves();
  out.chunk_fetches = moves.fetches;
  out.chunk_evictions = moves.evictions;
  out.fetched_bytes = moves.fetched_bytes;
  out.peak_copy_bytes = moves.peak_copy_bytes;
  return out;
}

Stage3Params::GatherWindow::GatherWindow(Stage3Params* params) : params_(params) {
  if (params_) ++params_->open_windows_;
}

Stage3Params::GatherWindow::GatherWindow(GatherWindow&& other) noexcept
    : params_(std::exchange(other.params_, nullptr)) {}

Stage3Params::GatherWindow::~GatherWindow() {
  if (params_) --params_->open_windows_;
}

// One broadcast per owner of the parameter's pieces; each owner first copies its piece from its
// compute shard into the buffer.
Stage3Params::Gather Stage3Params::start_gather(size_t p) {
  autograd::NoGradGuard no_grad;
  const Tensor& t = params_[p];
  Gather g;
  g.buffer = empty({t.numel()}, {.dtype = t.dtype(), .device = t.device()});
  for (const OwnedPiece& o : owners_[p]) {
    const Tensor part = g.buffer.narrow(0, o.piece.param_offset, o.piece.numel);
    if (o.owner == comm_->rank()) {
      // From a host chunk, an asynchronous copy that the broadcast (on the compute stream's
      // order) waits for.
      store_->mover().copy(store_->piece(group_of_[p], o.piece.shard_offset, o.piece.numel), part);
    }
    if (comm_->size() > 1) g.works.push_back(comm_->broadcast(part, o.owner));
  }
  ++stats_.gathers;
  return g;
}

void Stage3Params::materialize(size_t p, Storage& storage) {
  if (std::this_thread::get_id() != owner_thread_) {
    // An internal invariant of the kernels (pointers taken on the calling thread), not a user
    // error; throwing from an OpenMP worker would end the process without a word.
    std::fprintf(stderr,
                 "[zero] parameter '%s' (released by ZeRO stage 3) was read first from a worker "
                 "thread; its gather is a collective and must run on the thread that trains\n",
                 names_[p].c_str());
    std::abort();
  }
  TS_CHECK(open_windows_ > 0, "zero", "parameter '", names_[p],
           "' is released by ZeRO stage 3 and was read outside a gather window: its gather is a "
           "collective that every rank must join, so a read on some ranks only would wait for the "
           "others forever. Read it inside a Stage3Params::GatherWindow that every rank opens "
           "(ShardedOptimizer::gather_window())");
  placement_->before_gather();
  const std::vector<size_t> next = order_.on_gather(p, options_.prefetch);
  placement_->at_gather(order_.position());
  Gather g;
  if (auto it = ahead_.find(p); it != ahead_.end()) {
    g = std::move(it->second);
    ahead_.erase(it);
    ++stats_.prefetched;
  } else {
    g = start_gather(p);
  }
  // Room for p: release the parameter gathered longest ago.
  while (int64_t(live_.size()) >= options_.live_params) {
    const size_t oldest = live_.front();
    live_.pop_front();
    release(oldest);
  }
  // Predict and start the next gathers before waiting, so they overlap this one and what follows.
  for (size_t q : next) {
    const bool held = q == p || ahead_.count(q) || !params_[q].storage()->released();
    if (!held && params_[q].numel() > 0) ahead_.emplace(q, start_gather(q));
  }
  for (const WorkPtr& w : g.works) w->wait();
  storage.adopt(*g.buffer.storage());
  version_[p] = storage.version();
  live_.push_back(p);
  note_bytes();
}

void Stage3Params::release(size_t p) {
  Storage& s = *params_[p].storage();
  if (s.released()) return;
  if (s.version() != version_[p]) {
    // Written in place since its gather: keep this rank's pieces of the new values. A move in
    // flight may still read the host chunk being written (rare: a checkpoint's load).
    autograd::NoGradGuard no_grad;
    store_->mover().synchronize();
    for (const OwnedPiece& o : owners_[p]) {
      if (o.owner != comm_->rank()) continue;
      store_->write(group_of_[p], o.piece.shard_offset,
                    flat(params_[p]).narrow(0, o.piece.param_offset, o.piece.numel));
    }
    ++stats_.written_back;
  }
  if (options_.poison && s.device().is_cpu()) std::memset(s.data(), 0xFF, s.nbytes());
  s.release();
  ++stats_.released;
}

void Stage3Params::note_bytes() {
  int64_t bytes = 0;
  for (size_t p : live_) bytes += int64_t(params_[p].storage()->nbytes());
  for (const auto& [q, g] : ahead_) bytes += int64_t(params_[q].storage()->nbytes());
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, bytes);
}

void Stage3Params::end_window(bool training) {
  // Gathers started ahead were started on every rank: finish them everywhere, then drop them.
  for (auto& [p, g] : ahead_)
    for (const WorkPtr& w : g.works) w->wait();
  ahead_.clear();
  while (!live_.empty()) {
    const size_t p = live_.front();
    live_.pop_front();
    release(p);
  }
  order_.end_window(training);
  placement_->window_ended(training, order_);
}

void Stage3Params::evict_copies() { placement_->evict_copies(); }

Stage3Placement Stage3Params::placement() const {
  return {.chunks = int64_t(store_->count()),
          .device_chunks = store_->chunks_on_device(),
          .device_bytes = store_->device_bytes(),
          .host_bytes = store_->host_bytes(),
          .warmup_peak_bytes = placement_->warmup_peak_bytes(),
          .placed = placement_->placed()};
}

void Stage3Params::update(const std::vector<Tensor>& masters) {
  TS_CHECK(masters.size() == store_->groups(), "zero", "expected a master shard per group (",
           store_->groups(), "), got ", masters.size());
  end_window(false);
  store_->update(masters);
  for (const Tensor& t : params_) t.bump_version();
}

}  // namespace tessera::parallel::zero
