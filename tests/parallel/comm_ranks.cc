// Multi-rank program run by comm_test.sh under mpirun on 1, 2, 4 and 8 ranks: every collective
// and communicator feature, checked on every rank. Any failure aborts the job non-zero.
#include <cstdio>

#include "parallel/comm/mpi_runtime.h"
#include "tests/parallel/collective_checks.h"
#include "tests/parallel/rank_check.h"

using namespace tessera::parallel;

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const std::shared_ptr<Communicator>& world) {
    testing::run_collective_checks(*world);
    testing::run_feature_checks(*world);
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf("comm: all checks passed on %d ranks (%lld checks on rank 0)\n", world->size(),
                  static_cast<long long>(testing::checks_passed()));
    }
    return 0;
  });
}
