// `tessera eval` and `tessera generate`: load a GPT checkpoint written by `tessera train` (its
// stored configuration rebuilds the model) and score a token file or continue a prompt, on the
// CPU or a GPU (--device; the checkpoint is read on the CPU and the model moved there).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/data/token_dataset.h"
#include "models/data/tokenizer.h"
#include "models/gpt/gpt.h"
#include "models/hf/export_hf.h"
#include "models/hf/load_hf.h"
#include "models/io/atomic_file.h"
#include "models/train/progress.h"
#include "models/train/train_device.h"
#include "models/train/train_state.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

const char* const kEvalUsage =
    "usage: tessera eval --checkpoint DIR | --hf DIR --data FILE [--data-format tessera|llmc|u16]\n"
    "                    [--batch-size B] [--max-batches N] [--device cpu|cuda|cuda:N]\n"
    "  --checkpoint DIR   a checkpoint (step-N directory) or the directory holding them (latest)\n"
    "  --hf DIR           instead: a Hugging Face GPT-2 directory (config.json, model.safetensors;\n"
    "                     what tessera checkpoint export writes), scored in windows of its context\n"
    "  --data FILE        token file (tessera data prepare); scored in consecutive windows of the\n"
    "                     model's training length\n"
    "  --data-format F    the file's layout: tessera (tessera data prepare), llmc (llm.c's .bin)\n"
    "                     or u16 (nanoGPT's raw u16 ids); default: detected from the file's magic\n"
    "                     (tessera or llmc; a u16 file has none, so it needs the flag). llmc and\n"
    "                     u16 ids are checked against the model's vocabulary\n"
    "  --batch-size B     windows per forward (default 8)\n"
    "  --max-batches N    stop after N >= 1 batches (default: the whole file)\n"
    "  --device D         where the model runs: cpu (default), cuda or cuda:N\n"
    "  A pass longer than a few seconds shows its progress on stderr (TESSERA_PROGRESS=lines or\n"
    "  live: from the first batch).\n";

const char* const kGenerateUsage =
    "usage: tessera generate --checkpoint DIR | --hf DIR [--prompt TEXT] [--max-new-tokens N]\n"
    "                        [--temperature T] [--top-k K] [--seed S]\n"
    "                        [--tokenizer byte|gpt2 --vocab vocab.json --merges merges.txt]\n"
    "                        [--device cpu|cuda|cuda:N]\n"
    "  defaults: the training config's sample prompt, 200 tokens, temperature 0.8, top-k 0 (all),\n"
    "  seed 0, and the tokenizer named in the training config's data section\n";

namespace {

struct LoadedGpt {
  train::TrainConfig config;
  std::unique_ptr<gpt::GPT> model;
  std::string dir;
};

// The --device flag's device for `command` (cuda: device 0 unless cuda:N).
Device cli_device(const std::string& spec, const char* command) {
  return train::resolve_train_device(spec, 0, {.op = command, .key = "--device"});
}

// A Hugging Face GPT-2 directory (config.json, model.safetensors): the model its config
// describes with its weights; the rest of the configuration at its defaults (the byte tokenizer
// unless --tokenizer says otherwise, windows of the model's context length).
LoadedGpt load_hf_dir(const std::string& dir, Device device) {
  LoadedGpt g;
  g.dir = dir;
  const std::string config_path = dir + "/config.json";
  nlohmann::json hf_config;
  try {
    hf_config = nlohmann::json::parse(io::read_file(config_path, "hf"));
  } catch (const nlohmann::json::exception& e) {
    TS_FAIL("hf", config_path, ": not valid JSON: ", e.what());
  }
  g.config.kind = train::ModelKind::gpt;
  g.config.gpt = hf::gpt_config_from_hf(hf_config, config_path);
  Generator gen(0);
  g.model = std::make_unique<gpt::GPT>(g.config.gpt, gen);
  hf::load_hf_gpt2(*g.model, dir + "/model.safetensors");
  g.model->to(device);
  g.model->eval();
  return g;
}

// Reads the checkpoint on the CPU, then moves the model to `device`.
LoadedGpt load_gpt(const std::string& path, Device device) {
  LoadedGpt g;
  g.dir = train::resolve_checkpoint_dir(path);
  // The weights and the state only: eval and generate never read optimizer.safetensors.
  io::CheckpointContents ck = io::load_checkpoint(g.dir, {.load_optimizer = false});
  g.config = train::checkpoint_config(ck.state, g.dir);
  TS_CHECK(g.config.kind == train::ModelKind::gpt, "checkpoint", g.dir,
           ": expected a GPT checkpoint, got a ", train::model_kind_name(g.config.kind), " model");
  Generator gen(0);
  g.model = std::make_unique<gpt::GPT>(g.config.gpt, gen);
  train::load_model_tensors(*g.model, nullptr, ck.model, g.dir);
  g.model->to(device);
  g.model->eval();
  return g;
}

// eval's progress on stderr once a pass runs long enough to wonder about: nothing for the first
// kQuietSeconds, then "eval 120/400 batches | 35.2k tok/s | ETA 8s", redrawn in place on a terminal
// and otherwise printed every kLineSeconds, the last batch always. TESSERA_PROGRESS=lines or live
// (as for train) shows it from the first batch.
class EvalProgress {
 public:
  static constexpr double kQuietSeconds = 3.0, kLineSeconds = 5.0, kLiveSeconds = 0.2;

