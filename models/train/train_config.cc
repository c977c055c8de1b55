// Reading the training configuration: file, overrides and the strict schema (see train_config.h).
#include "models/train/train_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "models/train/config_reader.h"
#include "models/train/device_spec.h"
#include "optim/make_optimizer.h"
#include "parallel/zero/overlap_rules.h"
#include "parallel/zero/param_placement.h"

namespace tessera::train {

using nlohmann::json;

namespace {

std::vector<std::string> keys_of(const json& j, std::vector<std::string> extra) {
  for (const auto& item : j.items()) extra.push_back(item.key());
  return extra;
}

void read_model(const json& j, TrainConfig& c) {
  TS_CHECK(j.is_object(), "config",
           "model: expected an object with a 'type' (gpt, bert, vit or custom), got ", j.dump());
  SectionReader r(j, "model");
  const std::string type = r.string("type", "gpt", {"gpt", "bert", "vit", "custom"});
  json rest = j;
  rest.erase("type");
  // model.init_from {"hf": DIR}: where the weights start (models/train/init_from.h), not a field
  // of the model's own config.
  if (j.contains("init_from")) {
    SectionReader from(j["init_from"], "model.init_from");
    c.init_from_hf = from.string("hf", "");
    from.done();
    TS_CHECK(!c.init_from_hf.empty(), "config",
             "model.init_from: expected {\"hf\": DIR}, a Hugging Face model directory, got ",
             j["init_from"].dump());
    TS_CHECK(type != "custom", "config",
             "model.init_from: expected model.type gpt, bert or vit (Hugging Face layouts exist "
             "only for those), got custom");
    rest.erase("init_from");
  }
  if (type == "custom") {
    // A model given through the C++ API (engine.h): its recipe reads the other keys itself.
    c.kind = ModelKind::custom;
    c.custom = rest;
  } else if (type == "gpt") {
    c.kind = ModelKind::gpt;
    check_known_keys(j, "model", keys_of(gpt::GPTConfig{}.to_json(), {"type", "preset", "init_from"}));
    c.gpt = within_section("model", [&] { return gpt::GPTConfig::from_json(rest); });
  } else if (type == "bert") {
    c.kind = ModelKind::bert;
    check_known_keys(j, "model", keys_of(bert::BertConfig{}.to_json(), {"type", "preset", "init_from"}));
    c.bert = within_section("model", [&] { return bert::BertConfig::from_json(rest); });
  } else {
    c.kind = ModelKind::vit;
    check_known_keys(j, "model", keys_of(vit::ViTConfig{}.to_json(), {"type", "preset", "init_from"}));
    c.vit = within_section("model", [&] { return vit::ViTConfig::from_json(rest); });
  }
}

void read_parallel(const json& j, TrainConfig& c) {
  if (j.is_null()) return;
  SectionReader r(j, "parallel");
  c.data_size_given = r.has("data");
  r.integer("data", 1, 1);
  const json* pipeline = j.contains("pipeline") && j["pipeline"].is_object() ? r.any("pipeline") : nullptr;
  if (!pipeline) r.integer("pipeline", 1, 1);
  const json* sequence = j.contains("sequence") && j["sequence"].is_object() ? r.any("sequence") : nullptr;
  if (!sequence) r.integer("sequence", 1, 1);
  const json& tensor = r.object("tensor");
  r.done();
  if (sequence) {
    SectionReader q(*sequence, "parallel.sequence");
    q.integer("size", 1, 1);
    q.string("mode", "ring_flash", {"ring", "all_to_all", "ring_flash"});
    q.string("layout", "auto", {"auto", "contiguous", "zigzag"});
    q.done();
  }
  if (pipeline) {
    SectionReader p(*pipeline, "parallel.pipeline");
    p.integer("size", 1, 1);
    p.string("schedule", "1f1b", {"gpipe", "1f1b", "interleaved", "zero_bubble"});
    p.integer("virtual_stages", 1, 1);
    p.any("partition");  // "uniform", "parameters" or block counts: ParallelConfig checks it
    p.done();
  }
  if (!tensor.is_null()) {
    SectionReader t(tensor, "parallel.tensor");
    t.integer("size", 1, 1);
    t.string("mode", "1d", {"1d", "2d", "2.5d", "3d"});
    t.integer("depth", 1, 1);
    t.boolean("sequence_parallel", false);
    t.done();
  }
  c.parallel = within_section("parallel", [&] { return parallel::ParallelConfig::from_json(j); });
  within_section("parallel", [&] { c.parallel.validate(); });
  resolve_sequence_layout(c);
}

void read_precision(const json& j, TrainConfig& c) {
  SectionReader r(j, "precision");
  c.precision.dtype = r.string("dtype", "f32", {"f32", "bf16", "f16"});
  SectionReader s(r.object("loss_scale"), "precision.loss_scale");
  optim::LossScalerOptions& o = c.precision.loss_scale;
  o.init_scale = s.number("init_scale", o.init_scale, 1e-30);
  o.growth_factor = s.number("growth_factor", o.growth_factor, 1.0);
  o.backoff_factor = s.number("backoff_factor", o.backoff_factor, 1e-30, 1.0);
  o.growth_interval = s.integer("growth_interval", o.growth_interval, 1);
  o.min_scale = s.number("min_scale", o.min_scale, 0.0);
  s.done();
  c.precision.skip_limit = r.integer("skip_limit", c.precision.skip_limit, 0);
  r.done();
}

void read_train(const json& j, TrainSection& t) {
  SectionReader r(j, "train");
  t.steps = r.integer("steps", t.steps, 1);
  t.batch_size = r.integer("batch_size", t.batch_size, 1);
  t.micro_batch_size = r.integer("micro_batch_size", t.micro_batch_size, 0);
  t.seq_len = r.integer("seq_len", t.seq_len, 0);
  t.seed = uint64_t(r.integer("seed", int64_t(t.seed), 0));
  t.grad_clip = r.number("grad_clip", t.grad_clip, 0.0);
  t.eval_every = r.integer("eval_every", t.eval_every, 0);
  t.eval_batches = r.integer("eval_batches", t.eval_batches, 0);
  t.threads = r.integer("threads", t.threads, 0, 1024);
  t.sample_tokens = r.integer("sample_tokens", t.sample_tokens, 0);
  t.sample_prompt = r.string("sample_prompt", t.sample_prompt);
  t.sample_temperature = r.number("sample_temperature", t.sample_temperature, 0.0);
  t.sample_top_k = r.integer("sample_top_k", t.sample_top_k, 0);
  t.device = r.string("device", t.device);
  if (const nlohmann::json& profile = r.object("profile"); !profile.is_null()) {
    SectionReader p(profile, "train.profile");
    const nlohmann::json* steps = p.any("steps");
    TS_CHECK(steps != nullptr && steps->is_array() && steps->size() == 2 &&
                 (*steps)[0].is_number_integer() && (*steps)[1].is_number_integer(),
             "config", "train.profile.steps: expected [first, last], two step numbers, got ",
             steps ? steps->dump() : "nothing");
    t.profile_first = (*steps)[0].get<int64_t>();
    t.profile_last = (*steps)[1].get<int64_t>();
    TS_CHECK(t.profile_first >= 1 && t.profile_first <= t.profile_last &&
                 t.profile_last <= t.steps,
             "config", "train.profile.steps: expected 1 <= first <= last <= train.steps ",
             t.steps, ", got [", t.profile_first, ", ", t.profile_last, "]");
    t.profile_path = p.string("path", t.profile_path);
    TS_CHECK(!t.profile_path.empty(), "config", "train.profile.path: expected a file name");
    p.done();
  }
  r.done();
  check_device_spec(t.device);
}

// Which keys each data.type takes, so a key that would be ignored is an error instead.
void check_image_data_keys(const DataSection& d) {
  if (d.type.empty()) {
    TS_CHECK(d.train.empty() && d.val.empty(), "config", "data.train / data.val: only ",
             "data.type image_folder reads them; set data.type or remove them");
    TS_CHECK(!d.skip_bad_images && d.crop_padding == 0 && !d.hflip, "config",
             "data.skip_bad_images / crop_padding / hflip: only image data (data.type cifar10 or ",
             "image_folder) takes them");
    return;
  }
  if (d.type == "cifar10") {
    TS_CHECK(!d.path.empty(), "config",
             "data.path: data.type cifar10 needs the directory of data_batch_1.bin .. ",
             "test_batch.bin");
    TS_CHECK(d.val_path.empty() && d.train.empty() && d.val.empty() && !d.skip_bad_images, "config",
             "data: data.type cifar10 reads data.path only (its test_batch.bin is ",
             "the evaluation set); remove data.val_path, data.train, data.val and ",
             "data.skip_bad_images");
    return;
  }
  TS_CHECK(!d.train.empty(), "config",
           "data.train: data.type image_folder needs the training root (root/<class>/<image>)");
  TS_CHECK(d.path.empty() && d.val_path.empty(), "config",
           "data.path / data.val_path: data.type image_folder reads data.train and data.val ",
           "instead, got '", d.path, "' / '", d.val_path, "'");
}

// data.format and data.vocab_size describe token files: refused where they would be ignored.
void check_token_format_keys(const DataSection& d) {
  if (d.format == "tessera") {
    TS_CHECK(d.vocab_size == 0, "config", "data.vocab_size: only data.format llmc or u16 reads ",
             "it (Tessera token files record their vocabulary); remove it or set data.format");
    return;
  }
  TS_CHECK(!d.path.empty() && d.type.empty(), "config", "data.format ", d.format,
           ": expected token files in data.path (and data.val_path), got ",
           d.type.empty() ? std::string("no data.path") : "image data (data.type " + d.type + ")");
}

void read_data(const json& j, DataSection& d) {
  SectionReader r(j, "data");
  d.path = r.string("path", d.path);
  d.val_path = r.string("val_path", d.val_path);
  d.format = r.string("format", d.format, {"tessera", "llmc", "u16"});
  d.vocab_size = r.integer("vocab_size", d.vocab_size, 1, int64_t(1) << 32);
  d.shuffle = r.boolean("shuffle", d.shuffle);
  d.tokenizer = r.string("tokenizer", d.tokenizer, {"byte", "gpt2"});
  d.vocab = r.string("vocab", d.vocab);
  d.merges = r.string("merges", d.merges);
  d.builtin_tokens = r.integer("builtin_tokens", d.builtin_tokens, 1024);
  d.builtin_val_tokens = r.integer("builtin_val_tokens", d.builtin_val_tokens, 1024);
  d.mask_prob = r.number("mask_prob", d.mask_prob, 0.01, 1.0);
  d.builtin_images = r.integer("builtin_images", d.builtin_images, 1);
  d.image_noise = r.number("image_noise", d.image_noise, 0.0);
  d.type = r.string("type", d.type, {"cifar10", "image_folder"});
  d.train = r.string("train", d.train);
  d.val = r.string("val", d.val);
  d.skip_bad_images = r.boolean("skip_bad_images", d.skip_bad_images);
  d.crop_padding = r.integer("crop_padding", d.crop_padding, 0, 64);
  d.hflip = r.boolean("hflip", d.hflip);
  r.done();
  TS_CHECK(d.tokenizer != "gpt2" || (!d.vocab.empty() && !d.merges.empty()), "config",
           "data.tokenizer: gpt2 needs data.vocab (vocab.json) and data.merges (merges.txt)");
  check_image_data_keys(d);
  check_token_format_keys(d);
}

void read_checkpoint(const json& j, CheckpointSection& c) {
  SectionReader r(j, "checkpoint");
  c.dir = r.string("dir", c.dir);
  c.every = r.integer("every", c.every, 0);
  c.resume = r.boolean("resume", c.resume);
  c.keep = r.integer("keep", c.keep, 0);
  c.overwrite = r.boolean("overwrite", c.overwrite);
  c.resume_step = r.integer("resume_step", c.resume_step, 0);
  c.format = r.string("format", c.format, {"serial", "sharded"});
  r.done();
  TS_CHECK(!c.overwrite || !c.resume, "config",
           "checkpoint.overwrite deletes the checkpoints under checkpoint.dir, so it needs "
           "checkpoint.resume false (set one of them)");
  TS_CHECK(c.resume_step == 0 || c.resume, "config",
           "checkpoint.resume_step needs checkpoint.resume true");
}

void read_logging(const json& j, LoggingSection& l) {
  SectionReader r(j, "logging");
  l.metrics = r.string("metrics", l.metrics);
  l.log_every = r.integer("log_every", l.log_every, 1);
  l.progress = r.boolean("progress", l.progress);
  r.done();
}

void read_optimizer(const json& j, TrainConfig& c) {
  c.optimizer = j.is_null() ? json{{"type", "adamw"}} : j;
  TS_CHECK(c.optimizer.is_object(), "config", "optimizer: expected an object, got ", j.dump());
  if (!c.optimizer.contains("type")) c.optimizer["type"] = "adamw";
  // Building one over an empty group checks the type, the keys and the values.
  const double base_lr = within_section("optimizer", [&] {
    return optim::make_optimizer(c.optimizer, {optim::ParamGroup{}})->lr(0);
  });
  if (c.optimizer.contains("weight_decay"))
    c.weight_decay = c.optimizer["weight_decay"].get<double>();
  c.schedule.lr = base_lr;
}

// A decaying schedule needs its decay to end after warmup: names the key the user set (train.steps
// stands in for an absent schedule.total_steps) and the values that would work.
void check_warmup_fits(const json& s, int64_t train_steps) {
  if (!s.is_object()) return;
  const json type = s.value("type", json("constant"));
  const json warmup = s.value("warmup_steps", json(0));
  if (!type.is_string() || type == "constant" || !warmup.is_number_integer()) return;
  const bool total_given = s.contains("total_steps");
  const json total = total_given ? s.at("total_steps") : json(train_steps);
  if (!total.is_number_integer()) return;
  const int64_t w = warmup.get<int64_t>(), t = total.get<int64_t>();
  if (w < 0 || t > w) return;  // a negative warmup is the schedule's own error
  const std::string key = total_given ? "schedule.total_steps" : "train.steps";
  TS_FAIL("config", key, " (", t, ") must be greater than schedule.warmup_steps (", w, ") for a ",
          type.get<std::string>(), " schedule, which decays from the end of warmup to ", key,
          ": set ", key, " to more than ", w, " or schedule.warmup_steps to less than ", t,
          total_given ? "" : " (or set schedule.type to constant)");
}

void read_schedule(const json& j, TrainConfig& c) {
  json s = j.is_null() ? json::object() : j;
  check_warmup_fits(s, c.train.steps);
  if (s.is_object() && !s.contains("total_steps")) s["total_steps"] = c.train.steps;
  optim::LrSchedule schedule =
      within_section("schedule", [&] { return optim::LrSchedule::from_json(s, c.schedule.lr); });
  c.schedule = schedule.options();
}

// zero.offload_params and its placement keys: heterogeneous memory for stage 3's parameters
// (parallel/zero/param_placement.h).
void read_param_placement(SectionReader& z, ZeroSection& zero) {
  zero.offload_params = z.boolean("offload_params", false);
  TS_CHECK(!zero.offload_params || (zero.stage == 3 && zero.offload), "config",
           "zero.offload_params parks ZeRO stage 3's parameter shards on the host, beside the "
           "optimizer state zero.offload puts there: expected zero.stage 3 and zero.offload "
           "true, got zero.stage ",
           zero.stage, " and zero.offload ", zero.offload ? "true" : "false");
  for (const char* key : {"placement", "offload_param_frac", "device_memory_limit", "chunk_mb"})
    TS_CHECK(!z.has(key) || zero.offload_params, "config", "zero.", key,
             " places parameter chunks on the device or the host, so it needs "
             "zero.offload_params true; remove it or set zero.offload_params");
  zero.placement = parallel::zero::parse_placement_policy(
      z.string("placement", "static", {"static", "auto"}), "zero.placement");
  zero.offload_param_frac = z.number("offload_param_frac", 1.0, 0.0, 1.0);
  TS_CHECK(!z.has("offload_param_frac") ||
               zero.placement == parallel::zero::PlacementPolicy::static_share,
           "config",
           "zero.offload_param_frac is the static placement's share of chunks on the host; "
           "zero.placement auto decides it from zero.device_memory_limit");
  if (const json* limit = z.any("device_memory_limit")) {
    TS_CHECK(limit->is_string() || limit->is_number_integer(), "config",
             "zero.device_memory_limit: expected a size such as \"8G\" or a number of bytes, "
             "got ",
             limit->dump());
    zero.device_memory_limit =
        limit->is_string()
            ? parallel::zero::parse_bytes(limit->get<std::string>(), "zero.device_memory_limit")
            : limit->get<int64_t>();
  }
  const bool auto_placed = zero.placement == parallel::zero::PlacementPolicy::auto_traced;
  TS_CHECK(auto_placed == (zero.device_memory_limit > 0) || !zero.offload_params, "config",
           "zero.placement auto keeps the device under zero.device_memory_limit: ",
           auto_placed ? "expected a limit above 0 with it"
                       : "expected zero.placement auto with a limit");
  zero.chunk_mb = z.number("chunk_mb", 0.0, 0.0, 1 << 20);
}

void read_zero(const json& j, ZeroSection& zero) {
  SectionReader z(j, "zero");
  zero.stage = z.integer("stage", 0, 0, 3);
  zero.offload = z.boolean("offload", false);
  TS_CHECK(!zero.offload || zero.stage > 0, "config",
           "zero.offload keeps the ZeRO optimizer's shards on the host, so it needs zero.stage 1, "
           "2 or 3, got zero.stage 0; set zero.stage or remove zero.offload");
  zero.bucket_mb = z.number("bucket_mb", 25.0, 1.0 / 1024, 1 << 20);
  TS_CHECK(!z.has("bucket_mb") || zero.stage > 0, "config",
           "zero.bucket_mb sizes the ZeRO optimizer's gradient buckets, so it needs zero.stage "
           "1, 2 or 3, got zero.stage 0");
  zero.overlap_step = z.boolean("overlap_step", false);
  parallel::zero::check_overlap_step(zero.overlap_step, zero.offload, zero.stage,
                                     parallel::zero::OverlapAsker::config);
  read_param_placement(z, zero);
  for (const char* key : {"prefetch", "live_params", "sharded_init"})
    TS_CHECK(!z.has(key) || zero.stage == 3, "config", "zero.", key,
             " is a ZeRO stage 3 setting (how parameters are built and gathered), got it with "
             "zero.stage ",
             zero.stage, "; remove it or set zero.stage to 3");
  zero.prefetch = z.integer("prefetch", 1, 0, 16);
  zero.live_params = z.integer("live_params", 4, 2, 1 << 20);
  zero.sharded_init = z.boolean("sharded_init", true);
  z.done();
}

// The rules that tie one section to another (each section's own are checked as it is read).
void check_sections_agree(const TrainConfig& c) {
  TS_CHECK(!c.parallel_auto || c.kind != ModelKind::custom, "config",
           "parallel: auto plans the bundled models (gpt, bert, vit), whose layers the planner "
           "counts; a model of one's own (model.type custom) needs its layout written out");
  TS_CHECK(c.data.type.empty() || c.kind == ModelKind::vit, "config", "data.type: ", c.data.type,
           " is image data for the ViT trainer, got model.type ", model_kind_name(c.kind));
  if (c.kind == ModelKind::vit) {
    TS_CHECK(c.train.seq_len == 0, "config",
             "train.seq_len: only GPT and BERT read sequences, got ", c.train.seq_len, " for vit");
  }
  // The overlapped step updates each range as soon as it is reduced: nothing may rescale the
  // gradients after backward.
  TS_CHECK(!c.zero.overlap_step || c.train.grad_clip == 0, "config",
           "zero.overlap_step steps each gradient range during backward, before the global norm "
           "exists: expected train.grad_clip 0, got ",
           c.train.grad_clip, "; set one of them off");
  TS_CHECK(!c.zero.overlap_step || c.precision.dtype != "f16", "config",
           "zero.overlap_step steps each gradient range during backward, before the loss scaler "
           "knows whether any gradient overflowed: expected precision.dtype f32 or bf16, got f16");
  const std::string opt_type = c.optimizer.value("type", "adamw");
  TS_CHECK(c.train.device == "cpu" || opt_type == "adam" || opt_type == "adamw", "config",
           "optimizer.type ", opt_type,
           ": its update loops run on the CPU only; with train.device ", c.train.device,
           " use adam or adamw");
  const int64_t context = c.kind == ModelKind::gpt ? c.gpt.context_length : c.bert.max_positions;
  TS_CHECK(c.kind == ModelKind::vit || c.kind == ModelKind::custom || c.train.seq_len <= context,
           "config", "train.seq_len: expected at most the model's context ", context, ", got ",
           c.train.seq_len);
}

}  // namespace

const char* model_kind_name(ModelKind kind) {
  switch (kind) {
    case ModelKind::gpt:
      return "gpt";
    case ModelKind::bert:
      return "bert";
    case ModelKind::vit:
      return "vit";
    case ModelKind::custom:
      return "custom";
  }
  return "?";
}

TrainConfig TrainConfig::from_json(const json& j) {
  TS_CHECK(j.is_object(), "config", "expected a JSON object at the top level, got ", j.dump());
  SectionReader top(j, "");
  TrainConfig c;
  c.source = j;
  top.string("description", "");
  const json& model = top.object("model");
  TS_CHECK(!model.is_null(), "config",
           "model: missing (e.g. {\"type\": \"gpt\", \"preset\": \"gpt-tiny\"})");
  read_model(model, c);
  // "parallel": "auto": the planner (models/plan) picks the layout when the world is known.
  const json* parallel = top.any("parallel");
  if (parallel && parallel->is_string()) {
    TS_CHECK(*parallel == "auto", "config",
             "parallel: expected an object or the string \"auto\" (the planner picks the layout "
             "for the world it is launched with), got ", parallel->dump());
    c.parallel_auto = true;
  } else {
    read_parallel(top.object("parallel"), c);
  }
  read_zero(top.object("zero"), c.zero);
  read_precision(top.object("precision"), c);
  read_train(top.object("train"), c.train);
  read_optimizer(top.object("optimizer"), c);
  read_schedule(top.object("schedule"), c);
  read_data(top.object("data"), c.data);
  if (c.data.format != "tessera" && c.data.vocab_size == 0)  // the files record no vocabulary
    c.data.vocab_size = c.kind == ModelKind::bert     ? c.bert.vocab_size - 1
                        : c.kind == ModelKind::custom ? c.custom.value("vocab_size", c.gpt.vocab_size)
                                                      : c.gpt.vocab_size;
  read_checkpoint(top.object("checkpoint"), c.checkpoint);
  read_logging(top.object("logging"), c.logging);
  top.done();
  check_sections_agree(c);
  return c;
}

void resolve_sequence_layout(TrainConfig& c) {
  // GPT is causal: under ring_flash the zigzag layout gives every sequence rank the same work
  // (blocks above the diagonal are skipped). Ring scores every pair and all_to_all gathers whole
  // sequences per head, and BERT and ViT attend both ways: contiguous for them.
  using parallel::sequence::SequenceLayout;
  if (!c.parallel.sequence_layout)
    c.parallel.sequence_layout =
        c.kind == ModelKind::gpt &&
                c.parallel.sequence_mode == parallel::sequence::SequenceAttentionMode::ring_flash
            ? SequenceLayout::zigzag
            : SequenceLayout::contiguous;
}

int64_t TrainConfig::seq_len() const {
  if (train.seq_len > 0 || kind == ModelKind::custom) return train.seq_len;
  return kind == ModelKind::gpt ? gpt.context_length : bert.max_positions;
}

std::string error_text(const std::exception& e) {
  std::string msg = e.what();
  if (msg.rfind("rank ", 0) == 0) {
    const size_t colon = msg.find(": ");
    if (colon != std::string::npos) msg = msg.substr(colon + 2);
  }
  return msg;
}

json read_config_file(const std::string& path) {
  // An ifstream opens a directory without complaint and then reads nothing, which would be
  // reported as invalid JSON.
  std::error_code ec;
  TS_CHECK(
      !std::filesystem::is_directory(path, ec), "config", path,
      ": is a directory, expected a JSON configuration file (e.g. tools/configs/gpt-tiny.json)");
  std::ifstream in(path);
  TS_CHECK(in.good(), "config", path, ": cannot open the file (does it exist?)");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const size_t bracket = msg.find("] ");
    if (msg.rfind("[json.exception", 0) == 0 && bracket != std::string::npos)
      msg = msg.substr(bracket + 2);
    TS_FAIL("config", path, ": invalid JSON: ", msg);
  }
}

