// Checked readers for the bench's command-line values.
#include "tools/bench/bench_args.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace tessera::bench {

const std::string& ArgCursor::value() {
  if (i_ + 1 >= args_.size()) throw UsageError("expected a value after " + args_[i_]);
  return args_[++i_];
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < min || v > max) {
    throw UsageError("expected " + flag + " to be an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + text + "'");
  }
  return v;
}

int64_t parse_bytes(const std::string& flag, const std::string& text) {
  std::string digits = text;
  int64_t unit = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': unit = int64_t(1) << 10; break;
      case 'M': case 'm': unit = int64_t(1) << 20; break;
      case 'G': case 'g': unit = int64_t(1) << 30; break;
      default: break;
    }
    if (unit > 1) digits.pop_back();
  }
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > (int64_t(1) << 40) / unit) {
    throw UsageError("expected " + flag + " to be a size like 1024, 64K or 256M, got '" + text +
                     "'");
  }
  return v * unit;
}

std::vector<std::pair<int64_t, int64_t>> parse_shapes(const std::string& flag,
                                                      const std::string& text) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t x = item.find('x');
    if (x == std::string::npos) {
      throw UsageError("expected " + flag + " to list BxT shapes like 4x64,4x256, got '" + text +
                       "'");
    }
    shapes.emplace_back(parse_int(flag + " batch", item.substr(0, x), 1, 1 << 20),
                        parse_int(flag + " length", item.substr(x + 1), 1, 1 << 24));
    start = comma + 1;
  }
  return shapes;
}

bool reports_usage_errors() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");  // set by mpirun
  return !rank || std::string(rank) == "0";
}

}  // namespace tessera::bench
