// The auto chunk placement (chunk_placement.h, param_placement.h): a warm-up step with every chunk
// on the host traces the device's peak between gathers; then the chunks that fit under the limit
// get device copies, and within each step a schedule from the trace keeps and drops them.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"
#include "parallel/zero/chunk_placement.h"

namespace tessera::parallel::zero {

namespace {

// The largest of every rank's `local`, on every rank (a collective over comm).
int64_t max_over(Communicator& comm, int64_t local) {
  if (comm.size() == 1) return local;
  Tensor value = from_vector<int64_t>({local}, {1}).to(comm.device());
  comm.all_reduce(value, ReduceOp::max)->wait();
  return value.to(kCPU).data<int64_t>()[0];
}

class AutoPlacement : public ChunkPlacement {
 public:
  AutoPlacement(const ParamPlacement& placement, ChunkStore& store,
                const AutoPlacementContext& context)
      : limit_(placement.device_limit), store_(store), context_(context) {
    // The warm-up step runs with every chunk on the host and traces the rest of the device's use.
    store_.place(std::vector<bool>(store_.count(), true));
    reset_peak_memory(store_.device());
    reset_trace_peak(store_.device());
  }

  void before_gather() override {
    if (!warming_up_) return;
    // The trace: the device's peak since the previous gather.
    trace_.push_back(memory_stats(store_.device()).trace_peak_bytes);
    reset_trace_peak(store_.device());
  }

  void at_gather(size_t position) override {
    if (!schedule_ || position == AccessOrder::kOffRecord) return;
    // In-step eviction: the copies held until the next gather fit what the warm-up left there.
    std::vector<bool> on_device = store_.copies_held();
    schedule_->step(position, reads_at_[position], budget_at_[position], on_device);
    store_.apply_copies(on_device);
  }

  void window_ended(bool training, const AccessOrder& order) override {
    if (warming_up_) {
      if (training) {
        trace_.push_back(memory_stats(store_.device()).trace_peak_bytes);
        place_after_warmup(order);
      } else {
        trace_.clear();  // not the step the order records
        reset_trace_peak(store_.device());
      }
    } else if (schedule_) {
      // Between windows (the optimizer step, evaluation) the copies fit the whole step's budget.
      std::vector<bool> on_device = store_.copies_held();
      schedule_->fit(order.order().size() - 1, rest_budget_, on_device);
      store_.apply_copies(on_device);
    }
  }

  void evict_copies() override { store_.apply_copies(std::vector<bool>(store_.count(), false)); }
  bool placed() const override { return !warming_up_; }
  int64_t warmup_peak_bytes() const override { return warmup_peak_; }

 private:
  // The whole step's budget for chunk copies, agreed over the data group; throws on every rank
  // alike when the limit is below what the warm-up used.
  int64_t agreed_budget() {
    warmup_peak_ = memory_stats(store_.device()).peak_bytes;
    // Every rank places by the data group's highest peak (the least room left), so every rank
    // makes the same decision and a limit too low fails on all of them with the same message,
    // instead of on one rank while the others wait for it in their next collective.
    const int64_t peak = max_over(*context_.comm, warmup_peak_);
    // The warm-up records the order, so it gathers nothing ahead; later steps hold up to
    // `prefetch` more parameters in flight, the largest ones at worst.
    const int64_t budget = limit_ - peak - ahead();
    TS_CHECK(budget >= 0, "zero", "zero.device_memory_limit is ", limit_,
             " bytes, but the first step used ", peak,
             " bytes of device memory with every parameter chunk on the host (activations, "
             "gathered parameters, gradients), and prefetching needs up to ",
             ahead(),
             " more: raise the limit, or lower the micro-batch, zero.live_params or zero.prefetch");
    return budget;
  }

  int64_t ahead() const { return int64_t(context_.prefetch) * context_.largest_param_bytes; }

  // At the end of the warm-up step: the chunks that fit under the limit at every moment get
  // device copies, and the in-step schedule is made from the warm-up's trace.
  void place_after_warmup(const AccessOrder& access) {
    warming_up_ = false;
    const int64_t budget = agreed_budget();
    // Every chunk's reads in the recorded step: the gathers of the parameters it holds pieces of.
    const std::vector<size_t>& order = access.order();
    const std::vector<std::vector<size_t>> chunks_of = store_.chunks_of_params(context_.params);
    std::vector<int64_t> bytes = store_.chunk_bytes();
    std::vector<std::vector<size_t>> reads(bytes.size());
    reads_at_.assign(order.size(), {});
    for (size_t i = 0; i < order.size(); ++i) {
      reads_at_[i] = chunks_of[order[i]];
      for (size_t c : reads_at_[i]) reads[c].push_back(i);
    }
    // Every chunk stays home on the host; those that fit the whole step's budget, first read
    // first, get device copies to start with, and the schedule keeps more while the step leaves
    // room.
    std::vector<size_t> first_use;
    for (const std::vector<size_t>& r : reads)
      first_use.push_back(r.empty() ? SIZE_MAX : r.front());
    store_.apply_copies(auto_device_chunks(first_use, bytes, budget));
    rest_budget_ = budget;
    // The warm-up gathered each parameter of the record once, each sampled before its gather: one
    // sample per gather and the window's end. Anything else (a gather from a worker, say) leaves
    // the placement static.
    if (trace_.size() != order.size() + 1) return;
    // What the device may hold in copies from gather i to the next: the limit less the warm-up's
    // peak there and the prefetch's headroom (never below the whole step's budget).
    budget_at_.assign(order.size(), 0);
    for (size_t i = 0; i < order.size(); ++i)
      budget_at_[i] = std::max(budget, limit_ - trace_[i + 1] - ahead());
    schedule_.emplace(std::move(reads), std::move(bytes), order.size());
  }

  const int64_t limit_;
  ChunkStore& store_;
  const AutoPlacementContext context_;
  bool warming_up_ = true;  // until the first training window ends
  int64_t warmup_peak_ = 0;
  // The warm-up's device peak before the first gather, and after each until the next (the
  // window's end after the last); then the in-step schedule, each record position's chunks and
  // copy budget, and the budget between windows (the whole step's).
  std::vector<int64_t> trace_;
  std::optional<ChunkSchedule> schedule_;
  std::vector<std::vector<size_t>> reads_at_;
  std::vector<int64_t> budget_at_;
  int64_t rest_budget_ = 0;
};

}  // namespace

std::unique_ptr<ChunkPlacement> make_auto_placement(const ParamPlacement& placement,
                                                    ChunkStore& store,
                                                    const AutoPlacementContext& context) {
  return std::make_unique<AutoPlacement>(placement, store, context);
}

}  // namespace tessera::parallel::zero
