// `tessera`: the command-line entry point. train / eval / generate run here; `data prepare` calls
// the data tools' front end; `bench` hands over to the benchmark binary built beside this one.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "tools/cli/commands.h"
#include "tools/data/prepare_cli.h"

namespace {

constexpr const char* kUsage =
    "usage: tessera <command> [options]   (tessera <command> --help for its options)\n"
    "  train --config FILE [--set key=value ...]   train GPT, BERT or ViT; mpirun -np N for N "
    "ranks\n"
    "  eval --checkpoint DIR --data FILE           loss and perplexity of a GPT checkpoint on a "
    "token file\n"
    "  generate --checkpoint DIR --prompt TEXT     continue a prompt with a GPT checkpoint\n"
    "  data prepare --input a.txt --output a.tok   text files -> token files\n"
    "  checkpoint inspect DIR                      a checkpoint's step, layout, tensors and bytes;\n"
    "                                              checksums verified\n"
    "  checkpoint export DIR OUT --format hf       a checkpoint as a Hugging Face directory\n"
    "  checkpoint consolidate DIR OUT [--optimizer] one safetensors file of the serial model\n"
    "  plan --config FILE --world N [--search]    predict a layout's step time and memory per rank,\n"
    "                                              or search every layout for the fastest that fits\n"
    "                                              (plan --help; plan calibrate; plan validate)\n"
    "  bench kernels|train|comm|tp|zero|pp|cuda    benchmarks: kernels and the GPT-2 training step\n"
    "                                              beside PyTorch; comm (mpirun -np N) collectives\n"
    "                                              and data-parallel scaling; tp (mpirun -np N)\n"
    "                                              tensor-parallel bytes, memory and time per mode;\n"
    "                                              pp (mpirun -np P) pipeline schedules' bubble;\n"
    "                                              cuda: GEMM, attention and the GPT-2 step on a GPU\n"
    "                                              (bench --help)\n";

constexpr const char* kDataUsage =
    "usage: tessera data <subcommand> [options]   (tessera data <subcommand> --help for its "
    "options)\n"
    "  prepare --input a.txt [b.txt ...] --output a.tok --tokenizer byte|gpt2\n"
    "                                              text files -> a token file (and a validation\n"
    "                                              file with --val-fraction F)\n";

int run_data(const std::vector<std::string>& rest) {
  if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h" || rest[0] == "help")) {
    std::cout << kDataUsage;
    return 0;
  }
  if (rest.empty() || rest[0] != "prepare") {
    std::cerr << "tessera data: expected the subcommand 'prepare', got "
              << (rest.empty() ? std::string("none") : "'" + rest[0] + "'") << "\n"
              << kDataUsage;
    return 2;
  }
  return tessera::tools::run_prepare_command({rest.begin() + 1, rest.end()}, std::cout, std::cerr);
}

constexpr const char* kCheckpointUsage =
    "usage: tessera checkpoint <subcommand> [options]   (tessera checkpoint <subcommand> --help)\n"
    "  inspect DIR   step, layout, tensors (dtype, global shape, bytes), checksums verified\n"
    "  export DIR OUT --format hf   a GPT, BERT or ViT checkpoint as a Hugging Face directory\n"
    "  consolidate DIR OUT [--optimizer]   one safetensors file of the full serial model\n";

int run_checkpoint(const std::vector<std::string>& rest) {
  if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h" || rest[0] == "help")) {
    std::cout << kCheckpointUsage;
    return 0;
  }
  if (!rest.empty() && rest[0] == "inspect")
    return tessera::cli::run_checkpoint_inspect({rest.begin() + 1, rest.end()});
  if (!rest.empty() && rest[0] == "export")
    return tessera::cli::run_checkpoint_export({rest.begin() + 1, rest.end()});
  if (!rest.empty() && rest[0] == "consolidate")
    return tessera::cli::run_checkpoint_consolidate({rest.begin() + 1, rest.end()});
  std::cerr << "tessera checkpoint: expected the subcommand 'inspect', 'export' or 'consolidate', got "
            << (rest.empty() ? std::string("none") : "'" + rest[0] + "'") << "\n"
            << kCheckpointUsage;
  return 2;
}

// The benchmark binary: bazel-bin/tools/bench/bench next to bazel-bin/tools/cli/tessera, or in
// this binary's runfiles.
std::string find_bench() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p :
       {self.parent_path().parent_path() / "bench" / "bench",
        fs::path(self.string() + ".runfiles") / "tessera" / "tools" / "bench" / "bench"}) {
    if (fs::exists(p)) return p.string();
  }
  return "";
}

int run_bench(char** argv, int first) {
  const std::string bench = find_bench();
  if (bench.empty()) {
    std::cerr << "tessera bench: the benchmark binary is not built; run "
                 "`bazel build //tools/bench:bench` (it is found next to tessera)\n";
    return 1;
  }
  std::vector<char*> args{const_cast<char*>(bench.c_str())};
  for (int i = first; argv[i]; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(bench.c_str(), args.data());
  std::cerr << "tessera bench: cannot run " << bench << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    tessera::env_num_threads();  // a bad TESSERA_NUM_THREADS stops every command up front
  } catch (const std::exception& e) {
    std::cerr << "tessera " << command << ": " << e.what() << "\n";
    return 2;
  }
  if (command == "train") return run_train(argc, argv, rest);
  if (command == "eval") return run_eval(rest);
  if (command == "generate") return run_generate(rest);
  if (command == "bench") return run_bench(argv, 2);
  if (command == "plan") return run_plan(argc, argv, rest);
  if (command == "data") return run_data(rest);
  if (command == "checkpoint") return run_checkpoint(rest);
  std::cerr << "tessera: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
