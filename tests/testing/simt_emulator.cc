// Fiber-based SIMT emulator (simt_emulator.h) and the host side of kernels/cuda/simt.cuh.
#include "tests/testing/simt_emulator.h"

#include <ucontext.h>

#include <array>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/simt.cuh"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define TS_SIMT_ASAN_FIBERS 1
#endif

namespace tessera::simt {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;

// What a fiber waits for. Warp waits carry the primitive, so lanes meeting in different
// primitives are reported as divergence rather than matched.
enum class Wait { none, block, warp_sync, warp_shfl, warp_mma, done };

const char* wait_name(Wait w) {
  switch (w) {
    case Wait::none:
      return "running";
    case Wait::block:
      return "sync_block";
    case Wait::warp_sync:
      return "sync_warp";
    case Wait::warp_shfl:
      return "shfl_xor";
    case Wait::warp_mma:
      return "mma_16816";
    case Wait::done:
      return "exited";
  }
  return "?";
}

struct Fiber {
  ucontext_t context;
  Wait wait = Wait::none;
};

// Per-lane exchange slots of the warp primitives.
struct Slot {
  uint64_t bits = 0;
  std::array<uint32_t, 4> a{};
  std::array<uint32_t, 2> b{};
};

struct Emulation {
  ucontext_t scheduler;
  const void* scheduler_stack = nullptr;  // for ASan's fiber annotations
  size_t scheduler_stack_size = 0;
  std::vector<Fiber> fibers;
  std::vector<Slot> slots;
  std::unique_ptr<char[]> stacks;
  const BlockBody* body = nullptr;
  int64_t block = 0;
  unsigned char* shared = nullptr;
  int current = -1;
  std::exception_ptr error;
};

Emulation* g_emulation = nullptr;

Emulation& emulation() {
  if (g_emulation == nullptr || g_emulation->current < 0) {
    throw std::logic_error("simt: a warp or block primitive was called outside simt::emulate");
  }
  return *g_emulation;
}

char* stack_of(Emulation& e, int thread) { return e.stacks.get() + size_t(thread) * kStackBytes; }

// Switches contexts, telling ASan which stack runs next (it tracks one stack per thread otherwise).
void switch_context(ucontext_t* from, ucontext_t* to, const void* to_stack, size_t to_size,
                    bool from_exits) {
#if defined(TS_SIMT_ASAN_FIBERS)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(from_exits ? nullptr : &fake_stack, to_stack, to_size);
  swapcontext(from, to);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)to_stack, (void)to_size, (void)from_exits;
  swapcontext(from, to);
#endif
}

// The calling fiber waits at `w` and returns when the scheduler releases it.
void wait_at(Wait w) {
  Emulation& e = emulation();
  Fiber& f = e.fibers[size_t(e.current)];
  f.wait = w;
  switch_context(&f.context, &e.scheduler, e.scheduler_stack, e.scheduler_stack_size, false);
}

void fiber_main() {
  Emulation& e = *g_emulation;
  const int thread = e.current;
#if defined(TS_SIMT_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(nullptr, &e.scheduler_stack, &e.scheduler_stack_size);
#endif
  try {
    (*e.body)(e.block, thread, e.shared);
  } catch (...) {
    if (!e.error) e.error = std::current_exception();
  }
  Fiber& f = e.fibers[size_t(thread)];
  f.wait = Wait::done;
  switch_context(&f.context, &e.scheduler, e.scheduler_stack, e.scheduler_stack_size, true);
}

// Releases every barrier that is complete; returns whether any was.
bool release(Emulation& e) {
  const int threads = int(e.fibers.size());
  bool released = false;
  for (int w0 = 0; w0 < threads; w0 += 32) {
    const Wait first = e.fibers[size_t(w0)].wait;
    if (first != Wait::warp_sync && first != Wait::warp_shfl && first != Wait::warp_mma) continue;
    bool all = true;
    for (int l = 0; l < 32; ++l) all = all && e.fibers[size_t(w0 + l)].wait == first;
    if (!all) continue;
    for (int l = 0; l < 32; ++l) e.fibers[size_t(w0 + l)].wait = Wait::none;
    released = true;
  }
  if (released) return true;
  bool any_waiting = false, all_at_block = true;
  for (const Fiber& f : e.fibers) {
    if (f.wait == Wait::done) continue;
    any_waiting = true;
    all_at_block = all_at_block && f.wait == Wait::block;
  }
  if (!any_waiting || !all_at_block) return false;
  for (Fiber& f : e.fibers) {
    if (f.wait == Wait::block) f.wait = Wait::none;
  }
  return true;
}

std::string describe_deadlock(const Emulation& e) {
  std::string s = "simt: barrier that cannot complete in block " + std::to_string(e.block) + ":";
  const int threads = int(e.fibers.size());
  for (int w0 = 0; w0 < threads; w0 += 32) {
    s += " warp " + std::to_string(w0 / 32) + " [";
    for (int l = 0; l < 32; ++l) {
      if (l == 0 || e.fibers[size_t(w0 + l)].wait != e.fibers[size_t(w0 + l - 1)].wait) {
        s += (l == 0 ? "" : ", ") + std::string("lane ") + std::to_string(l) +
             "+: " + wait_name(e.fibers[size_t(w0 + l)].wait);
      }
    }
    s += "]";
  }
  return s;
}

