// DataParallel: the construction-time checks and broadcast, and the per-step reducer state driven
// by the grad-ready hooks (see data_parallel.h for the protocol and the MPI progress policy).
#include "parallel/data/data_parallel.h"

#include <unordered_set>

#include "core/error.h"
#include "parallel/comm/config_check.h"

namespace tessera::parallel {
namespace detail {

struct DataParallelState {
  std::shared_ptr<Communicator> comm;
  DataParallelOptions options;
  DataParallel::NamedParams params;
  std::vector<Tensor> tensors;  // params[i].second
  std::vector<GradBucket> buckets;
  std::vector<int64_t> bucket_of;  // per parameter: its bucket, -1 if it does not require grad
  std::vector<size_t> slot_of;     // per parameter: its slot in that bucket
  std::vector<bool> completed_after;  // per parameter: in options.completed_after_backward
  std::vector<int64_t> group_of;      // per parameter: its sync group, -1 if none

  // One synced step, from the first gradient to finish().
  std::vector<bool> ready;       // per parameter: its gradient is in its bucket
  std::vector<int64_t> pending;  // per bucket: slots still waiting for a gradient
  std::vector<WorkPtr> works;    // per bucket: the all-reduce, once started
  std::vector<bool> completed;   // per bucket: seen complete
  size_t next_launch = 0;        // buckets start in plan order; this one is next
  bool step_active = false;      // a gradient arrived since the last finish()
  bool no_sync = false;
  std::vector<bool> group_synced;  // per sync group: sync_group() was called this step
  std::vector<SyncEvent> events;

  void record(SyncEvent::Kind kind, int64_t index) {
    if (options.record_events) events.push_back(SyncEvent{kind, index});
  }

  void reset_step() {
    ready.assign(tensors.size(), false);
    pending.resize(buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b)
      pending[b] = int64_t(buckets[b].plan().slots.size());
    works.assign(buckets.size(), nullptr);
    completed.assign(buckets.size(), false);
    next_launch = 0;
    step_active = false;
    group_synced.assign(options.sync_groups.size(), false);
  }

  Tensor slot_view(size_t p) const {
    return buckets[size_t(bucket_of[p])].slot_view(slot_of[p], tensors[p].shape());
  }

  // Starts every bucket whose gradients are all in, in plan order: a ready bucket waits for the
  // buckets before it, so every rank issues the same all-reduces in the same order.
  void launch_ready() {
    while (next_launch < buckets.size() && pending[next_launch] == 0) {
      works[next_launch] = comm->all_reduce(buckets[next_launch].buffer(), ReduceOp::avg);
      record(SyncEvent::Kind::bucket_started, int64_t(next_launch));
      ++next_launch;
    }
  }

  // MPI_Test on every bucket in flight: this is what moves a nonblocking collective forward.
  void progress() {
    for (size_t b = 0; b < next_launch; ++b) {
      if (!completed[b] && works[b]->is_completed()) {
        completed[b] = true;
        record(SyncEvent::Kind::bucket_completed, int64_t(b));
      }
    }
  }

  bool syncs(size_t p) const {
    return !no_sync || (group_of[p] >= 0 && group_synced[size_t(group_of[p])]);
  }

  void on_grad_ready(size_t p) {
    if (!syncs(p)) return;  // the gradient stays in .grad() and keeps accumulating
    TS_CHECK(!ready[p], "DataParallel", "expected one synced backward per finish_gradient_sync(), ",
             "got a second gradient for '", params[p].first,
             "' before finish_gradient_sync(); run accumulation micro-steps under no_sync()");
    step_active = true;
    ready[p] = true;
    record(SyncEvent::Kind::grad_ready, int64_t(p));
    slot_view(p).copy_(tensors[p].grad());
    const size_t b = size_t(bucket_of[p]);
    if (--pending[b] == 0) launch_ready();
    progress();
  }

