// Where the trainer computes: train.device ("cpu", "cuda", "cuda:N") resolved to this rank's
// device, the communicator that reduces gradients living there (NCCL on CUDA, bootstrapped over
// the MPI data group), and the device's memory counters for the progress line.
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "models/train/device_spec.h"
#include "parallel/comm/communicator.h"

namespace tessera::train {

// Whether this process can train on CUDA, and why not ("" when it can). A build without the CUDA
// backend (--config=cpu) cannot.
bool cuda_usable();
std::string cuda_unavailable_reason();

// This rank's device: "cpu"; "cuda" is cuda:(local rank % device count), the local rank read from
// OMPI_COMM_WORLD_LOCAL_RANK (else SLURM_LOCALID, else world_rank); "cuda:N" is device N. A CUDA
// device is made current for the calling thread. Throws ValueError
// "[config] train.device cuda: <why no GPU is usable>", naming N when it is not a device here, and
// for "cuda" when the machine's ranks (OMPI_COMM_WORLD_LOCAL_SIZE) outnumber its GPUs.
Device resolve_train_device(const std::string& spec, int world_rank,
                            const DeviceSetting& where = {});

// The world a ParallelContext splits into its groups: `world` itself on the CPU or with one rank;
// on CUDA a RoutedCommunicator of `world` (for host tensors) and a new NCCL communicator over the
// same ranks (for device tensors), so every group the context splits from it moves both: the
// tensor groups' activations and the data group's gradients over NCCL, counts and flags over MPI
// (collective over world).
std::shared_ptr<parallel::Communicator> context_world(
    const std::shared_ptr<parallel::Communicator>& world, Device device);

// The communicator for gradients on `device`: `group` itself when it moves tensors of that device
// (the CPU, or a group of a context_world on CUDA); otherwise `group` routed with a new NCCL
// communicator over the same ranks, bootstrapped over it (collective over it), so host tensors
// (ZeRO's offloaded shards) still go over `group`.
std::shared_ptr<parallel::Communicator> gradient_group(
    const std::shared_ptr<parallel::Communicator>& group, Device device);

}  // namespace tessera::train
