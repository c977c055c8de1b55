#include "parallel/comm/nccl_communicator.h"

#include <cstring>

#include "core/cuda/runtime.h"
#include "core/factory.h"
#include "parallel/comm/nccl_check.h"
#include "parallel/comm/nccl_work.h"

namespace tessera::parallel {
namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::b8: return ncclUint8;
  }
  return ncclUint8;
}

// Bools hold 0 or 1, so max is a logical or and min a logical and (a sum could wrap at 256 ranks).
ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  if (dtype == DType::b8) return (op == ReduceOp::sum || op == ReduceOp::max) ? ncclMax : ncclMin;
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::prod: return ncclProd;
  }
  return ncclSum;
}

size_t count_of(const Tensor& t) { return size_t(t.numel()); }

}  // namespace

int NcclCommunicator::device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later CUDA calls see a clean state
    return 0;
  }
  return n;
}

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, const std::string& name)
    : Communicator(name.empty() ? bootstrap.name() : name),
      device_(device),
      rank_(bootstrap.rank()),
      size_(bootstrap.size()) {
  TS_CHECK(bootstrap.device_type() == DeviceType::cpu, "nccl",
           "expected a CPU (MPI) communicator to bootstrap NCCL, got a ", bootstrap.backend(), " one");
  const int devices = device_count();
  TS_CHECK(device >= 0 && device < devices, "nccl", "expected a CUDA device in [0, ", devices,
           "), got ", device);
  set_timeout_s(bootstrap.timeout_s());
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) TS_NCCL_CHECK(ncclGetUniqueId(&id));
  Tensor buf = zeros({int64_t(sizeof(id))}, {.dtype = DType::b8});
  std::memcpy(buf.data_ptr(), &id, sizeof(id));
  bootstrap.broadcast(buf, 0)->wait();
  std::memcpy(&id, buf.data_ptr(), sizeof(id));
  TS_COMM_CUDA_CHECK(cudaSetDevice(device_));
  TS_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  init_stream();
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device, const std::string& name,
                                   double timeout_s)
    : Communicator(name), comm_(comm), device_(device) {
  set_timeout_s(timeout_s);
  TS_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
  TS_NCCL_CHECK(ncclCommCount(comm_, &size_));
  init_stream();
}

