// RoutedCommunicator on the CPU (its MPI half; the NCCL half is checked on GPUs by
// nccl_gpu_main.cc): every collective through it, its own byte counters, split into routed groups,
// and the pairs it refuses.
#include <memory>
#include <string>

#include "core/factory.h"
#include "parallel/comm/routed_communicator.h"
#include "tests/parallel/collective_checks.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::testing {

void run_routed_checks(const std::shared_ptr<Communicator>& world) {
  const int p = world->size(), me = world->rank();
  RoutedCommunicator routed(world, nullptr, "routed");
  RANK_CHECK(routed.name() == "routed" && routed.rank() == me && routed.size() == p, "routed ",
             routed.name(), " rank ", routed.rank(), " of ", routed.size());
  RANK_CHECK(std::string(routed.backend()) == "mpi", "backend ", routed.backend());
  RANK_CHECK(routed.supports(DeviceType::cpu) && !routed.supports(DeviceType::cuda),
             "a host-only routed communicator moves CPU tensors only");
  RANK_CHECK(routed.device() == kCPU, "device ", routed.device().str());

  // Every collective, dtype and reduce op forwarded to the host backend.
  run_collective_checks(routed);

  // The counters are the routed communicator's: the host's stay as they were.
  const CommStats host_before = world->stats();
  routed.reset_stats();
  Tensor t = full({256}, 1.0);
  routed.all_reduce(t)->wait();
  RANK_CHECK(t.data<float>()[255] == float(p),
             "all_reduce through the route: ", t.data<float>()[255]);
  RANK_CHECK(routed.stats()[CommKind::all_reduce].calls == 1 &&
                 routed.stats()[CommKind::all_reduce].payload_bytes == 1024,
             "routed counters: ", routed.stats()[CommKind::all_reduce].calls, " calls");
  RANK_CHECK(world->stats()[CommKind::all_reduce].calls == host_before[CommKind::all_reduce].calls,
             "the host's counters are untouched");

  // Split gives routed groups, as a ParallelContext over a routed world makes them.
  const std::shared_ptr<Communicator> half = routed.split(me % 2, me, "half");
  const auto* routed_half = dynamic_cast<const RoutedCommunicator*>(half.get());
  RANK_CHECK(routed_half != nullptr && routed_half->host() != nullptr &&
                 routed_half->device_comm() == nullptr,
             "split gives a routed group over the host's split");
  RANK_CHECK(
      half->name() == "half" && half->size() == (p + 1 - me % 2) / 2 && half->rank() == me / 2,
      "half: rank ", half->rank(), " of ", half->size());
  Tensor s = full({3}, 1.0);
  half->all_reduce(s)->wait();
  RANK_CHECK(s.data<float>()[0] == float(half->size()), "all_reduce over the half");
  const std::shared_ptr<Communicator> all_but_0 = routed.split(me == 0 ? -1 : 0, me);
  RANK_CHECK((all_but_0 == nullptr) == (me == 0), "a negative color joins no group");
  half->barrier()->wait();

  // A device half must sit on the host's ranks and move another device type.
  RANK_CHECK(contains(error_of([&] { RoutedCommunicator(world, world); }),
                      "expected the device communicator to move another device type"),
             "a second MPI communicator as the device half is refused");
  if (p > 1) {
    RANK_CHECK(contains(error_of([&] { RoutedCommunicator(world, half); }),
                        "expected the device communicator on the host's ranks"),
               "a device half of other ranks is refused");
  }
  RANK_CHECK(contains(error_of([&] { RoutedCommunicator(nullptr, nullptr); }),
                      "expected a host communicator"),
             "a null host is refused");
  routed.barrier()->wait();
}

}  // namespace tessera::parallel::testing
