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
// A warning line when the 1-minute load of `load` (load_average()'s text) is above the host's
// cores: other processes then share the CPUs and slow a bench's two sides unevenly. "" otherwise.
std::string overload_warning(const std::string& load);

// The host's CPU time so far (/proc/stat, in clock ticks over all CPUs), and the share of it a
// hypervisor gave to other guests ("steal"). On a shared VM that share swings from 0 to more than
// half within seconds; a side measured while it was high is slowed in a way its peer was not.
struct CpuTimes {
  uint64_t steal = 0, total = 0;  // total == 0: unknown (/proc/stat unreadable)

  // The time spent from `begin` to this reading; unknown when either is, or none passed.
  CpuTimes since(const CpuTimes& begin) const;
  // Adds another span (several rounds of one side).
  void add(const CpuTimes& span);
  // steal / total; -1 when unknown.
  double steal_share() const;
};
CpuTimes cpu_times();
// "CPU time stolen by the hypervisor while Tessera ran: 3%, while PyTorch ran: 21%", with a warning
// when either is above 5% ("" when neither is known). A share < 0 is left out.
std::string steal_report(double tessera, double peer);

// The process's peak resident set size in bytes (VmHWM; 0 when /proc is unreadable).
int64_t peak_rss_bytes();
// Lowers the peak mark to the current RSS (writes 5 to /proc/self/clear_refs), so one phase of a
// run can be measured on its own. False where the kernel refuses; the mark then keeps the past.
bool reset_peak_rss();

}  // namespace tessera::bench
