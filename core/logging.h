// Logging through spdlog, with the level from TESSERA_LOG_LEVEL (trace, debug, info, warn, error).
#pragma once

#include <spdlog/spdlog.h>

namespace tessera {

// The project logger; configured once from the environment on first use.
spdlog::logger& logger();

}  // namespace tessera

#define TS_LOG_INFO(...) ::tessera::logger().info(__VA_ARGS__)
#define TS_LOG_WARN(...) ::tessera::logger().warn(__VA_ARGS__)
#define TS_LOG_DEBUG(...) ::tessera::logger().debug(__VA_ARGS__)
#define TS_LOG_ERROR(...) ::tessera::logger().error(__VA_ARGS__)
