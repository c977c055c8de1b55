#include "parallel/comm/mpi_check.h"

#include <atomic>
#include <string>

#include "core/error.h"

namespace tessera::parallel {
namespace {
std::mutex g_mpi_mutex;
std::atomic<bool> g_thread_multiple{false};
}  // namespace

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  throw InternalError("mpi", str_cat(call, " failed: ", std::string(text, size_t(len)), " (code ",
                                     code, ", ", file, ":", line, ")"));
}

std::unique_lock<std::mutex> mpi_lock() {
  if (g_thread_multiple.load(std::memory_order_relaxed)) return {};
  return std::unique_lock<std::mutex>(g_mpi_mutex);
}

void set_mpi_thread_multiple(bool multiple) { g_thread_multiple.store(multiple); }

bool mpi_thread_multiple() { return g_thread_multiple.load(std::memory_order_relaxed); }

MPI_Datatype mpi_transport_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f16:
    case DType::bf16: return MPI_UINT16_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::b8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_reduce_op(ReduceOp op, DType dtype) {
  if (dtype == DType::b8) {
    return (op == ReduceOp::sum || op == ReduceOp::max) ? MPI_LOR : MPI_LAND;
  }
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::prod: return MPI_PROD;
  }
  return MPI_SUM;
}

}  // namespace tessera::parallel
