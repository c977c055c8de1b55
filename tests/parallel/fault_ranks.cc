// Multi-rank program run by fault_test.sh: each scenario (argv[1]) breaks one rank in one way; the
// script asserts that the whole job ends non-zero, quickly, with a message naming the rank.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/factory.h"
#include "parallel/comm/agreed.h"
#include "parallel/comm/config_check.h"
#include "parallel/comm/mpi_runtime.h"

using namespace tessera;
using namespace tessera::parallel;

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  return run_distributed(argc, argv, [&](const std::shared_ptr<Communicator>& world) {
    const int me = world->rank();
    const int victim = world->size() - 1;
    world->barrier()->wait();
    Tensor t = full({64}, 1.0);
    if (scenario == "throw") {
      // The victim fails; the others are already inside a collective that can never complete.
      if (me == victim) TS_FAIL("fault_test", "deliberate failure");
      world->all_reduce(t)->wait();
    } else if (scenario == "exit_early") {
      // The victim returns normally (finalising MPI) while the others still expect it.
      if (me == victim) return 0;
      world->all_reduce(t)->wait();
    } else if (scenario == "exit_abrupt") {
      // The victim's process ends without finalising, as a crash would.
      if (me == victim) std::_Exit(3);
      world->all_reduce(t)->wait();
    } else if (scenario == "hang") {
      // The victim never arrives; the others' timeout must end the job.
      if (me == victim) std::this_thread::sleep_for(std::chrono::seconds(120));
      world->all_reduce(t)->wait();
    } else if (scenario == "recv_timeout") {
      // A receive whose sender never sends.
      if (me == 0) world->recv(t, victim, 5)->wait();
      std::this_thread::sleep_for(std::chrono::seconds(120));
    } else if (scenario == "agreed" || scenario == "agreed_caught") {
      // The victim fails inside agreed work; every rank throws its message at the same point.
      try {
        run_agreed(world.get(), [&] {
          if (me == victim) TS_FAIL("fault_test", "deliberate failure");
        });
      } catch (const std::exception& e) {
        if (scenario == "agreed") throw;
        // Caught on every rank: each holds the victim's message, and none is left in a collective.
        const std::string want = str_cat("rank ", victim, ": [fault_test] deliberate failure");
        if (std::string(e.what()) != want)
          TS_FAIL("fault_test", "expected '", want, "' on every rank, got '", e.what(), "'");
        world->all_reduce(t)->wait();
        world->barrier()->wait();
        if (me == 0)
          std::printf("fault scenario %s: every rank caught the failure\n", scenario.c_str());
        return 0;
      }
      TS_FAIL("fault_test", "expected run_agreed to throw on rank ", me);
    } else if (scenario == "config") {
      std::string text = R"({"parallel": {"data": 2}})";
      if (me == victim) text = R"({"parallel": {"data": 4}})";
      check_same_config(*world, text);
    } else {
      TS_FAIL("fault_test", "unknown scenario '", scenario, "'");
    }
    world->barrier()->wait();
    if (me == 0) std::printf("fault scenario %s: no fault seen\n", scenario.c_str());
    return 0;
  });
}
