// Stage 3: compute shards, the materializer that gathers a released parameter, prefetch along the
// recorded order, and release (see stage3_params.h).
#include "parallel/zero/stage3_params.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::zero {

namespace {

// zero.chunk_mb 0: the chunk capacity searched between these (search_chunk_capacity).
constexpr int64_t kMinChunkBytes = int64_t(1) << 20;
constexpr int64_t kMaxChunkBytes = int64_t(64) << 20;
constexpr int64_t kChunkSearchStep = int64_t(256) << 10;

Tensor flat(const Tensor& t) { return t.view({t.numel()}); }

// The largest of every rank's `local`, on every rank (a collective over comm).
int64_t max_over(Communicator& comm, int64_t local) {
  if (comm.size() == 1) return local;
  Tensor value = from_vector<int64_t>({local}, {1}).to(comm.device());
  comm.all_reduce(value, ReduceOp::max)->wait();
  return value.to(kCPU).data<int64_t>()[0];
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
      mover_(comm_->device()),
      options_(options),
      owner_thread_(std::this_thread::get_id()),
      slot_(std::make_shared<Slot>(Slot{this})) {
  const char* op = "zero";
  const ParamPlacement& where = options.placement;
  TS_CHECK(where.policy != PlacementPolicy::auto_traced || where.device_limit > 0, op,
           "expected a device memory limit above 0 bytes for the auto placement, got ",
           where.device_limit);
  chunked_ = where.policy != PlacementPolicy::device;
  TS_CHECK(options.live_params >= 2, op, "expected zero stage 3 to keep at least 2 parameters ",
           "gathered (one op may read two), got ", options.live_params);
  TS_CHECK(options.prefetch >= 0, op, "expected a prefetch depth >= 0, got ", options.prefetch);
  TS_CHECK(masters.size() == plan.groups.size(), op, "expected a master shard per group (",
           plan.groups.size(), "), got ", masters.size());
  autograd::NoGradGuard no_grad;
  for (size_t p = 0; p < params_.size(); ++p) {
    const Tensor& t = params_[p];
    TS_CHECK(t.offset() == 0 && t.is_contiguous() &&
                 t.storage()->nbytes() == size_t(t.numel()) * t.itemsize(),
             op, "zero stage 3 releases each parameter's storage: expected '", names_[p],
             "' to own its whole storage, got ", t.describe(), " at offset ", t.offset(), " of ",
             t.storage()->nbytes(), " bytes");
    group_of_.push_back(plan.group_of[p]);
    owners_.push_back(param_owners(plan, p));
  }
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const auto& slots = plan.groups[g].slots;
    const DType dtype = slots.empty() ? DType::f32 : params_[slots[0].param].dtype();
    for (const FlatSlot& s : slots)
      TS_CHECK(params_[s.param].dtype() == dtype, op,
               "zero stage 3 keeps a group's shard in one dtype: expected '", names_[s.param],
               "' in ", dtype_name(dtype), " like '", names_[slots[0].param], "', got ",
               params_[s.param].describe());
    mine_.push_back(plan.groups[g].pieces(comm_->rank()));
    // The compute shard: the master rounded to the parameters' dtype, which for values drawn or
    // loaded in that dtype is exactly the parameters' own pieces (the parameters may be released
    // already, by a sharded build).
    const Tensor shard = masters[g].detach();
    TS_CHECK(shard.dtype() == dtype && shard.numel() == plan.groups[g].shard_numel, op,
             "expected group ", g, "'s compute shard in ", dtype_name(dtype), " (",
             plan.groups[g].shard_numel, "), got ", shard.describe());
    // Without offload_params the shard is one chunk: the tensor itself (for f32 the master).
    // Otherwise chunks of their own, so that each can move alone.
    std::vector<Chunk> chunks;
    if (!chunked_) {
      chunks.push_back({.begin = 0, .numel = shard.numel(), .data = shard});
    } else {
      const int64_t item = int64_t(dtype_size(dtype));
      const int64_t capacity =
          where.chunk_bytes > 0
              ? std::max<int64_t>(1, where.chunk_bytes / item)
              : search_chunk_capacity(mine_[g], kMinChunkBytes / item, kMaxChunkBytes / item,
                                      kChunkSearchStep / item);
      for (const ChunkRange& r : pack_chunks(mine_[g], capacity))
        chunks.push_back({.begin = r.begin,
                          .numel = r.numel,
                          .data = shard.narrow(0, r.begin, r.numel).clone(),
                          .copy = Tensor()});
    }
    chunks_.push_back(std::move(chunks));
  }
  if (where.policy == PlacementPolicy::static_share) {
    size_t count = 0;
    for (const auto& chunks : chunks_) count += chunks.size();
    place_chunks(static_host_chunks(count, where.host_fraction));
  } else if (where.policy == PlacementPolicy::auto_traced) {
    // The warm-up step runs with every chunk on the host and traces the rest of the device's use.
    size_t count = 0;
    for (const auto& chunks : chunks_) count += chunks.size();
    place_chunks(std::vector<bool>(count, true));
    warming_up_ = true;
    reset_peak_memory(comm_->device());
    reset_trace_peak(comm_->device());
  }
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

void Stage3Params::reset_stats() { stats_ = Stage3Stats{}; }

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
      mover_.copy(shard_piece(group_of_[p], o.piece.shard_offset, o.piece.numel), part);
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
  if (warming_up_) {  // auto's trace: the device's peak since the previous gather
    trace_.push_back(memory_stats(comm_->device()).trace_peak_bytes);
    reset_trace_peak(comm_->device());
  }
  const std::vector<size_t> next = order_.on_gather(p, options_.prefetch);
  if (schedule_ && order_.position() != AccessOrder::kOffRecord) {
    // In-step eviction: the copies held until the next gather fit what the warm-up left there.
    const size_t at = order_.position();
    std::vector<bool> on_device = copies_held();
    schedule_->step(at, reads_at_[at], budget_at_[at], on_device);
    apply_copies(on_device);
  }
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
    mover_.synchronize();
    const size_t g = group_of_[p];
    for (const OwnedPiece& o : owners_[p]) {
      if (o.owner != comm_->rank()) continue;
      // Into the chunk and its device copy alike: the copy may be dropped, the chunk is home.
      const Chunk& c = chunk_of(g, o.piece.shard_offset, o.piece.numel);
      const Tensor value = flat(params_[p]).narrow(0, o.piece.param_offset, o.piece.numel);
      const int64_t at = o.piece.shard_offset - c.begin;
      for (const Tensor& held : {c.data, c.copy})
        if (held.defined()) held.narrow(0, at, o.piece.numel).copy_(value);
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
  if (warming_up_) {
    if (training) {
      trace_.push_back(memory_stats(comm_->device()).trace_peak_bytes);
      place_after_warmup();
    } else {
      trace_.clear();  // not the step the order records
      reset_trace_peak(comm_->device());
    }
  } else if (schedule_) {
    // Between windows (the optimizer step, evaluation) the copies fit the whole step's budget.
    std::vector<bool> on_device = copies_held();
    schedule_->fit(order_.order().size() - 1, rest_budget_, on_device);
    apply_copies(on_device);
  }
}

const Stage3Params::Chunk& Stage3Params::chunk_of(size_t g, int64_t offset, int64_t numel) const {
  const std::vector<Chunk>& chunks = chunks_[g];
  // The last chunk beginning at or before offset (chunks are in shard order).
  auto it = std::upper_bound(chunks.begin(), chunks.end(), offset,
                             [](int64_t at, const Chunk& c) { return at < c.begin; });
  TS_CHECK(it != chunks.begin(), "zero", "no chunk holds shard element ", offset, " of group ", g);
  const Chunk& c = *std::prev(it);
  TS_CHECK(offset + numel <= c.begin + c.numel, "zero", "shard elements [", offset, ", ",
           offset + numel, ") of group ", g, " cross the chunk [", c.begin, ", ", c.begin + c.numel,
           ")");
  return c;
}

Tensor Stage3Params::shard_piece(size_t g, int64_t offset, int64_t numel) const {
  const Chunk& c = chunk_of(g, offset, numel);
  return (c.copy.defined() ? c.copy : c.data).narrow(0, offset - c.begin, numel);
}

std::vector<bool> Stage3Params::copies_held() const {
  std::vector<bool> out;
  for (const auto& chunks : chunks_)
    for (const Chunk& c : chunks) out.push_back(c.copy.defined());
  return out;
}

void Stage3Params::apply_copies(const std::vector<bool>& on_device) {
  autograd::NoGradGuard no_grad;
  // Drops first, so the device never holds a new copy beside one the schedule has let go.
  size_t i = 0;
  for (auto& chunks : chunks_)
    for (Chunk& c : chunks)
      if (!on_device[i++] && c.copy.defined()) {
        c.copy = Tensor();
        ++stats_.chunk_evictions;
      }
  i = 0;
  int64_t held = 0;
  for (auto& chunks : chunks_) {
    for (Chunk& c : chunks) {
      if (on_device[i++] && !c.copy.defined()) {
        // Queued on the copy stream: it overlaps the compute until a gather reads the copy.
        c.copy = empty({c.numel}, {.dtype = c.data.dtype(), .device = comm_->device()});
        mover_.copy(c.data, c.copy);
        ++stats_.chunk_fetches;
        stats_.fetched_bytes += c.copy.numel() * int64_t(c.copy.itemsize());
      }
      if (c.copy.defined()) held += c.copy.numel() * int64_t(c.copy.itemsize());
    }
  }
  stats_.peak_copy_bytes = std::max(stats_.peak_copy_bytes, held);
}

void Stage3Params::evict_copies() {
  const std::vector<bool> none(copies_held().size(), false);
  apply_copies(none);
}

void Stage3Params::place_chunks(const std::vector<bool>& on_host) {
  autograd::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& chunks : chunks_) {
    for (Chunk& c : chunks) {
      const bool home = on_host.at(i++);
      if (home && c.data.device() != mover_.host()) c.data = mover_.host_copy(c.data);
      if (!home && c.data.device() != comm_->device()) c.data = c.data.to(comm_->device());
    }
  }
}

void Stage3Params::place_after_warmup() {
  warming_up_ = false;
  warmup_peak_ = memory_stats(comm_->device()).peak_bytes;
  // Every rank places by the data group's highest peak (the least room left), so every rank makes
  // the same decision and a limit too low fails on all of them with the same message, instead of
  // on one rank while the others wait for it in their next collective.
  const int64_t peak = max_over(*comm_, warmup_peak_);
  // The warm-up records the order, so it gathers nothing ahead; later steps hold up to `prefetch`
  // more parameters in flight, the largest ones at worst.
  int64_t largest = 0;
  for (const Tensor& t : params_) largest = std::max(largest, t.numel() * int64_t(t.itemsize()));
  const int64_t ahead = int64_t(options_.prefetch) * largest;
  const int64_t budget = options_.placement.device_limit - peak - ahead;
  TS_CHECK(budget >= 0, "zero", "zero.device_memory_limit is ", options_.placement.device_limit,
           " bytes, but the first step used ", peak,
           " bytes of device memory with every parameter chunk on the host (activations, gathered "
           "parameters, gradients), and prefetching needs up to ",
           ahead,
           " more: raise the limit, or lower the micro-batch, zero.live_params or zero.prefetch");
  // Every chunk's reads in the recorded step: the gathers of the parameters it holds pieces of.
  const std::vector<size_t>& order = order_.order();
  std::vector<std::vector<size_t>> chunks_of(params_.size());
  std::vector<int64_t> bytes;
  for (size_t g = 0; g < chunks_.size(); ++g) {
    for (const Chunk& c : chunks_[g]) {
      for (const ShardPiece& pc : mine_[g])
        if (pc.shard_offset >= c.begin && pc.shard_offset < c.begin + c.numel)
          chunks_of[pc.param].push_back(bytes.size());
      bytes.push_back(c.data.numel() * int64_t(c.data.itemsize()));
    }
  }
  std::vector<std::vector<size_t>> reads(bytes.size());
  reads_at_.assign(order.size(), {});
  for (size_t i = 0; i < order.size(); ++i) {
    reads_at_[i] = chunks_of[order[i]];
    for (size_t c : reads_at_[i]) reads[c].push_back(i);
  }
  // Every chunk stays home on the host; those that fit the whole step's budget, first read first,
  // get device copies to start with, and the schedule keeps more while the step leaves room.
  std::vector<size_t> first_use;
  for (const std::vector<size_t>& r : reads) first_use.push_back(r.empty() ? SIZE_MAX : r.front());
  apply_copies(auto_device_chunks(first_use, bytes, budget));
  rest_budget_ = budget;
  // The warm-up gathered each parameter of the record once, each sampled before its gather: one
  // sample per gather and the window's end. Anything else (a gather from a worker, say) leaves
  // the placement static.
  if (trace_.size() != order.size() + 1) return;
  // What the device may hold in copies from gather i to the next: the limit less the warm-up's
  // peak there and the prefetch's headroom (never below the whole step's budget).
  budget_at_.assign(order.size(), 0);
  for (size_t i = 0; i < order.size(); ++i)
    budget_at_[i] = std::max(budget, options_.placement.device_limit - trace_[i + 1] - ahead);
  schedule_.emplace(std::move(reads), std::move(bytes), order.size());
}

Stage3Placement Stage3Params::placement() const {
  Stage3Placement out;
  for (const auto& chunks : chunks_) {
    for (const Chunk& c : chunks) {
      ++out.chunks;
      const int64_t bytes = c.data.numel() * int64_t(c.data.itemsize());
      const bool device = c.data.device() == comm_->device();
      out.device_chunks += device || c.copy.defined() ? 1 : 0;
      (device ? out.device_bytes : out.host_bytes) += bytes;
      if (c.copy.defined()) out.device_bytes += bytes;
    }
  }
  out.warmup_peak_bytes = warmup_peak_;
  out.placed = !warming_up_;
  return out;
}

void Stage3Params::update(const std::vector<Tensor>& masters) {
  TS_CHECK(masters.size() == chunks_.size(), "zero", "expected a master shard per group (",
           chunks_.size(), "), got ", masters.size());
  end_window(false);
  autograd::NoGradGuard no_grad;
  mover_.synchronize();  // the host chunks are written below: no move may still read them
  for (size_t g = 0; g < chunks_.size(); ++g) {
    // Round-to-nearest-even, as stage 1 and 2 gather them (ShardedOptimizer::gather_parameters).
    const DType dtype =
        params_.empty() || chunks_[g].empty() ? DType::f32 : chunks_[g][0].data.dtype();
    const Tensor values = dtype == DType::f32 ? masters[g].detach() : masters[g].detach().to(dtype);
    if (!chunked_) {
      if (!chunks_[g].empty()) chunks_[g][0].data = values;
      continue;
    }
    for (Chunk& c : chunks_[g]) {
      c.data.copy_(values.narrow(0, c.begin, c.numel));
      if (c.copy.defined()) mover_.copy(c.data, c.copy);
    }
  }
  for (const Tensor& t : params_) t.bump_version();
}

}  // namespace tessera::parallel::zero
