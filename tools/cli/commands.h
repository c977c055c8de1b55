// The `tessera` subcommands, each taking the arguments after its name and returning the exit code.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

// `train --config FILE [--set key=value ...]`: runs under MPI (mpirun -np N, or one process).
// argc/argv are the whole command line (MPI_Init may read it).
int run_train(int argc, char** argv, const std::vector<std::string>& args);
// `eval --checkpoint DIR --data FILE [--batch-size B] [--max-batches N]`
int run_eval(const std::vector<std::string>& args);
// `generate --checkpoint DIR [--prompt TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]
// [--seed S] [--tokenizer byte|gpt2 --vocab FILE --merges FILE]`
int run_generate(const std::vector<std::string>& args);
// `checkpoint inspect DIR`: step, layout, tensors, bytes; checksums verified (exit 1 on damage).
int run_checkpoint_inspect(const std::vector<std::string>& args);
// `checkpoint export DIR OUT --format hf`: a GPT checkpoint as a Hugging Face GPT-2 directory.
int run_checkpoint_export(const std::vector<std::string>& args);
// `checkpoint consolidate DIR OUT [--optimizer]`: one safetensors file of the full serial model.
int run_checkpoint_consolidate(const std::vector<std::string>& args);
// `plan --config FILE --world N [--cluster C] [--nodes M] [--json] [--search [--top K]
// [--write-config OUT]]`: the planner (models/plan) on a config's layout or over every layout.
int run_plan(int argc, char** argv, const std::vector<std::string>& args);
// `plan calibrate [--out FILE] [--quick]`: measures this host into a cluster profile (under
// mpirun -np N for the collectives of groups up to N ranks).
int run_plan_calibrate(int argc, char** argv, const std::vector<std::string>& args);
// `plan validate --config FILE --world N [--layouts K]`: trains the planner's top layouts and a
// seeded sample of the rest for a few steps each (mpirun from `self`, this binary's path) and
// prints predicted against measured step time and peak memory.
int run_plan_validate(const std::string& self, const std::vector<std::string>& args);

extern const char* const kTrainUsage;
extern const char* const kEvalUsage;
extern const char* const kGenerateUsage;
extern const char* const kCheckpointInspectUsage;

// The options every `plan` subcommand reads to name the job: --config, --world, --cluster, --set.
struct PlanJob {
  std::string config;
  int world = 0;
  std::string cluster = "host";
  std::vector<std::string> sets;
};

// Reads "--name value" pairs; flags without a value are errors. Throws ValueError naming the
// argument for a missing value or an unknown name.
struct ArgReader {
  ArgReader(const std::vector<std::string>& args, const char* command);
  // Consumes the next argument; false at the end. name() and value() describe it.
  bool next();
  const std::string& name() const { return name_; }
  const std::string& value();
  bool help() const { return name_ == "--help" || name_ == "-h"; }
  [[noreturn]] void unknown() const;
  static long long to_int(const std::string& flag, const std::string& text);
  // Consumes the current argument into `job` when it is one of PlanJob's; false otherwise.
  bool plan_job(PlanJob& job);
  // Throws naming `command` unless --config and a --world of at least 1 rank were given.
  static void check_plan_job(const PlanJob& job, const char* command);
  static double to_double(const std::string& flag, const std::string& text);

 private:
  const std::vector<std::string>& args_;
  const char* command_;
  size_t i_ = 0;
  std::string name_, value_;
  bool value_taken_ = false;
};

}  // namespace tessera::cli
