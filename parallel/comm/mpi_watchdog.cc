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

// One thread's armed call, published like a seqlock. `seq` is odd while a call is armed and grows
// by one at every arm and disarm, so the watchdog times a call by seeing the same odd value for
// longer than its timeout: the calling thread never reads the clock. The call's description is
// written by its thread only while disarmed and read by the watchdog only while armed, then checked
// against `seq` again. Everything it points to lives as long as the process (the op names are
// literals, the group names interned, see Communicator::name()), so the thread's disarm is one
// plain store: it never waits for the watchdog, which at worst ends a job whose call finished in
// the instant after its timeout.
struct ThreadSlot {
  std::atomic<uint64_t> seq{0};
  std::atomic<const char*> op{nullptr};
  std::atomic<const char*> group{nullptr};
  std::atomic<size_t> group_size{0};
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
      if (seq % 2 == 0) continue;  // nothing armed
      if (seq != s->seen_seq) {    // a new call: start its clock
        s->seen_seq = seq;
        s->seen_at = now;
        continue;
      }
      const double waited = std::chrono::duration<double>(now - s->seen_at).count();
      const double timeout_s = s->timeout_s.load(std::memory_order_relaxed);
      if (waited < timeout_s) continue;
      const char* op = s->op.load(std::memory_order_relaxed);
      const std::string_view group(s->group.load(std::memory_order_relaxed),
                                   s->group_size.load(std::memory_order_relaxed));
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s->seq.load(std::memory_order_relaxed) != seq) continue;  // it just finished
      abort_job(str_cat("[", op, "] timed out after ", timeout_s, " s in group ", group));
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
  // Orders the description's stores after the last disarm, as a seqlock writer must: a watchdog
  // that reads a new description then sees the slot's seq moved on (no instruction on x86).
  std::atomic_thread_fence(std::memory_order_release);
  s.op.store(info.op, std::memory_order_relaxed);
  s.group.store(info.group.data(), std::memory_order_relaxed);
  s.group_size.store(info.group.size(), std::memory_order_relaxed);
  s.timeout_s.store(info.timeout_s, std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_release);
  armed_ = true;
}

BlockingCallGuard::~BlockingCallGuard() {
  if (!armed_) return;
  ThreadSlot& s = this_thread_slot();
  s.seq.store(s.seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

}  // namespace tessera::parallel