void apply_override(json& j, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  TS_CHECK(eq != std::string::npos && eq > 0, "config",
           "--set expected key=value (e.g. train.steps=50), got '", assignment, "'");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json* node = &j;
  size_t begin = 0;
  while (true) {
    const size_t dot = path.find('.', begin);
    const std::string key =
        path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    TS_CHECK(!key.empty(), "config", "--set ", assignment,
             ": expected a key path like a.b.c, got '", path, "'");
    TS_CHECK(node->is_object(), "config", "--set ", assignment, ": '", path.substr(0, begin - 1),
             "' is not an object, so it has no key '", key, "'");
    json& child = (*node)[key];
    if (dot == std::string::npos) {
      if (child.is_string()) {
        child = text;
      } else {
        json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
        child = parsed.is_discarded() ? json(text) : parsed;
      }
      return;
    }
    if (child.is_null()) child = json::object();
    node = &child;
    begin = dot + 1;
  }
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    json j = read_config_file(path);
    for (const std::string& o : overrides) apply_override(j, o);
    return TrainConfig::from_json(j);
  } catch (const Error& e) {
    std::string msg = error_text(e);
    if (msg.rfind("[config] ", 0) == 0) msg = msg.substr(9);
    if (msg.rfind(path + ":", 0) == 0) throw ValueError("config", msg);
    throw ValueError("config", path + ": " + msg);
  }
}

}  // namespace tessera::train
