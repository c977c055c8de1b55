// `tessera train`: reads the configuration (with --set overrides) on every rank and runs the
// trainer under MPI; a mistake every rank makes is reported once, by rank 0.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/error.h"
#include "models/gpt/gpt_config.h"
#include "models/train/trainer.h"
#include "parallel/comm/mpi_runtime.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

const char* const kTrainUsage =
    "usage: tessera train --config FILE [--set key=value ...]\n"
    "       mpirun -np N tessera train --config FILE ...   (data parallel over N ranks)\n"
    "  --config FILE      JSON configuration: model, parallel, zero, precision, optimizer, "
    "schedule,\n"
    "                     train, data, checkpoint, logging (see tools/configs/*.json)\n"
    "  --set KEY=VALUE    override one key, e.g. --set train.steps=50 --set optimizer.lr=3e-4\n"
    "                     (--set train.device=cuda trains on the GPUs: rank r on GPU r % count)\n";

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  bool help = false;
};

TrainArgs parse(const std::vector<std::string>& args) {
  TrainArgs a;
  ArgReader r(args, "train");
  while (r.next()) {
    if (r.help())
      a.help = true;
    else if (r.name() == "--config")
      a.config = r.value();
    else if (r.name() == "--set")
      a.sets.push_back(r.value());
    else if (r.name().rfind("--set=", 0) == 0)
      a.sets.push_back(r.name().substr(6));
    else if (r.name().rfind("--config=", 0) == 0)
      a.config = r.name().substr(9);
    else
      r.unknown();
  }
  TS_CHECK(a.help || !a.config.empty(), "train", "expected --config FILE (see --help)");
  return a;
}

// TESSERA_PROGRESS=live redraws one progress line in place, =lines prints a line every
// logging.log_every steps. By default: live on a terminal, except under mpirun, which hands every
// rank a pseudo-terminal even when the job's output goes to a file.
bool live_progress() {
  const char* mode = std::getenv("TESSERA_PROGRESS");
  if (mode && std::string(mode) == "live") return true;
  if (mode && std::string(mode) == "lines") return false;
  return isatty(1) && !std::getenv("OMPI_COMM_WORLD_SIZE");
}

// Building a model this large takes long enough (seconds to minutes on the CPU) to look like a
// hang, so rank 0 says what it builds first. Only GPT has a parameter count without building;
// the BERT and ViT presets are far below the threshold.
constexpr int64_t kAnnounceParameters = 300'000'000;

void announce_large_model(const train::TrainConfig& config, std::ostream& out) {
  if (config.kind != train::ModelKind::gpt) return;
  const int64_t n = gpt::gpt_num_parameters(config.gpt);
  if (n < kAnnounceParameters) return;
  const nlohmann::json& model = config.source.value("model", nlohmann::json::object());
  const std::string name = model.contains("preset") && model.at("preset").is_string()
                               ? model.at("preset").get<std::string>()
                               : std::string("a gpt model");
  char count[32];
  if (n >= 1'000'000'000)
    std::snprintf(count, sizeof count, "%.1fB", double(n) / 1e9);
  else
    std::snprintf(count, sizeof count, "%.0fM", double(n) / 1e6);
  out << "building " << name << " (" << count << " parameters)..." << std::endl;
}

}  // namespace

int run_train(int argc, char** argv, const std::vector<std::string>& args) {
  return parallel::run_distributed(
      argc, argv, [&](const std::shared_ptr<parallel::Communicator>& world) {
        TrainArgs a;
        train::TrainConfig config;
        train::run_agreed(world.get(), [&] {
          a = parse(args);
          if (!a.help) config = train::load_train_config(a.config, a.sets);
        });
        if (a.help) {
          if (world->rank() == 0) std::cout << kTrainUsage;
          return 0;
        }
        const bool rank0 = world->rank() == 0;
        if (rank0) announce_large_model(config, std::cout);
        train::run_training(config, world,
                            {.out = rank0 ? &std::cout : nullptr,
                             .live = rank0 && live_progress(),
                             .handle_signals = true});
        return 0;
      });
}

}  // namespace tessera::cli