  explicit EvalProgress(int64_t total_batches) : total_(total_batches) {
    const char* env = std::getenv("TESSERA_PROGRESS");
    const std::string mode = env ? env : "";
    live_ = mode == "live" || (mode != "lines" && isatty(2));
    quiet_s_ = mode == "live" || mode == "lines" ? 0.0 : kQuietSeconds;
  }
  ~EvalProgress() { finish(); }
  // Ends a live line, so what follows starts a line of its own.
  void finish() {
    if (live_ && shown_) std::cerr << "\n" << std::flush;
    live_ = false;
  }

  void update(int64_t done, double tokens) {
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    if (t < quiet_s_) return;
    if (shown_ && done < total_ && t - last_s_ < (live_ ? kLiveSeconds : kLineSeconds)) return;
    shown_ = true;
    last_s_ = t;
    const double eta = done > 0 ? t * double(total_ - done) / double(done) : -1.0;
    std::cerr << (live_ ? "\r" : "") << "eval " << done << "/" << total_ << " batches | "
              << train::Progress::format_rate(t > 0 ? tokens / t : 0.0) << " tok/s | ETA "
              << train::Progress::format_duration(eta) << (live_ ? "   " : "\n") << std::flush;
  }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t total_;
  Clock::time_point start_ = Clock::now();
  bool live_ = false, shown_ = false;
  double quiet_s_ = kQuietSeconds, last_s_ = 0.0;
};

// --data-format, or the format the file's magic announces.
data::TokenFormat eval_data_format(const std::string& path, const std::string& flag) {
  if (!flag.empty()) return data::parse_token_format(flag, "--data-format");
  const std::optional<data::TokenFormat> found = data::detect_token_format(path);
  TS_CHECK(found.has_value(), "eval", path,
           ": expected a token file starting with Tessera's magic TSRATOK1 or llm.c's 20240520, ",
           "got neither; for raw u16 ids (nanoGPT's train.bin) pass --data-format u16");
  return *found;
}

int report_error(const char* command, const std::exception& e) {
  std::cerr << "tessera " << command << ": " << train::error_text(e) << "\n";
  return 1;
}

}  // namespace

int run_eval(const std::vector<std::string>& args) {
  try {
    std::string checkpoint, hf_dir, data_path, data_format, device = "cpu";
    long long batch = 8, max_batches = -1;
    ArgReader r(args, "eval");
    while (r.next()) {
      if (r.help()) {
        std::cout << kEvalUsage;
        return 0;
      } else if (r.name() == "--checkpoint")
        checkpoint = r.value();
      else if (r.name() == "--hf")
        hf_dir = r.value();
      else if (r.name() == "--data")
        data_path = r.value();
      else if (r.name() == "--data-format")
        data_format = r.value();
      else if (r.name() == "--batch-size")
        batch = ArgReader::to_int(r.name(), r.value());
      else if (r.name() == "--max-batches") {
        max_batches = ArgReader::to_int(r.name(), r.value());
        TS_CHECK(max_batches >= 1, "eval", "--max-batches: expected a number of batches >= 1 ",
                 "(leave the flag out to score the whole file), got ", max_batches);
      } else if (r.name() == "--device")
        device = r.value();
      else
        r.unknown();
    }
    TS_CHECK(checkpoint.empty() != hf_dir.empty() && !data_path.empty(), "eval",
             "expected --checkpoint DIR or --hf DIR, and --data FILE (see --help)");
    TS_CHECK(batch > 0, "eval", "expected --batch-size > 0, got ", batch);
    const data::TokenFormat format = eval_data_format(data_path, data_format);
    const Device dev = cli_device(device, "eval");
    LoadedGpt g = hf_dir.empty() ? load_gpt(checkpoint, dev) : load_hf_dir(hf_dir, dev);
    const int64_t T = g.config.seq_len();
    data::TokenDataset ds(data_path, {.context = T,
                                      .shuffle = false,
                                      .format = format,
                                      .vocab_size = uint64_t(g.config.gpt.vocab_size)});
    TS_CHECK(int64_t(ds.vocab_size()) <= g.config.gpt.vocab_size, "eval", data_path,
             ": expected token ids below the model's vocabulary ", g.config.gpt.vocab_size,
             ", got a file with vocabulary ", ds.vocab_size());
    autograd::NoGradGuard no_grad;
    const int64_t windows = ds.num_windows();
    int64_t batches = (windows + batch - 1) / batch;
    if (max_batches > 0) batches = std::min<int64_t>(batches, max_batches);
    double loss_sum = 0, tokens = 0;
    EvalProgress progress(batches);
    for (int64_t b = 0; b < batches; ++b) {
      const int64_t rows = std::min<int64_t>(batch, windows - b * batch);
      data::TokenBatch tb = ds.next_batch(rows);
      const double n = double(tb.input.numel());
      loss_sum += g.model->loss(tb.input.to(dev), tb.target.to(dev)).item() * n;
      tokens += n;
      progress.update(b + 1, tokens);
    }
    progress.finish();
    TS_CHECK(tokens > 0, "eval", "expected at least one batch to score in ", data_path,
             ", got none");
    const double loss = loss_sum / tokens;
    std::printf("eval %s on %s: %.0f tokens in windows of %lld | loss %.4f | perplexity %.3f\n",
                g.dir.c_str(), data_path.c_str(), tokens, (long long)T, loss, std::exp(loss));
    return 0;
  } catch (const std::exception& e) {
    return report_error("eval", e);
  }
}

