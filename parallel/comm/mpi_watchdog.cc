#include "parallel/comm/mpi_watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "parallel/comm/mpi_check.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/comm/mpi_work.h"

namespace tessera::parallel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kCheckPeriod = std::chrono::milliseconds(50);
constexpr uint64_t kFiring = ~uint64_t(0);  // the watchdog has claimed the call, ending the job

// One thread's armed call. `seq` is odd while a call is armed and grows by one at every arm and
// disarm, so the watchdog times a call by seeing the same odd value for longer than its timeout:
// the calling thread never reads the clock. `info` is written by its thread only while disarmed;
// the watchdog reads it only after winning the slot (kFiring), which keeps the thread from
// disarming and returning (so `info` stays alive) until the job ends.
struct ThreadSlot {
  std::atomic<uint64_t> seq{0};
  std::atomic<const MpiWorkInfo*> info{nullptr};
  std::atomic<double> timeout_s{0};
  // The watchdog's own notes (touched only by the watchdog thread, under the registry lock).
  uint64_t seen_seq = 0;
  Clock::time_point seen_at;
};

struct Registry {
  std::mutex mutex;
  std::vector<ThreadSlot*> slots;
};

// Never destroyed: the detached watchdog thread may still look at it during static destruction.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

[[noreturn]] void watch() {
  Registry& r = registry();
  for (;;) {
    std::this_thread::sleep_for(kCheckPeriod);
    std::lock_guard<std::mutex> lock(r.mutex);
    const Clock::time_point now = Clock::now();
    for (ThreadSlot* s : r.slots) {
      uint64_t seq = s->seq.load(std::memory_order_acquire);
      if (seq % 2 == 0 || seq == kFiring) continue;  // nothing armed
      if (seq != s->seen_seq) {                        // a new call: start its clock
        s->seen_seq = seq;
        s->seen_at = now;
        continue;
      }
      const double waited = std::chrono::duration<double>(now - s->seen_at).count();
      if (waited < s->timeout_s.load(std::memory_order_relaxed)) continue;
      if (!s->seq.compare_exchange_strong(seq, kFiring)) continue;  // it just finished
      const MpiWorkInfo& info = *s->info.load(std::memory_order_relaxed);
      abort_job(str_cat("[", info.op, "] timed out after ", info.timeout_s, " s in group ",
                        info.group));
    }
  }
}

// This thread's slot, registered with the watchdog for the thread's lifetime.
struct SlotHolder {
  ThreadSlot slot;
  SlotHolder() {
    static std::once_flag started;
    std::call_once(started, [] { std::thread(watch).detach(); });
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().slots.push_back(&slot);
  }
  ~SlotHolder() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.slots.erase(std::remove(r.slots.begin(), r.slots.end(), &slot), r.slots.end());
  }
};

ThreadSlot& this_thread_slot() {
  thread_local SlotHolder holder;
  return holder.slot;
}

}  // namespace

BlockingCallGuard::BlockingCallGuard(const MpiWorkInfo& info) {
  if (!mpi_thread_multiple()) return;
  ThreadSlot& s = this_thread_slot();
  const uint64_t seq = s.seq.load(std::memory_order_relaxed);
  if (seq % 2 == 1) return;  // this thread already has an armed call
  s.info.store(&info, std::memory_order_relaxed);
  s.timeout_s.store(info.timeout_s, std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_release);
  armed_ = true;
}

BlockingCallGuard::~BlockingCallGuard() {
  if (!armed_) return;
  ThreadSlot& s = this_thread_slot();
  uint64_t seq = s.seq.load(std::memory_order_relaxed);
  if (seq == kFiring || !s.seq.compare_exchange_strong(seq, seq + 1)) {
    // The watchdog is ending the job and reads this call's info: stay until it does.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace tessera::parallel
