#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace tessera {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> log = [] {
    auto l = spdlog::stderr_color_mt("tessera");
    l->set_pattern("[%H:%M:%S] [%^%l%$] %v");
    const char* level = std::getenv("TESSERA_LOG_LEVEL");
    l->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
    return l;
  }();
  return *log;
}

}  // namespace tessera
