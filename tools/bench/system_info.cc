// Reads the host facts and the process's peak RSS from /proc.
#include "tools/bench/system_info.h"

#include <cstdlib>
#include <fstream>
#include <thread>

namespace tessera::bench {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "unknown CPU" : line.substr(start);
  }
  return "unknown CPU";
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "";
  return one + " " + five + " " + fifteen;
}

std::string overload_warning(const std::string& load) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (load.empty() || cores == 0 || std::strtod(load.c_str(), nullptr) <= cores) return "";
  return "warning: load average above the " + std::to_string(cores) +
         " cores: other processes share the CPUs, so both columns are slowed unevenly; rerun on "
         "an idle machine";
}

CpuTimes cpu_times() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  if (!(in >> cpu) || cpu != "cpu") return {};
  // user nice system idle iowait irq softirq steal [guest guest_nice, already counted in user]
  CpuTimes t;
  for (int field = 0; field < 8; ++field) {
    uint64_t ticks = 0;
    if (!(in >> ticks)) return {};
    t.total += ticks;
    if (field == 7) t.steal = ticks;
  }
  return t;
}

CpuTimes CpuTimes::since(const CpuTimes& begin) const {
  if (begin.total == 0 || total <= begin.total) return {};
  return {steal - begin.steal, total - begin.total};
}

void CpuTimes::add(const CpuTimes& span) {
  steal += span.steal;
  total += span.total;
}

double CpuTimes::steal_share() const { return total > 0 ? double(steal) / double(total) : -1.0; }

std::string steal_report(double tessera, double peer) {
  if (tessera < 0 && peer < 0) return "";
  auto percent = [](double share) { return std::to_string(int(share * 100.0 + 0.5)) + "%"; };
  std::string text = "CPU time stolen by the hypervisor";
  if (tessera >= 0) text += " while Tessera ran: " + percent(tessera);
  if (peer >= 0) text += std::string(tessera >= 0 ? "," : "") + " while PyTorch ran: " + percent(peer);
  if (tessera > 0.05 || peer > 0.05) {
    text += " (above 5%: other guests slowed the columns unevenly; rerun, or compare medians of "
            "several runs)";
  }
  return text;
}

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM: N kB"
  }
  return 0;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return bool(out);
}

}  // namespace tessera::bench
