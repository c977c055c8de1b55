// The NCCL backend on CUDA tensors, compared with the MPI backend on the same values, its ordering
// after the caller's current stream, and RoutedCommunicator with an NCCL half. Needs a GPU:
// without one it prints a single SKIPPED line and passes. Runs as one process (MPI singleton) or
// under mpirun with one rank per GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/cuda/stream.h"
#include "core/factory.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/comm/nccl_check.h"
#include "parallel/comm/nccl_communicator.h"
#include "parallel/comm/routed_communicator.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using namespace tessera::parallel;

namespace {

// A copy of a contiguous CPU tensor in cudaMalloc'd memory (no CUDA allocator is needed).
Tensor to_cuda(const Tensor& cpu, int device) {
  const size_t nbytes = size_t(cpu.numel()) * cpu.itemsize();
  void* p = nullptr;
  TS_COMM_CUDA_CHECK(cudaSetDevice(device));
  TS_COMM_CUDA_CHECK(cudaMalloc(&p, nbytes == 0 ? 1 : nbytes));
  TS_COMM_CUDA_CHECK(cudaMemcpy(p, cpu.data_ptr(), nbytes, cudaMemcpyHostToDevice));
  auto storage = std::make_shared<Storage>(p, nbytes, cuda_device(device), [](void* q) { cudaFree(q); });
  return Tensor(storage, cpu.shape(), contiguous_strides(cpu.shape()), 0, cpu.dtype());
}

Tensor to_cpu(const Tensor& gpu) {
  Tensor out = empty(gpu.shape(), {.dtype = gpu.dtype()});
  TS_COMM_CUDA_CHECK(cudaMemcpy(out.data_ptr(), gpu.data_ptr(), size_t(gpu.numel()) * gpu.itemsize(),
                                cudaMemcpyDeviceToHost));
  return out;
}

Tensor values(DType dt, int64_t n, int rank, int salt) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double x = double((rank * 7 + i * 3 + salt) % 13 - 6) * 0.5;
    v[size_t(i)] = dt == DType::b8 ? double((rank + i + salt) % 3 == 0) : (is_floating(dt) ? x : 2 * x);
  }
  return from_vector<double>(v, {n}, TensorOptions{.dtype = dt});
}

void check_same(const Tensor& got_gpu, const Tensor& want_cpu, const char* what) {
  Tensor got = to_cpu(got_gpu);
  for (int64_t i = 0; i < want_cpu.numel(); ++i) {
    RANK_CHECK_CLOSE(want_cpu.dtype(), testing::element(got, i), testing::element(want_cpu, i), what,
                     " i=", i);
  }
}

void run(Communicator& mpi, NcclCommunicator& nccl, int device) {
  const int p = nccl.size(), me = nccl.rank();
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8};
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min};
  for (DType dt : dtypes) {
    for (int64_t n : {int64_t(7), int64_t(1000)}) {
      for (ReduceOp op : ops) {
        if (op == ReduceOp::avg && !is_floating(dt)) continue;
        Tensor cpu = values(dt, n, me, 1), gpu = to_cuda(cpu, device);
        mpi.all_reduce(cpu, op)->wait();
        nccl.all_reduce(gpu, op)->wait();
        check_same(gpu, cpu, "all_reduce");
      }
      Tensor in = values(dt, n * p, me, 2), out = empty({n}, {.dtype = dt});
      Tensor gin = to_cuda(in, device), gout = to_cuda(out, device);
      mpi.reduce_scatter(in, out)->wait();
      nccl.reduce_scatter(gin, gout)->wait();
      check_same(gout, out, "reduce_scatter");

      Tensor ag_in = values(dt, n, me, 3), ag_out = empty({n * p}, {.dtype = dt});
      Tensor g_ag_in = to_cuda(ag_in, device), g_ag_out = to_cuda(ag_out, device);
      mpi.all_gather(ag_in, ag_out)->wait();
      nccl.all_gather(g_ag_in, g_ag_out)->wait();
      check_same(g_ag_out, ag_out, "all_gather");

      Tensor b = values(dt, n, me, 4), gb = to_cuda(b, device);
      mpi.broadcast(b, p - 1)->wait();
      nccl.broadcast(gb, p - 1)->wait();
      check_same(gb, b, "broadcast");

      Tensor r = values(dt, n, me, 5), gr = to_cuda(r, device);
      mpi.reduce(r, 0, ReduceOp::max)->wait();
      nccl.reduce(gr, 0, ReduceOp::max)->wait();
      check_same(gr, r, "reduce");

      Tensor a_in = values(dt, n * p, me, 6), a_out = empty({n * p}, {.dtype = dt});
      Tensor g_a_in = to_cuda(a_in, device), g_a_out = to_cuda(a_out, device);
      mpi.all_to_all(a_in, a_out)->wait();
      nccl.all_to_all(g_a_in, g_a_out)->wait();
      check_same(g_a_out, a_out, "all_to_all");
    }
  }
  // A ring of sends and receives, batched so the order cannot deadlock.
  Tensor mine = values(DType::f32, 33, me, 7), from_prev = empty({33});
  Tensor g_mine = to_cuda(mine, device), g_from_prev = to_cuda(from_prev, device);
  nccl.batch_send_recv({{P2POp::Kind::send, g_mine, (me + 1) % p, 0},
                        {P2POp::Kind::recv, g_from_prev, (me + p - 1) % p, 0}})
      ->wait();
  check_same(g_from_prev, values(DType::f32, 33, (me + p - 1) % p, 7), "batch_send_recv");
  nccl.barrier()->wait();

  auto half = nccl.split(me % 2, me);
  RANK_CHECK(half != nullptr && half->size() == (p + 1 - me % 2) / 2, "nccl split");
  Tensor s = to_cuda(full({5}, 1.0), device);
  half->all_reduce(s)->wait();
  check_same(s, full({5}, double(half->size())), "split all_reduce");

  nccl.reset_stats();
  Tensor big = to_cuda(zeros({1024}), device);
  nccl.all_reduce(big)->wait();
  RANK_CHECK(nccl.stats()[CommKind::all_reduce].payload_bytes == 4096, "nccl byte counters");
}

