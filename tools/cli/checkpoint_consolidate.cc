// `tessera checkpoint consolidate DIR OUT [--optimizer]`: one safetensors file of the full serial
// model from any checkpoint (a sharded one's pieces joined, or a serial one as it is), optionally
// with the optimizer state under its names, for tools that read one file.
#include <iostream>

#include "core/error.h"
#include "models/io/checkpoint.h"
#include "models/io/safetensors.h"
#include "models/train/train_state.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

const char* const kCheckpointConsolidateUsage =
    "usage: tessera checkpoint consolidate DIR OUT [--optimizer]\n"
    "  DIR           a checkpoint (step-N directory) or the directory holding them (the latest),\n"
    "                sharded or serial\n"
    "  OUT           the safetensors file to write: every tensor of the serial model under its\n"
    "                name and global shape (f32 masters), written atomically\n"
    "  --optimizer   the optimizer state too (a sharded checkpoint's under\n"
    "                optim/<state>/<parameter>; a serial one's as stored)\n";

int run_checkpoint_consolidate(const std::vector<std::string>& args) {
  try {
    std::string path, out;
    bool optimizer = false;
    for (const std::string& a : args) {
      if (a == "--help" || a == "-h") {
        std::cout << kCheckpointConsolidateUsage;
        return 0;
      } else if (a == "--optimizer") {
        optimizer = true;
      } else if (!a.empty() && a[0] != '-' && (path.empty() || out.empty())) {
        (path.empty() ? path : out) = a;
      } else {
        TS_FAIL("checkpoint consolidate", "unexpected argument '", a, "' (see --help)");
      }
    }
    TS_CHECK(!path.empty() && !out.empty(), "checkpoint consolidate",
             "expected a checkpoint DIR and an output file OUT (see --help)");
    const std::string dir = train::resolve_checkpoint_dir(path);
    io::CheckpointContents ck = io::load_checkpoint(dir, {.load_optimizer = optimizer});
    io::NamedTensors all = ck.model;
    all.insert(all.end(), ck.optimizer.begin(), ck.optimizer.end());
    uint64_t bytes = 0;
    for (const auto& [name, t] : all) bytes += uint64_t(t.numel()) * t.itemsize();
    io::save_safetensors(out, all,
                         {{"format", "tessera-consolidated"},
                          {"step", ck.state.value("step", nlohmann::json()).dump()},
                          {"source", dir}});
    std::cout << "wrote " << out << ": " << all.size() << " tensors (" << ck.model.size()
              << " of the model"
              << (optimizer ? str_cat(", ", ck.optimizer.size(), " of the optimizer") : "") << "), "
              << bytes << " bytes of tensor data, from " << dir << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessera checkpoint consolidate: " << train::error_text(e) << "\n";
    return 1;
  }
}

}  // namespace tessera::cli
