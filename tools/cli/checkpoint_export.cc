// `tessera checkpoint export DIR OUT --format hf`: a GPT checkpoint as a Hugging Face GPT-2
// directory (model.safetensors in GPT2LMHeadModel's layout, config.json), so transformers'
// GPT2LMHeadModel.from_pretrained(OUT) loads what Tessera trained, whatever layout it trained in
// (checkpoints hold the serial model).
#include <iostream>

#include "core/error.h"
#include "models/hf/export_hf.h"
#include "models/io/checkpoint.h"
#include "models/train/train_state.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

const char* const kCheckpointExportUsage =
    "usage: tessera checkpoint export DIR OUT --format hf\n"
    "  DIR           a checkpoint (step-N directory) or the directory holding them (the latest)\n"
    "  OUT           a new directory: model.safetensors in Hugging Face's GPT-2 layout and its\n"
    "                config.json (GPT2LMHeadModel.from_pretrained(OUT) loads it)\n"
    "  --format hf   the only format for now; GPT checkpoints only (BERT and ViT: not yet)\n";

int run_checkpoint_export(const std::vector<std::string>& args) {
  try {
    std::string path, out, format;
    ArgReader r(args, "checkpoint export");
    while (r.next()) {
      if (r.help()) {
        std::cout << kCheckpointExportUsage;
        return 0;
      } else if (r.name() == "--format") {
        format = r.value();
      } else if (!r.name().empty() && r.name()[0] != '-' && (path.empty() || out.empty())) {
        (path.empty() ? path : out) = r.name();
      } else {
        r.unknown();
      }
    }
    TS_CHECK(!path.empty() && !out.empty(), "checkpoint export",
             "expected a checkpoint DIR and an output directory OUT (see --help)");
    TS_CHECK(format == "hf", "checkpoint export", "expected --format hf, got ",
             format.empty() ? std::string("none") : "'" + format + "'");
    const std::string dir = train::resolve_checkpoint_dir(path);
    io::CheckpointContents ck = io::load_checkpoint(dir, {.load_optimizer = false});
    const train::TrainConfig config = train::checkpoint_config(ck.state, dir);
    TS_CHECK(config.kind == train::ModelKind::gpt, "checkpoint export", dir,
             ": expected a GPT checkpoint (--format hf exports GPT-2 in this version), got a ",
             train::model_kind_name(config.kind), " model");
    hf::export_hf_gpt2(ck.model, config.gpt, out);
    std::cout << "exported " << dir << " (step " << ck.state.value("step", int64_t(0))
              << ") to " << out << ": model.safetensors in Hugging Face's GPT-2 layout and "
              << "config.json\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessera checkpoint export: " << train::error_text(e) << "\n";
    return 1;
  }
}

}  // namespace tessera::cli