  void finish() {
    if (no_sync) return;
    // Parameters whose gradient never arrived contribute what .grad() holds, or zeros.
    for (size_t b = next_launch; b < buckets.size(); ++b) {
      for (const BucketSlot& s : buckets[b].plan().slots) {
        if (ready[s.param]) continue;
        const Tensor g = tensors[s.param].grad();
        const Tensor view = slot_view(s.param);
        if (g.defined()) {
          view.copy_(g);
        } else {
          view.zero_();
        }
        ready[s.param] = true;
      }
      pending[b] = 0;
    }
    launch_ready();
    for (size_t b = 0; b < buckets.size(); ++b) {
      works[b]->wait();
      if (!completed[b]) {
        completed[b] = true;
        record(SyncEvent::Kind::bucket_completed, int64_t(b));
      }
      for (const BucketSlot& s : buckets[b].plan().slots) {
        const Tensor& t = tensors[s.param];
        const Tensor view = slot_view(s.param);
        const Tensor g = t.grad();
        if (g.defined()) {
          g.copy_(view);
        } else {
          t.set_grad(view.clone());
        }
      }
    }
    reset_step();
  }
};

}  // namespace detail

namespace {

using detail::DataParallelState;

void check_params(const DataParallel::NamedParams& params, const Communicator& comm) {
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [name, t] : params) {
    TS_CHECK(t.defined(), "DataParallel", "expected defined parameters, got an undefined '", name,
             "'");
    TS_CHECK(is_floating(t.dtype()), "DataParallel", "expected floating parameters, got '", name,
             "' ", t.describe());
    TS_CHECK(comm.supports(t.device().type), "DataParallel", "expected parameters on the ",
             comm.backend(), " communicator's device type, got '", name, "' ", t.describe());
    TS_CHECK(t.is_leaf(), "DataParallel", "expected leaf parameters, got '", name,
             "' with autograd history");
    TS_CHECK(seen.insert(t.impl()).second, "DataParallel", "expected each parameter once, got '",
             name, "' twice (the same tensor under two names)");
  }
}

// What every rank must agree on: names, shapes, dtypes, which parameters are reduced, options.
std::string layout_text(const DataParallel::NamedParams& params, const DataParallelOptions& o) {
  std::string text =
      str_cat("DataParallel cap=", o.bucket_cap_bytes, " broadcast=", o.broadcast_parameters, "\n");
  for (const std::string& name : o.completed_after_backward)
    text += str_cat("completed after backward: ", name, "\n");
  for (size_t g = 0; g < o.sync_groups.size(); ++g)
    for (const std::string& name : o.sync_groups[g]) text += str_cat("sync group ", g, ": ", name, "\n");
  for (const auto& [name, t] : params) {
    text += str_cat(name, " ", shape_str(t.shape()), " ", dtype_name(t.dtype()), " ",
                    t.requires_grad() ? "grad" : "frozen", "\n");
  }
  return text;
}

// Rank 0's values to every rank, one flat broadcast per bucket-sized group of parameters.
void broadcast_params(const std::vector<Tensor>& tensors, Communicator& comm, int64_t cap_bytes) {
  std::vector<BucketParam> info;
  std::vector<size_t> order;
  for (size_t i = 0; i < tensors.size(); ++i) {
    info.push_back(BucketParam{tensors[i].numel(), tensors[i].dtype()});
    order.push_back(i);
  }
  for (BucketPlan& plan : plan_buckets(info, order, cap_bytes)) {
    GradBucket bucket(std::move(plan), tensors.front().device());
    if (comm.rank() == 0) bucket.pack(tensors);
    comm.broadcast(bucket.buffer(), 0)->wait();
    if (comm.rank() != 0) bucket.unpack(tensors);
  }
}

}  // namespace

