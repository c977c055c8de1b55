// `tessera checkpoint export DIR OUT --format hf`: a GPT, BERT or ViT checkpoint as a Hugging Face
// directory (model.safetensors in GPT2LMHeadModel's / BertForMaskedLM's /
// ViTForImageClassification's layout, config.json), so transformers' from_pretrained(OUT) loads
// what Tessera trained, whatever layout it trained in (checkpoints hold the serial model).
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
    "  OUT           a new directory: model.safetensors in Hugging Face's layout and its\n"
    "                config.json (GPT: GPT-2, GPT2LMHeadModel; BERT: BertForMaskedLM and/or\n"
    "                BertForSequenceClassification, or BertModel; ViT: ViTForImageClassification)\n"
    "  --format hf   the only format for now\n";

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
    const char* layout = "GPT-2";
    switch (config.kind) {
      case train::ModelKind::gpt:
        hf::export_hf_gpt2(ck.model, config.gpt, out);
        break;
      case train::ModelKind::bert:
        hf::export_hf_bert(ck.model, config.bert, out);
        layout = "BERT";
        break;
      case train::ModelKind::vit:
        hf::export_hf_vit(ck.model, config.vit, out);
        layout = "ViT";
        break;
      default:  // a user's own model (the C++ API): Hugging Face has no layout for it
        TS_FAIL("checkpoint export", dir, ": expected a GPT, BERT or ViT checkpoint, got a ",
                train::model_kind_name(config.kind), " model");
    }
    std::cout << "exported " << dir << " (step " << ck.state.value("step", int64_t(0)) << ") to "
              << out << ": model.safetensors in Hugging Face's " << layout
              << " layout and config.json\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessera checkpoint export: " << train::error_text(e) << "\n";
    return 1;
  }
}

}  // namespace tessera::cli
