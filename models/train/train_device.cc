// train.device resolution, the context's world and the gradient communicator (see
// train_device.h). The CUDA parts compile only with the CUDA backend (TESSERA_CUDA); without it
// "cuda" is a clear error.
#include "models/train/train_device.h"

#include <cstdlib>
#include <initializer_list>

#include "core/error.h"
#include "parallel/comm/routed_communicator.h"

#ifdef TESSERA_CUDA
#include "core/cuda/runtime.h"
#include "parallel/comm/nccl_communicator.h"
#endif

namespace tessera::train {

bool cuda_usable() {
#ifdef TESSERA_CUDA
  return cuda::is_available();
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef TESSERA_CUDA
  return cuda::unavailable_reason();
#else
  return "this build has no CUDA backend (built with --config=cpu)";
#endif
}

#ifdef TESSERA_CUDA
namespace {

// The first of the variables that holds a non-negative integer, else `fallback`.
int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    if (const char* v = std::getenv(name)) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && r >= 0) return int(r);
    }
  }
  return fallback;
}

}  // namespace
#endif

Device resolve_train_device(const std::string& spec, int world_rank, const DeviceSetting& where) {
  check_device_spec(spec, where);
  const Device parsed = parse_device(spec);
  if (parsed.is_cpu()) return kCPU;
  TS_CHECK(cuda_usable(), where.op, where.key, " ", spec, ": ", cuda_unavailable_reason());
#ifdef TESSERA_CUDA
  const int count = cuda::device_count();
  if (spec == "cuda") {
    // NCCL cannot put two ranks of one communicator on the same GPU.
    const int local_size = env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}, 1);
    TS_CHECK(local_size <= count, where.op, where.key, " ", spec, ": ", local_size,
             " ranks on this machine would share its ", count,
             " GPU(s); start at most one rank per GPU");
  }
  const int index = spec == "cuda"
                        ? env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, world_rank) % count
                        : parsed.index;
  TS_CHECK(index < count, where.op, where.key, " ", spec, ": expected a device index below ",
           count, " (the CUDA devices of this machine), got ", index);
  cuda::set_device(index);
  return cuda_device(index);
#else
  return kCPU;  // unreachable: cuda_usable() is false without the backend
#endif
}

namespace {

// `host` and a new NCCL communicator over its ranks, as one (collective over host).
std::shared_ptr<parallel::Communicator> with_device_half(
    const std::shared_ptr<parallel::Communicator>& host, Device device) {
#ifdef TESSERA_CUDA
  return std::make_shared<parallel::RoutedCommunicator>(
      host, std::make_shared<parallel::NcclCommunicator>(*host, device.index, host->name()));
#else
  TS_FAIL("train", "expected the CPU without the CUDA backend, got ", device.str());
#endif
}

}  // namespace

std::shared_ptr<parallel::Communicator> context_world(
    const std::shared_ptr<parallel::Communicator>& world, Device device) {
  if (device.is_cpu() || !world || world->size() == 1) return world;
  return with_device_half(world, device);
}

std::shared_ptr<parallel::Communicator> gradient_group(
    const std::shared_ptr<parallel::Communicator>& group, Device device) {
  if (!group || group->supports(device.type)) return group;
  return with_device_half(group, device);
}

}  // namespace tessera::train
