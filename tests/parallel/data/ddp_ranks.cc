// Multi-rank program run by ddp_test.sh under mpirun on 1, 2 and 4 ranks: every data-parallel
// check on every rank, over the "data" group of a ParallelContext. Any failure aborts the job.
#include <cstdio>

#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "tests/parallel/data/ddp_check.h"
#include "tests/parallel/data/ddp_checks.h"

using namespace tessera::parallel;

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const std::shared_ptr<Communicator>& world) {
    ParallelConfig config;
    config.data = world->size();
    ParallelContext context(config, world);
    const std::shared_ptr<Communicator>& data = context.data_group();

    ddp_testing::check_broadcast(data);
    ddp_testing::check_training(data, *world, "sgd");
    ddp_testing::check_training(data, *world, "adamw");
    ddp_testing::check_accumulation(data);
    ddp_testing::check_overlap(data);
    ddp_testing::check_byte_counts(data);
    ddp_testing::check_unused_parameters(data);
    ddp_testing::check_errors(data);
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf("ddp: all checks passed on %d ranks (%lld checks on rank 0)\n", world->size(),
                  static_cast<long long>(ddp_testing::checks_passed()));
    }
    return 0;
  });
}
