// Facts about the host printed above a bench table: CPU model, core count, load.
#pragma once

#include <string>

namespace tessera::bench {

// "model name" from /proc/cpuinfo ("unknown CPU" when absent).
std::string cpu_model();
// The 1-, 5- and 15-minute load averages, "0.52 0.40 0.31" (empty when unreadable): a loaded
// machine explains noisy numbers.
std::string load_average();

}  // namespace tessera::bench
