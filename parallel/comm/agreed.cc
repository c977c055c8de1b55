#include "parallel/comm/agreed.h"

#include <climits>
#include <cstring>
#include <exception>
#include <string>

#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel {

namespace {

// Collective: root's text on every rank (its length first, so the others can size the buffer; the
// bytes travel packed in 64-bit words).
std::string broadcast_text(Communicator& comm, const std::string& text, int root) {
  Tensor length = from_vector<int64_t>({int64_t(text.size())}, {1});
  comm.broadcast(length, root)->wait();
  const int64_t n = length.data<int64_t>()[0];
  if (n == 0) return {};
  Tensor words = zeros({(n + 7) / 8}, {.dtype = DType::i64});
  if (comm.rank() == root) std::memcpy(words.data_ptr(), text.data(), size_t(n));
  comm.broadcast(words, root)->wait();
  return std::string(static_cast<const char*>(words.data_ptr()), size_t(n));
}

}  // namespace

void run_agreed(Communicator* comm, const std::function<void()>& fn) {
  if (!comm || comm->size() == 1) return fn();
  std::exception_ptr error;
  std::string message;
  try {
    fn();
  } catch (const std::exception& e) {
    error = std::current_exception();
    message = e.what();
  } catch (...) {
    error = std::current_exception();
    message = str_cat("rank ", comm->rank(), ": unknown exception");
  }
  Tensor flag = from_vector<int32_t>({error ? comm->rank() : INT_MAX}, {1});
  comm->all_reduce(flag, ReduceOp::min)->wait();
  const int first = flag.data<int32_t>()[0];
  if (first == INT_MAX) return;
  const std::string shared = broadcast_text(*comm, message, first);
  if (first == comm->rank()) std::rethrow_exception(error);
  throw PeerError(first, shared);
}

}  // namespace tessera::parallel
