// Tessera's exceptions and check macros. Every message reads "[op] expected ..., got ...", with the
// process rank in front once a parallel job has set it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

// Base of everything Tessera throws; op() names the operation that failed.
class Error : public std::runtime_error {
 public:
  Error(std::string op, const std::string& message);
  const std::string& op() const { return op_; }

 protected:
  struct Formatted {};  // the message is a whole what() already (rank prefix and [op])
  Error(std::string op, const std::string& what, Formatted);

 private:
  std::string op_;
};

// The caller's mistake: bad shapes, dtypes, devices, indices, configuration, files.
class ValueError : public Error {
 public:
  using Error::Error;
};

// A failure first raised on another rank and shared with this one, so that every rank throws at
// the same point with the same text (parallel::run_agreed): what() is that rank's message, word
// for word. The origin rank reports it; the others may stay quiet (run_distributed does).
class PeerError : public ValueError {
 public:
  PeerError(int origin_rank, const std::string& what);
  int origin_rank() const { return origin_rank_; }

 private:
  int origin_rank_;
};

// A broken invariant inside Tessera (a bug), or a failure of the system below us.
class InternalError : public Error {
 public:
  using Error::Error;
};

// Set by the parallel runtime so every message names its rank; -1 means single process.
void set_error_rank(int rank);
int error_rank();

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace tessera

// TS_CHECK(cond, "op", "expected ..., got ", x): throws ValueError when cond is false.
#define TS_CHECK(cond, op, ...) \
  do {                          \
    if (!(cond)) [[unlikely]]   \
      throw ::tessera::ValueError((op), ::tessera::str_cat(__VA_ARGS__)); \
  } while (0)

#define TS_FAIL(op, ...) throw ::tessera::ValueError((op), ::tessera::str_cat(__VA_ARGS__))

// Internal invariants: a failure is a Tessera bug, reported with file and line.
#define TS_ASSERT(cond)                                                                      \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      throw ::tessera::InternalError("internal", ::tessera::str_cat(__FILE__, ":", __LINE__, \
                                                                    ": assertion ", #cond,   \
                                                                    " failed"));             \
  } while (0)