int run_generate(const std::vector<std::string>& args) {
  try {
    std::string checkpoint, hf_dir, tokenizer_kind, vocab, merges, device = "cpu";
    std::optional<std::string> prompt;
    long long max_new = 200, top_k = 0, seed = 0;
    double temperature = 0.8;
    ArgReader r(args, "generate");
    while (r.next()) {
      if (r.help()) {
        std::cout << kGenerateUsage;
        return 0;
      } else if (r.name() == "--checkpoint")
        checkpoint = r.value();
      else if (r.name() == "--hf")
        hf_dir = r.value();
      else if (r.name() == "--prompt")
        prompt = r.value();
      else if (r.name() == "--max-new-tokens")
        max_new = ArgReader::to_int(r.name(), r.value());
      else if (r.name() == "--temperature")
        temperature = ArgReader::to_double(r.name(), r.value());
      else if (r.name() == "--top-k")
        top_k = ArgReader::to_int(r.name(), r.value());
      else if (r.name() == "--seed")
        seed = ArgReader::to_int(r.name(), r.value());
      else if (r.name() == "--tokenizer")
        tokenizer_kind = r.value();
      else if (r.name() == "--vocab")
        vocab = r.value();
      else if (r.name() == "--merges")
        merges = r.value();
      else if (r.name() == "--device")
        device = r.value();
      else
        r.unknown();
    }
    TS_CHECK(checkpoint.empty() != hf_dir.empty(), "generate",
             "expected --checkpoint DIR or --hf DIR (see --help)");
    TS_CHECK(max_new >= 0 && temperature >= 0 && top_k >= 0, "generate",
             "expected --max-new-tokens, --temperature and --top-k >= 0, got ", max_new, ", ",
             temperature, ", ", top_k);
    const Device dev = cli_device(device, "generate");
    LoadedGpt g = hf_dir.empty() ? load_gpt(checkpoint, dev) : load_hf_dir(hf_dir, dev);
    const train::DataSection& d = g.config.data;
    auto tokenizer =
        data::make_tokenizer({.kind = tokenizer_kind.empty() ? d.tokenizer : tokenizer_kind,
                              .vocab_path = vocab.empty() ? d.vocab : vocab,
                              .merges_path = merges.empty() ? d.merges : merges});
    std::vector<uint32_t> ids32 = tokenizer->encode(prompt.value_or(g.config.train.sample_prompt));
    TS_CHECK(!ids32.empty(), "generate", "expected a non-empty --prompt");
    std::vector<int64_t> ids(ids32.begin(), ids32.end());
    for (int64_t id : ids)
      TS_CHECK(id < g.config.gpt.vocab_size, "generate", "the prompt's token ", id,
               " is outside the model's vocabulary ", g.config.gpt.vocab_size,
               " (is --tokenizer the one the model was trained with?)");
    Generator gen(static_cast<uint64_t>(seed));
    Tensor out = g.model->generate(from_vector<int64_t>(ids, {1, int64_t(ids.size())}).to(dev),
                                   max_new, temperature, top_k, gen);
    const Tensor flat = out.to(kCPU).contiguous();
    std::vector<uint32_t> result;
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const int64_t id = flat.data<int64_t>()[i];
      result.push_back(id < tokenizer->vocab_size() ? uint32_t(id) : uint32_t('?'));
    }
    std::cout << tokenizer->decode(result) << "\n";
    return 0;
  } catch (const std::exception& e) {
    return report_error("generate", e);
  }
}

}  // namespace tessera::cli
