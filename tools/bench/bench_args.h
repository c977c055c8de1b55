// Command-line parsing shared by the bench subcommands: a cursor over "--flag value" arguments and
// checked number, byte-size and batch-shape readers. Mistakes throw UsageError (exit status 2).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

// A bad command line; what() is "[bench] expected ..., got ...".
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error("[bench] " + message) {}
};

class ArgCursor {
 public:
  explicit ArgCursor(std::vector<std::string> args) : args_(std::move(args)) {}
  // Moves to the next argument; false at the end.
  bool next() { return ++i_ < args_.size(); }
  const std::string& flag() const { return args_[i_]; }
  // The argument after the current flag (consumed); throws when there is none.
  const std::string& value();

 private:
  std::vector<std::string> args_;
  size_t i_ = size_t(-1);
};

// Subcommands run under mpirun: every rank reads the same command line, so only rank 0 (or a
// process started without mpirun) reports a UsageError. parse(argv[first..argc)) on every rank:
// the arguments, or nullopt on a rank that stays quiet (its caller exits with status 2).
bool reports_usage_errors();
template <typename Args>
std::optional<Args> parse_on_every_rank(Args (*parse)(const std::vector<std::string>&), int argc,
                                        char** argv, int first) {
  try {
    return parse(std::vector<std::string>(argv + first, argv + argc));
  } catch (const UsageError&) {
    if (reports_usage_errors()) throw;
    return std::nullopt;
  }
}

// A whole decimal integer in [min, max], else UsageError naming the flag.
int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max);
// "1024", "64K", "256M", "1G" (powers of 1024) -> bytes, at least 1.
int64_t parse_bytes(const std::string& flag, const std::string& text);
// "4x64,4x256" -> {(4, 64), (4, 256)}: batch x sequence length, each positive.
std::vector<std::pair<int64_t, int64_t>> parse_shapes(const std::string& flag,
                                                      const std::string& text);

}  // namespace tessera::bench