void NcclCommunicator::init_stream() {
  TS_COMM_CUDA_CHECK(cudaSetDevice(device_));
  // Non-blocking: communication must not serialise with the default stream's compute.
  TS_COMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TS_COMM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&barrier_buf_), sizeof(float)));
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (barrier_buf_ != nullptr) cudaFree(barrier_buf_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

template <typename Enqueue>
WorkPtr NcclCommunicator::launch(const char* op, std::vector<Tensor> keep_alive, Enqueue&& enqueue) {
  TS_COMM_CUDA_CHECK(cudaSetDevice(device_));
  // The tensors were produced on the calling thread's current stream of this device (where
  // Tessera queues its kernels and copies, core/cuda/runtime.h): wait for that work without
  // blocking the host. (Waiting on the legacy stream would miss kernels a StreamGuard sent to
  // another stream.)
  cudaEvent_t ready;
  TS_COMM_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  TS_COMM_CUDA_CHECK(cudaEventRecord(ready, cuda::current_stream(device_)));
  TS_COMM_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
  TS_COMM_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait is enqueued
  enqueue();
  return std::make_shared<NcclWork>(comm_, stream_, device_, NcclWorkInfo{op, name(), timeout_s()},
                                    std::move(keep_alive));
}

WorkPtr NcclCommunicator::do_all_reduce(const Tensor& t, ReduceOp op) {
  return launch("all_reduce", {t}, [&] {
    TS_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), count_of(t), nccl_type(t.dtype()),
                                nccl_op(op, t.dtype()), comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
  return launch("reduce_scatter", {in, out}, [&] {
    TS_NCCL_CHECK(ncclReduceScatter(in.data_ptr(), out.data_ptr(), count_of(out),
                                    nccl_type(out.dtype()), nccl_op(op, out.dtype()), comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_all_gather(const Tensor& in, const Tensor& out) {
  return launch("all_gather", {in, out}, [&] {
    TS_NCCL_CHECK(ncclAllGather(in.data_ptr(), out.data_ptr(), count_of(in), nccl_type(in.dtype()),
                                comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_broadcast(const Tensor& t, int root) {
  return launch("broadcast", {t}, [&] {
    TS_NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), count_of(t), nccl_type(t.dtype()), root,
                                comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_reduce(const Tensor& t, int root, ReduceOp op) {
  return launch("reduce", {t}, [&] {
    // In place: only the root's buffer receives the result.
    TS_NCCL_CHECK(ncclReduce(t.data_ptr(), t.data_ptr(), count_of(t), nccl_type(t.dtype()),
                             nccl_op(op, t.dtype()), root, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_all_to_all(const Tensor& in, const Tensor& out) {
  return launch("all_to_all", {in, out}, [&] {
    const size_t chunk = count_of(in) / size_t(size_);
    const size_t chunk_bytes = chunk * in.itemsize();
    const auto* src = static_cast<const char*>(in.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    TS_NCCL_CHECK(ncclGroupStart());
    for (int peer = 0; peer < size_; ++peer) {
      TS_NCCL_CHECK(ncclSend(src + peer * chunk_bytes, chunk, nccl_type(in.dtype()), peer, comm_, stream_));
      TS_NCCL_CHECK(ncclRecv(dst + peer * chunk_bytes, chunk, nccl_type(in.dtype()), peer, comm_, stream_));
    }
    TS_NCCL_CHECK(ncclGroupEnd());
  });
}

WorkPtr NcclCommunicator::do_send(const Tensor& t, int peer, int /*tag*/) {
  return launch("send", {t}, [&] {
    TS_NCCL_CHECK(ncclSend(t.data_ptr(), count_of(t), nccl_type(t.dtype()), peer, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_recv(const Tensor& t, int peer, int /*tag*/) {
  return launch("recv", {t}, [&] {
    TS_NCCL_CHECK(ncclRecv(t.data_ptr(), count_of(t), nccl_type(t.dtype()), peer, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::do_batch_send_recv(const std::vector<P2POp>& ops) {
  std::vector<Tensor> keep;
  for (const P2POp& p : ops) keep.push_back(p.tensor);
  return launch("batch_send_recv", std::move(keep), [&] {
    // One group: NCCL then schedules every transfer together, so the order of ops cannot deadlock.
    TS_NCCL_CHECK(ncclGroupStart());
    for (const P2POp& p : ops) {
      const Tensor& t = p.tensor;
      if (p.kind == P2POp::Kind::send) {
        TS_NCCL_CHECK(ncclSend(t.data_ptr(), count_of(t), nccl_type(t.dtype()), p.peer, comm_, stream_));
      } else {
        TS_NCCL_CHECK(ncclRecv(t.data_ptr(), count_of(t), nccl_type(t.dtype()), p.peer, comm_, stream_));
      }
    }
    TS_NCCL_CHECK(ncclGroupEnd());
  });
}

WorkPtr NcclCommunicator::do_barrier() {
  // NCCL has no barrier; a one-element all-reduce completes only once every rank has joined.
  return launch("barrier", {}, [&] {
    TS_NCCL_CHECK(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, stream_));
  });
}

std::shared_ptr<Communicator> NcclCommunicator::split(int color, int key, const std::string& name) {
  TS_COMM_CUDA_CHECK(cudaSetDevice(device_));
  ncclComm_t sub = nullptr;
  TS_NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
  if (sub == nullptr) return nullptr;
  return std::shared_ptr<Communicator>(new NcclCommunicator(
      sub, device_, name.empty() ? str_cat(this->name(), "/", color) : name, timeout_s()));
}

}  // namespace tessera::parallel
