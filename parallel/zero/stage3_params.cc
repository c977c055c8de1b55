// Stage 3: compute shards, the materializer that gathers a released parameter, prefetch along the
// recorded order, and release (see stage3_params.h).
#include "parallel/zero/stage3_params.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel::zero {

namespace {
Tensor flat(const Tensor& t) { return t.view({t.numel()}); }
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
  const char* op = "zero";
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
    // f32 groups compute on their masters; 16-bit ones on a shard of their own, taken from the
    // parameters (equal on every rank: broadcast before this).
    Tensor shard = masters[g].detach();
    if (dtype != DType::f32) {
      shard = zeros({plan.groups[g].shard_numel}, {.dtype = dtype, .device = comm_->device()});
      for (const ShardPiece& pc : mine_[g])
        shard.narrow(0, pc.shard_offset, pc.numel)
            .copy_(flat(params_[pc.param]).narrow(0, pc.param_offset, pc.numel));
    }
    compute_.push_back(shard);
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
    if (options_.poison && s.device().is_cpu()) std::memset(s.data(), 0xFF, s.nbytes());
    s.release();
  }
}

// Gathers still in flight finish in their Works' destructors, which keep their buffers alive.
Stage3Params::~Stage3Params() { slot_->self = nullptr; }

void Stage3Params::reset_stats() { stats_ = Stage3Stats{}; }

// One broadcast per owner of the parameter's pieces; each owner first copies its piece from its
// compute shard into the buffer.
Stage3Params::Gather Stage3Params::start_gather(size_t p) {
  autograd::NoGradGuard no_grad;
  const Tensor& t = params_[p];
  Gather g;
  g.buffer = empty({t.numel()}, {.dtype = t.dtype(), .device = t.device()});
  for (const OwnedPiece& o : owners_[p]) {
    const Tensor part = g.buffer.narrow(0, o.piece.param_offset, o.piece.numel);
    if (o.owner == comm_->rank())
      part.copy_(compute_[group_of_[p]].narrow(0, o.piece.shard_offset, o.piece.numel));
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
  for (size_t q : order_.on_gather(p, options_.prefetch)) {
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
    // Written in place since its gather: keep this rank's pieces of the new values.
    autograd::NoGradGuard no_grad;
    const size_t g = group_of_[p];
    for (const OwnedPiece& o : owners_[p])
      if (o.owner == comm_->rank())
        compute_[g]
            .narrow(0, o.piece.shard_offset, o.piece.numel)
            .copy_(flat(params_[p]).narrow(0, o.piece.param_offset, o.piece.numel));
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
}

void Stage3Params::update(const std::vector<Tensor>& masters) {
  TS_CHECK(masters.size() == compute_.size(), "zero", "expected a master shard per group (",
           compute_.size(), "), got ", masters.size());
  end_window(false);
  autograd::NoGradGuard no_grad;
  for (size_t g = 0; g < compute_.size(); ++g) {
    // Round-to-nearest-even, as stage 1 and 2 gather them (ShardedOptimizer::gather_parameters).
    const DType dtype = compute_[g].dtype();
    compute_[g] = dtype == DType::f32 ? masters[g].detach() : masters[g].detach().to(dtype);
  }
  for (const Tensor& t : params_) t.bump_version();
}

}  // namespace tessera::parallel::zero