void run_block(Emulation& e) {
  const int threads = int(e.fibers.size());
  for (int t = 0; t < threads; ++t) {
    Fiber& f = e.fibers[size_t(t)];
    f.wait = Wait::none;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stack_of(e, t);
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
  }
  for (;;) {
    for (int t = 0; t < threads; ++t) {
      Fiber& f = e.fibers[size_t(t)];
      if (f.wait != Wait::none) continue;
      e.current = t;
      switch_context(&e.scheduler, &f.context, stack_of(e, t), kStackBytes, false);
      e.current = -1;
    }
    if (e.error) std::rethrow_exception(e.error);
    bool all_done = true;
    for (const Fiber& f : e.fibers) all_done = all_done && f.wait == Wait::done;
    if (all_done) return;
    if (!release(e)) throw std::logic_error(describe_deadlock(e));
  }
}

float decode(uint32_t reg, int half, bool bf16) {
  const uint16_t bits = uint16_t(reg >> (16 * half));
  return bf16 ? bf16_bits_to_float(bits) : half_bits_to_float(bits);
}

}  // namespace

void emulate(int64_t blocks, int threads, size_t shared_bytes, const BlockBody& body) {
  if (threads <= 0 || threads % 32 != 0) {
    throw std::invalid_argument("simt::emulate: expected a positive multiple of 32 threads, got " +
                                std::to_string(threads));
  }
  if (g_emulation != nullptr) throw std::logic_error("simt::emulate: emulations do not nest");
  Emulation e;
  e.fibers.resize(size_t(threads));
  e.slots.resize(size_t(threads));
  e.stacks.reset(new char[size_t(threads) * kStackBytes]);
  e.body = &body;
  std::unique_ptr<Pack16[]> shared(new Pack16[(shared_bytes + 15) / 16 + 1]);
  e.shared = reinterpret_cast<unsigned char*>(shared.get());
  struct Reset {
    ~Reset() { g_emulation = nullptr; }
  } reset;
  g_emulation = &e;
  for (int64_t block = 0; block < blocks; ++block) {
    e.block = block;
    std::memset(e.shared, 0xFF, shared_bytes);
    run_block(e);
  }
}

void check_aligned(const void* p, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    throw std::logic_error("simt: misaligned " + std::to_string(bytes) + "-byte access at " +
                           std::to_string(reinterpret_cast<uintptr_t>(p)));
  }
}

void sync_block() { wait_at(Wait::block); }

void sync_warp() { wait_at(Wait::warp_sync); }

uint64_t shuffle_bits(uint64_t bits, Shuffle kind, int arg) {
  Emulation& e = emulation();
  const int t = e.current, lane = t & 31;
  e.slots[size_t(t)].bits = bits;
  wait_at(Wait::warp_shfl);
  int src = lane;
  switch (kind) {
    case Shuffle::xor_mask: src = lane ^ (arg & 31); break;
    case Shuffle::down: src = lane + arg < 32 ? lane + arg : lane; break;
    case Shuffle::index: src = arg & 31; break;
  }
  const uint64_t r = e.slots[size_t((t & ~31) | src)].bits;
  wait_at(Wait::warp_shfl);  // nobody overwrites a slot before every lane has read
  return r;
}

void mma_16816_emulated(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16) {
  Emulation& e = emulation();
  const int t = e.current, base = t & ~31, lane = t & 31;
  Slot& mine = e.slots[size_t(t)];
  std::memcpy(mine.a.data(), a, sizeof(a));
  std::memcpy(mine.b.data(), b, sizeof(b));
  wait_at(Wait::warp_mma);
  // Element (r, k) of A lives in lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 (k >= 8),
  // half k % 2; element (k, n) of B in lane n * 4 + (k % 8) / 2, register k >= 8, half k % 2.
  auto a_at = [&](int r, int k) {
    const Slot& s = e.slots[size_t(base + (r % 8) * 4 + (k % 8) / 2)];
    return decode(s.a[size_t((r >= 8) + 2 * (k >= 8))], k % 2, bf16);
  };
  auto b_at = [&](int k, int n) {
    const Slot& s = e.slots[size_t(base + n * 4 + (k % 8) / 2)];
    return decode(s.b[size_t(k >= 8)], k % 2, bf16);
  };
  const int g = lane / 4, tig = lane % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), n = 2 * tig + (i % 2);
    double acc = 0.0;
    for (int k = 0; k < 16; ++k) acc += double(a_at(r, k)) * double(b_at(k, n));
    out[i] = float(double(c[i]) + acc);
  }
  wait_at(Wait::warp_mma);  // every lane has read the fragments before any lane reuses its slot
  for (int i = 0; i < 4; ++i) c[i] = out[i];
}

}  // namespace tessera::simt