DataParallel::DataParallel(NamedParams params, std::shared_ptr<Communicator> comm,
                           const DataParallelOptions& options)
    : state_(std::make_shared<DataParallelState>()) {
  TS_CHECK(comm != nullptr, "DataParallel", "expected a communicator, got null");
  TS_CHECK(options.bucket_cap_bytes > 0, "DataParallel",
           "expected a positive bucket_cap_bytes, got ", options.bucket_cap_bytes);
  check_params(params, *comm);
  check_same_config(*comm, layout_text(params, options));

  DataParallelState& s = *state_;
  s.comm = std::move(comm);
  s.options = options;
  s.params = std::move(params);
  for (const auto& entry : s.params) s.tensors.push_back(entry.second);
  if (s.tensors.empty()) {
    s.reset_step();
    return;
  }
  if (options.broadcast_parameters && s.comm->size() > 1) {
    broadcast_params(s.tensors, *s.comm, options.bucket_cap_bytes);
  }

  // Buckets over the parameters that require grad, in reverse registration order: backward
  // produces the last layers' gradients first, so the first bucket fills first. The parameters
  // completed after backward get buckets of their own, after all the others.
  auto index_of = [&](const std::string& name, const char* option) {
    size_t p = 0;
    while (p < s.params.size() && s.params[p].first != name) ++p;
    TS_CHECK(p < s.params.size(), "DataParallel", option, " names '", name,
             "', which is not one of the parameters");
    return p;
  };
  s.completed_after.assign(s.tensors.size(), false);
  for (const std::string& name : options.completed_after_backward)
    s.completed_after[index_of(name, "completed_after_backward")] = true;
  s.group_of.assign(s.tensors.size(), -1);
  for (size_t g = 0; g < options.sync_groups.size(); ++g) {
    for (const std::string& name : options.sync_groups[g]) {
      const size_t p = index_of(name, "sync_groups");
      TS_CHECK(s.group_of[p] < 0, "DataParallel", "sync_groups puts '", name, "' in two sets");
      if (!s.completed_after[p]) s.group_of[p] = int64_t(g);
    }
  }
  // Runs of parameters that share a bucket plan, in reduction order: those reduced during
  // backward, cut wherever the sync group changes, then those completed after backward.
  std::vector<size_t> during, after;  // reduction order, indices into params
  std::vector<std::vector<size_t>> runs;
  for (size_t k = s.tensors.size(); k-- > 0;) {
    if (!s.tensors[k].requires_grad()) continue;
    if (s.completed_after[k]) {
      after.push_back(k);
      continue;
    }
    if (during.empty() || s.group_of[during.back()] != s.group_of[k]) runs.emplace_back();
    runs.back().push_back(k);
    during.push_back(k);
  }
  if (!after.empty()) runs.push_back(after);
  s.bucket_of.assign(s.tensors.size(), -1);
  s.slot_of.assign(s.tensors.size(), 0);
  for (const std::vector<size_t>& members : runs) {
    std::vector<BucketParam> info;
    std::vector<size_t> order;
    for (size_t k = 0; k < members.size(); ++k) {
      const Tensor& t = s.tensors[members[k]];
      info.push_back(BucketParam{t.numel(), t.dtype()});
      order.push_back(k);
    }
    for (BucketPlan& plan : plan_buckets(info, order, options.bucket_cap_bytes)) {
      for (size_t i = 0; i < plan.slots.size(); ++i) {
        BucketSlot& slot = plan.slots[i];
        slot.param = members[slot.param];  // subset index -> index into params
        s.bucket_of[slot.param] = int64_t(s.buckets.size());
        s.slot_of[slot.param] = i;
      }
      s.buckets.emplace_back(std::move(plan), s.tensors.front().device());
    }
  }
  s.reset_step();

  std::weak_ptr<DataParallelState> weak = state_;
  for (size_t p : during) {
    s.tensors[p].add_grad_ready_hook([weak, p](const Tensor&) {
      if (auto state = weak.lock()) state->on_grad_ready(p);
    });
  }
}

DataParallel::~DataParallel() = default;

DataParallel::NoSyncGuard::NoSyncGuard(std::shared_ptr<detail::DataParallelState> state,
                                       bool previous)
    : state_(std::move(state)), previous_(previous) {}

DataParallel::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : state_(std::move(other.state_)), previous_(other.previous_) {}

DataParallel::NoSyncGuard::~NoSyncGuard() {
  if (state_) state_->no_sync = previous_;
}

DataParallel::NoSyncGuard DataParallel::no_sync() {
  TS_CHECK(!state_->step_active, "DataParallel",
           "expected no_sync() between steps, got it after a synced backward started reducing "
           "gradients; call finish_gradient_sync() first");
  const bool previous = state_->no_sync;
  state_->no_sync = true;
  return NoSyncGuard(state_, previous);
}

bool DataParallel::sync_enabled() const { return !state_->no_sync; }

void DataParallel::sync_group(size_t g) {
  TS_CHECK(g < state_->group_synced.size(), "DataParallel", "expected a sync group in [0, ",
           state_->group_synced.size(), "), got ", g);
  state_->group_synced[g] = true;
}

void DataParallel::finish_gradient_sync() { state_->finish(); }

const std::shared_ptr<Communicator>& DataParallel::comm() const { return state_->comm; }

const DataParallel::NamedParams& DataParallel::params() const { return state_->params; }

size_t DataParallel::num_buckets() const { return state_->buckets.size(); }

std::vector<std::string> DataParallel::bucket_param_names(size_t b) const {
  TS_CHECK(b < state_->buckets.size(), "DataParallel", "expected a bucket in [0, ",
           state_->buckets.size(), "), got ", b);
  std::vector<std::string> names;
  for (const BucketSlot& s : state_->buckets[b].plan().slots) {
    names.push_back(state_->params[s.param].first);
  }
  return names;
}

int64_t DataParallel::bucket_bytes(size_t b) const {
  TS_CHECK(b < state_->buckets.size(), "DataParallel", "expected a bucket in [0, ",
           state_->buckets.size(), "), got ", b);
  return state_->buckets[b].nbytes();
}

std::vector<SyncEvent> DataParallel::events() const { return state_->events; }

void DataParallel::clear_events() { state_->events.clear(); }

}  // namespace tessera::parallel
