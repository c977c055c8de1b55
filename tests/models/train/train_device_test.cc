// train.device without a GPU: the key's syntax is checked when the config is read, optimizers
// without CUDA kernels are refused for a GPU, and asking for CUDA where none is usable ends the
// run with "[config] train.device cuda: <why>" before anything is built. (GPU runs:
// trainer_cuda_test.cc.)
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/factory.h"
#include "models/train/train_config.h"
#include "models/train/train_device.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/mpi_runtime.h"
#include "tests/models/train/train_test_util.h"
#include "tests/testing/temp_dir.h"

using namespace tessera;
using namespace tessera::train;
using namespace tessera::train::testing;
using nlohmann::json;

namespace {

std::string config_error(const json& j) {
  try {
    TrainConfig::from_json(j);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("train.device reads cpu, cuda and cuda:N and nothing else") {
  json j = tiny_gpt();
  CHECK(TrainConfig::from_json(j).train.device == "cpu");  // the default
  for (const char* spec : {"cpu", "cuda", "cuda:0", "cuda:3"}) {
    j["train"]["device"] = spec;
    CHECK(TrainConfig::from_json(j).train.device == spec);
  }
  for (const char* bad : {"gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda0", "",
                          "cuda:99999999999999999999"}) {
    INFO(bad);
    j["train"]["device"] = bad;
    CHECK_THAT(config_error(j),
               Catch::Contains("[config] train.device: expected \"cpu\", \"cuda\" or \"cuda:N\", "
                               "got \"" + std::string(bad) + "\""));
  }
  j["train"]["device"] = 0;
  CHECK_THAT(config_error(j), Catch::Contains("train.device: expected a string"));
  j = tiny_gpt();
  j["train"]["devcie"] = "cuda";
  CHECK_THAT(config_error(j), Catch::Contains("unknown key 'train.devcie'") &&
                                  Catch::Contains("device"));
}

TEST_CASE("--set train.device overrides like any key") {
  const tessera::testing::TempDir tmp;
  const std::string path = tmp.file("tessera_train_device_test.json");
  std::ofstream(path) << tiny_gpt().dump();
  CHECK(load_train_config(path, {"train.device=cuda:1"}).train.device == "cuda:1");
  CHECK_THAT(
      [&] {
        try {
          load_train_config(path, {"train.device=tpu"});
        } catch (const ValueError& e) {
          return std::string(e.what());
        }
        return std::string("no error");
      }(),
      Catch::Contains("tessera_train_device_test.json: train.device: expected") &&
          Catch::Contains("got \"tpu\""));
}

TEST_CASE("optimizers whose loops run on the CPU only are refused for a GPU") {
  json j = tiny_gpt();
  j["train"]["device"] = "cuda";
  for (const char* type : {"sgd", "lamb", "lars"}) {
    j["optimizer"] = {{"type", type}, {"lr", 0.1}};
    CHECK_THAT(config_error(j), Catch::Contains(std::string("[config] optimizer.type ") + type +
                                                ": its update loops run on the CPU only") &&
                                    Catch::Contains("use adam or adamw"));
  }
  j["optimizer"] = {{"type", "adam"}, {"lr", 0.1}};
  CHECK(TrainConfig::from_json(j).optimizer["type"] == "adam");
  j["train"]["device"] = "cpu";
  j["optimizer"] = {{"type", "sgd"}, {"lr", 0.1}};
  CHECK(TrainConfig::from_json(j).optimizer["type"] == "sgd");
}

TEST_CASE("the CPU resolves to the CPU and keeps its gradient communicator") {
  CHECK(resolve_train_device("cpu", 0) == kCPU);
  CHECK(resolve_train_device("cpu", 5) == kCPU);
  CHECK_THROWS_WITH(resolve_train_device("gpu", 0, {.op = "eval", .key = "--device"}),
                    Catch::Contains("[eval] --device: expected \"cpu\", \"cuda\" or \"cuda:N\""));
  CHECK(gradient_group(nullptr, kCPU) == nullptr);  // one process without MPI: no group

  // A real one-rank MPI group (a singleton MPI_Init: no mpirun), split from the world as the
  // trainer's data group is, so the branch for a present group runs. The only MpiRuntime of this
  // process: MPI cannot start twice. It makes every later message name rank 0; the other cases
  // here expect the single process's messages, so the setting is restored after it.
  struct RestoreErrorRank {
    int rank = error_rank();
    ~RestoreErrorRank() { set_error_rank(rank); }
  } restore_error_rank;
  parallel::MpiRuntime mpi;
  REQUIRE(mpi.size() == 1);
  const std::shared_ptr<parallel::Communicator> data = mpi.world()->split(0, 0, "data");
  REQUIRE(data != nullptr);
  const std::shared_ptr<parallel::Communicator> grads = gradient_group(data, kCPU);
  CHECK(grads.get() == data.get());  // the very group, neither a new communicator nor null
  CHECK(grads.get() != mpi.world().get());
  CHECK(grads->name() == "data");
  // Gradients reduce through it: an average over the one rank keeps the values.
  Tensor g = full({3}, 1.5);
  grads->all_reduce(g, parallel::ReduceOp::avg)->wait();
  CHECK(g.data<float>()[2] == 1.5f);
  CHECK(data->stats()[parallel::CommKind::all_reduce].calls == 1);

  if (cuda_usable()) {  // on a GPU: the group routed with a new NCCL communicator of its ranks
    const std::shared_ptr<parallel::Communicator> nccl = gradient_group(data, cuda_device(0));
    REQUIRE(nccl != nullptr);
    CHECK(nccl.get() != data.get());
    CHECK(std::string(nccl->backend()) == "mpi+nccl");
    CHECK(nccl->supports(DeviceType::cpu));
    CHECK(nccl->supports(DeviceType::cuda));
    CHECK(nccl->device() == cuda_device(0));
    CHECK(nccl->size() == 1);
    CHECK(gradient_group(nccl, cuda_device(0)).get() == nccl.get());  // it moves both already
  }
  // A group that moves the device's tensors already is kept, on the CPU too.
  CHECK(context_world(data, kCPU).get() == data.get());
  CHECK(context_world(nullptr, kCPU) == nullptr);
}

TEST_CASE("without a usable GPU, train.device cuda is a clear error naming the reason") {
  if (cuda_usable()) {
    WARN("skipped: a GPU is usable here (trainer_cuda_test.cc trains on it)");
    return;
  }
  const std::string reason = cuda_unavailable_reason();
  REQUIRE_FALSE(reason.empty());
  CHECK_THROWS_WITH(resolve_train_device("cuda", 0),
                    Catch::Contains("[config] train.device cuda: " + reason));
  CHECK_THROWS_WITH(resolve_train_device("cuda:0", 3, {.op = "generate", .key = "--device"}),
                    Catch::Contains("[generate] --device cuda:0: " + reason));
  const std::string dir = fresh_dir("no_gpu");
  for (const char* spec : {"cuda", "cuda:1"}) {
    json j = tiny_gpt();
    j["train"]["device"] = spec;
    j["checkpoint"] = {{"dir", dir}};
    CHECK(error_of(j) == "[config] train.device " + std::string(spec) + ": " + reason);
    CHECK_FALSE(std::filesystem::exists(dir));  // it failed before training anything
  }
}