// Collectives wait for the kernels that produced their inputs on the caller's current stream,
// not only on the legacy default stream: a fill queued on a side stream, then all-reduced at once.
void check_stream_order(NcclCommunicator& nccl, int device) {
  const int p = nccl.size(), me = nccl.rank();
  cuda::Stream side(device);
  cuda::StreamGuard guard(side);
  Tensor big = full({int64_t(1) << 24}, double(me + 1), {.device = cuda_device(device)});
  nccl.all_reduce(big)->wait();
  side.synchronize();
  Tensor got = to_cpu(big);
  const float want = float(p * (p + 1) / 2);
  for (int64_t i : {int64_t(0), int64_t(1) << 12, (int64_t(1) << 24) - 1})
    RANK_CHECK(got.data<float>()[i] == want, "all_reduce after a side-stream fill: element ", i,
               " is ", got.data<float>()[i], ", want ", want);
}

// RoutedCommunicator with its NCCL half: CPU tensors over MPI, CUDA tensors over NCCL, one
// counter for both; its split routes too.
void check_routed(const std::shared_ptr<Communicator>& world, NcclCommunicator& nccl, int device) {
  const int p = nccl.size(), me = nccl.rank();
  const std::shared_ptr<Communicator> device_half(&nccl, [](Communicator*) {});  // not owned
  RoutedCommunicator routed(world, device_half, "routed");
  RANK_CHECK(std::string(routed.backend()) == "mpi+nccl", "routed backend ", routed.backend());
  RANK_CHECK(routed.supports(DeviceType::cpu) && routed.supports(DeviceType::cuda) &&
                 routed.device() == cuda_device(device),
             "routed moves both, computes on ", routed.device().str());
  Tensor host = full({9}, double(me + 1)), gpu = to_cuda(full({9}, double(me + 2)), device);
  routed.all_reduce(host)->wait();
  routed.all_reduce(gpu)->wait();
  RANK_CHECK(host.data<float>()[8] == float(p * (p + 1) / 2), "routed all_reduce of a CPU tensor: ",
             host.data<float>()[8]);
  check_same(gpu, full({9}, double(p * (p + 3) / 2)), "routed all_reduce of a CUDA tensor");
  RANK_CHECK(routed.stats()[CommKind::all_reduce].calls == 2, "routed counts both calls");
  bool refused = false;
  try {
    routed.all_gather(full({2}, 1.0), to_cuda(zeros({2 * int64_t(p)}), device));
  } catch (const ValueError& e) {
    refused = std::strstr(e.what(), "on the same device type") != nullptr;
  }
  RANK_CHECK(refused, "a CPU input with a CUDA output is refused");
  refused = false;
  try {
    routed.batch_send_recv({{P2POp::Kind::send, full({2}, 1.0), (me + 1) % p, 0},
                            {P2POp::Kind::recv, to_cuda(zeros({2}), device), (me + p - 1) % p, 0}});
  } catch (const ValueError& e) {
    refused = std::strstr(e.what(), "every transfer of a batch on one device type") != nullptr;
  }
  RANK_CHECK(refused, "a batch of a CPU send and a CUDA receive is refused before it starts");

  const std::shared_ptr<Communicator> half = routed.split(me % 2, me, "routed_half");
  const auto* routed_half = dynamic_cast<const RoutedCommunicator*>(half.get());
  RANK_CHECK(routed_half != nullptr && routed_half->device_comm() != nullptr &&
                 std::string(routed_half->device_comm()->backend()) == "nccl",
             "the routed split has an NCCL half");
  Tensor s = to_cuda(full({5}, 1.0), device);
  half->all_reduce(s)->wait();
  check_same(s, full({5}, double(half->size())), "routed split all_reduce");
}

}  // namespace

int main(int argc, char** argv) {
  const int devices = NcclCommunicator::device_count();
  if (devices == 0) {
    std::printf("SKIPPED: no CUDA device (cudaGetDeviceCount reports none); NCCL tests need a GPU\n");
    return 0;
  }
  return run_distributed(argc, argv, [devices](const std::shared_ptr<Communicator>& world) {
    const int device = world->rank() % devices;
    NcclCommunicator nccl(*world, device, "world_nccl");
    run(*world, nccl, device);
    check_stream_order(nccl, device);
    check_routed(world, nccl, device);
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf("nccl: all checks passed on %d ranks (%lld checks on rank 0)\n", world->size(),
                  static_cast<long long>(testing::checks_passed()));
    }
    return 0;
  });
}
