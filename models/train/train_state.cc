// Trainer checkpoint contents (see train_state.h).
#include "models/train/train_state.h"

#include <filesystem>
#include <map>

#include "core/error.h"

namespace tessera::train {

namespace fs = std::filesystem;

namespace {

// The master of each model parameter, keyed by the parameter's storage.
std::map<const Storage*, Tensor> masters_by_storage(const optim::MasterWeights& masters) {
  std::map<const Storage*, Tensor> out;
  for (size_t i = 0; i < masters.model_params().size(); ++i)
    out[masters.model_params()[i].storage().get()] = masters.masters()[i];
  return out;
}

}  // namespace

io::NamedTensors model_checkpoint_tensors(const nn::Module& model,
                                          const optim::MasterWeights& masters) {
  const auto by_storage = masters_by_storage(masters);
  io::NamedTensors out;
  for (const auto& [name, t] : model.state_dict()) {
    auto it = by_storage.find(t.storage().get());
    out.emplace_back(name, it != by_storage.end() ? it->second : t);
  }
  return out;
}

void load_model_tensors(nn::Module& model, const optim::MasterWeights* masters,
                        const io::NamedTensors& tensors, const std::string& dir) {
  try {
    std::map<std::string, Tensor> current;
    for (const auto& [name, t] : model.state_dict()) current[name] = t;
    nn::StateDict converted;
    for (const auto& [name, t] : tensors) {
      auto it = current.find(name);
      converted.emplace_back(name, it != current.end() && it->second.dtype() != t.dtype()
                                       ? t.to(it->second.dtype())
                                       : t);
    }
    model.load_state_dict(converted, /*strict=*/true);
    if (!masters) return;
    // The f32 values for masters that are copies (not the parameters themselves).
    std::map<const Storage*, Tensor> loaded;
    for (const auto& [name, t] : tensors) {
      auto it = current.find(name);
      if (it != current.end()) loaded[it->second.storage().get()] = t;
    }
    for (size_t i = 0; i < masters->masters().size(); ++i) {
      const Tensor& m = masters->masters()[i];
      const Tensor& p = masters->model_params()[i];
      if (m.is_same(p)) continue;
      auto it = loaded.find(p.storage().get());
      TS_ASSERT(it != loaded.end());
      m.copy_(it->second.to(DType::f32));
    }
  } catch (const Error& e) {
    TS_FAIL("checkpoint", dir, ": model weights do not fit this model: ", error_text(e));
  }
}

std::string resolve_checkpoint_dir(const std::string& path) {
  TS_CHECK(fs::exists(path), "checkpoint", path, ": no such directory");
  if (fs::exists(fs::path(path) / "state.json")) return path;
  std::optional<std::string> latest = io::latest_checkpoint(path);
  TS_CHECK(
      latest.has_value(), "checkpoint", path,
      ": expected a checkpoint directory (with state.json) or a directory of step-N checkpoints, "
      "found neither");
  return *latest;
}

TrainConfig checkpoint_config(const nlohmann::json& state, const std::string& dir) {
  TS_CHECK(state.is_object() && state.value("format", "") == kTrainStateFormat &&
               state.contains("config"),
           "checkpoint", dir, ": state.json is not a tessera trainer checkpoint (expected format '",
           kTrainStateFormat, "' with a config)");
  try {
    return TrainConfig::from_json(state.at("config"));
  } catch (const Error& e) {
    TS_FAIL("checkpoint", dir, ": its stored config does not read: ", error_text(e));
  }
}

std::vector<std::string> resume_differences(const TrainConfig& stored, const TrainConfig& now) {
  std::vector<std::string> out;
  auto compare = [&](const char* key, const auto& was, const auto& is) {
    if (was != is) out.push_back(str_cat(key, " ", was, " -> ", is));
  };
  compare("train.seed", stored.train.seed, now.train.seed);
  compare("train.batch_size", stored.train.batch_size, now.train.batch_size);
  compare("train.micro_batch_size", stored.train.micro_batch_size, now.train.micro_batch_size);
  compare("sequence length (train.seq_len)", stored.seq_len(), now.seq_len());
  compare("precision.dtype", stored.precision.dtype, now.precision.dtype);
  compare("data.path", "'" + stored.data.path + "'", "'" + now.data.path + "'");
  auto text = [](bool b) { return std::string(b ? "true" : "false"); };
  compare("data.shuffle", text(stored.data.shuffle), text(now.data.shuffle));
  return out;
}

}  // namespace tessera::train
