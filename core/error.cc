#include "core/error.h"

#include <atomic>

namespace tessera {
namespace {
std::atomic<int> g_rank{-1};

std::string format(const std::string& op, const std::string& message) {
  std::string prefix = g_rank.load() >= 0 ? "rank " + std::to_string(g_rank.load()) + ": " : "";
  return prefix + "[" + op + "] " + message;
}
}  // namespace

Error::Error(std::string op, const std::string& message)
    : std::runtime_error(format(op, message)), op_(std::move(op)) {}

Error::Error(std::string op, const std::string& what, Formatted)
    : std::runtime_error(what), op_(std::move(op)) {}

PeerError::PeerError(int origin_rank, const std::string& what)
    : ValueError("peer", what, Formatted{}), origin_rank_(origin_rank) {}

void set_error_rank(int rank) { g_rank.store(rank); }
int error_rank() { return g_rank.load(); }

}  // namespace tessera
