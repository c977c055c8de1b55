// Facts about the host printed above a bench table (CPU model, load) and this process's peak
// resident memory.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::bench {

// "model name" from /proc/cpuinfo ("unknown CPU" when absent).
std::string cpu_model();
// The 1-, 5- and 15-minute load averages, "0.52 0.40 0.31" (empty when unreadable): a loaded
// machine explains noisy numbers.
std::string load_average();

// The process's peak resident set size in bytes (VmHWM; 0 when /proc is unreadable).
int64_t peak_rss_bytes();
// Lowers the peak mark to the current RSS (writes 5 to /proc/self/clear_refs), so one phase of a
// run can be measured on its own. False where the kernel refuses; the mark then keeps the past.
bool reset_peak_rss();

}  // namespace tessera::bench
