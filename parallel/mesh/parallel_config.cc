#include "parallel/mesh/parallel_config.h"

#include "core/error.h"

namespace tessera::parallel {
namespace {

// The integer r with r^power == n, or -1.
int exact_root(int n, int power) {
  for (int r = 1;; ++r) {
    int64_t v = 1;
    for (int i = 0; i < power; ++i) v *= r;
    if (v == n) return r;
    if (v > n) return -1;
  }
}

// The choice among `all` whose name() is the JSON string at parallel.<key>; anything else throws
// naming the choices.
template <typename E, size_t N>
E read_choice(const nlohmann::json& j, const std::string& key, const E (&all)[N],
              const char* (*name)(E)) {
  TS_CHECK(j.is_string(), "config", "expected parallel.", key, " to be a string, got ", j.dump());
  const std::string text = j.get<std::string>();
  std::string names;
  for (E e : all) {
    if (text == name(e)) return e;
    names += (names.empty() ? "" : ", ") + std::string(name(e));
  }
  TS_FAIL("config", "expected parallel.", key, " to be one of ", names, ", got '", text, "'");
}

constexpr pipeline::ScheduleKind kSchedules[] = {
    pipeline::ScheduleKind::gpipe, pipeline::ScheduleKind::one_f_one_b,
    pipeline::ScheduleKind::interleaved, pipeline::ScheduleKind::zero_bubble};
constexpr sequence::SequenceAttentionMode kSequenceModes[] = {
    sequence::SequenceAttentionMode::ring, sequence::SequenceAttentionMode::all_to_all,
    sequence::SequenceAttentionMode::ring_flash};
constexpr sequence::SequenceLayout kSequenceLayouts[] = {sequence::SequenceLayout::contiguous,
                                                         sequence::SequenceLayout::zigzag};

// "auto" (unset) or a layout.
std::optional<sequence::SequenceLayout> read_layout(const nlohmann::json& j) {
  if (j == "auto") return std::nullopt;
  for (sequence::SequenceLayout layout : kSequenceLayouts)
    if (j == sequence::layout_name(layout)) return layout;
  TS_FAIL("config",
          "expected parallel.sequence.layout to be one of auto, contiguous, zigzag, got '",
          j.get<std::string>(), "'");
}

int read_int(const nlohmann::json& j, const std::string& key) {
  TS_CHECK(j.is_number_integer(), "config", "expected parallel.", key, " to be an integer, got ",
           j.dump());
  return j.get<int>();
}

}  // namespace

int ParallelConfig::world_size() const { return pipeline * data * sequence * tensor.size; }

void ParallelConfig::validate() const {
  TS_CHECK(data >= 1, "config", "expected parallel.data >= 1, got ", data);
  TS_CHECK(pipeline >= 1, "config", "expected parallel.pipeline >= 1, got ", pipeline);
  TS_CHECK(sequence >= 1, "config", "expected parallel.sequence >= 1, got ", sequence);
  TS_CHECK(tensor.size >= 1, "config", "expected parallel.tensor.size >= 1, got ", tensor.size);
  TS_CHECK(tensor.depth >= 1, "config", "expected parallel.tensor.depth >= 1, got ", tensor.depth);
  switch (tensor.mode) {
    case TensorMode::one_d:
      break;
    case TensorMode::two_d:
      TS_CHECK(exact_root(tensor.size, 2) > 0, "config",
               "expected parallel.tensor.size to be a square (q * q) for mode 2d, got ",
               tensor.size);
      break;
    case TensorMode::two_point_five_d:
      TS_CHECK(tensor.size % tensor.depth == 0 && exact_root(tensor.size / tensor.depth, 2) > 0,
               "config", "expected parallel.tensor.size = q * q * depth for mode 2.5d with depth ",
               tensor.depth, ", got size ", tensor.size);
      break;
    case TensorMode::three_d:
      TS_CHECK(exact_root(tensor.size, 3) > 0, "config",
               "expected parallel.tensor.size to be a cube (q * q * q) for mode 3d, got ",
               tensor.size);
      break;
  }
  const PipelineOptions& pp = pipeline_options;
  TS_CHECK(pp.virtual_stages >= 1, "config", "expected parallel.pipeline.virtual_stages >= 1, got ",
           pp.virtual_stages);
  TS_CHECK(pp.virtual_stages == 1 || pipeline::runs_model_chunks(pp.schedule), "config",
           "expected parallel.pipeline.virtual_stages 1 with schedule '",
           pipeline::schedule_name(pp.schedule), "', got ", pp.virtual_stages,
           " (model chunks per rank need schedule interleaved)");
  if (tensor.sequence_parallel) {
    TS_CHECK(tensor.mode == TensorMode::one_d, "config",
             "expected parallel.tensor.sequence_parallel only with parallel.tensor.mode 1d "
             "(Megatron's sequence parallelism splits the 1D layers' activations), got mode '",
             tensor.mode,
             "'; set parallel.tensor.sequence_parallel to false or parallel.tensor.mode to 1d");
    TS_CHECK(tensor.size > 1, "config",
             "expected parallel.tensor.sequence_parallel with parallel.tensor.size > 1 (it splits "
             "the sequence over the tensor group), got size ",
             tensor.size);
  }
}

void ParallelConfig::validate(int world) const {
  validate();
  TS_CHECK(world == world_size(), "config", "expected a world size of pipeline ", pipeline,
           " x data ", data, " x sequence ", sequence, " x tensor ", tensor.size, " = ", world_size(),
           " ranks, got ", world, " ranks");
}

ParallelConfig ParallelConfig::from_json(const nlohmann::json& j) {
  TS_CHECK(j.is_object(), "config", "expected parallel to be an object, got ", j.dump());
  ParallelConfig c;
  for (const auto& [key, value] : j.items()) {
    if (key == "data") {
      c.data = read_int(value, key);
    } else if (key == "pipeline" && !value.is_object()) {
      c.pipeline = read_int(value, key);
    } else if (key == "pipeline") {
      for (const auto& [pkey, pvalue] : value.items()) {
        if (pkey == "size") {
          c.pipeline = read_int(pvalue, "pipeline.size");
        } else if (pkey == "virtual_stages") {
          c.pipeline_options.virtual_stages = read_int(pvalue, "pipeline.virtual_stages");
        } else if (pkey == "schedule") {
          c.pipeline_options.schedule =
              read_choice(pvalue, "pipeline.schedule", kSchedules, pipeline::schedule_name);
        } else if (pkey == "partition") {
          TS_CHECK(pvalue.is_string() || pvalue.is_array(), "config",
                   "expected parallel.pipeline.partition to be \"uniform\", \"parameters\" or a "
                   "list of block counts, got ",
                   pvalue.dump());
          c.pipeline_options.partition = pipeline::PartitionSpec::from_json(pvalue);
        } else {
          TS_FAIL("config",
                  "expected a key of parallel.pipeline (size, schedule, virtual_stages, "
                  "partition), got unknown key '",
                  pkey, "'");
        }
      }
    } else if (key == "sequence" && !value.is_object()) {
      c.sequence = read_int(value, key);
    } else if (key == "sequence") {
      for (const auto& [skey, svalue] : value.items()) {
        if (skey == "size") {
          c.sequence = read_int(svalue, "sequence.size");
        } else if (skey == "mode") {
          c.sequence_mode =
              read_choice(svalue, "sequence.mode", kSequenceModes, sequence::mode_name);
        } else if (skey == "layout") {
          TS_CHECK(svalue.is_string(), "config",
                   "expected parallel.sequence.layout to be a string, got ", svalue.dump());
          c.sequence_layout = read_layout(svalue);
        } else {
          TS_FAIL("config",
                  "expected a key of parallel.sequence (size, mode, layout), got unknown key '",
                  skey, "'");
        }
      }
    } else if (key == "tensor") {
      TS_CHECK(value.is_object(), "config", "expected parallel.tensor to be an object, got ",
               value.dump());
      for (const auto& [tkey, tvalue] : value.items()) {
        if (tkey == "size") {
          c.tensor.size = read_int(tvalue, "tensor.size");
        } else if (tkey == "depth") {
          c.tensor.depth = read_int(tvalue, "tensor.depth");
        } else if (tkey == "sequence_parallel") {
          TS_CHECK(tvalue.is_boolean(), "config",
                   "expected parallel.tensor.sequence_parallel to be true or false, got ",
                   tvalue.dump());
          c.tensor.sequence_parallel = tvalue.get<bool>();
        } else if (tkey == "mode") {
          TS_CHECK(tvalue.is_string(), "config", "expected parallel.tensor.mode to be a string, got ",
                   tvalue.dump());
          c.tensor.mode = tensor_mode_from_name(tvalue.get<std::string>());
        } else {
          TS_FAIL("config",
                  "expected a key of parallel.tensor (size, mode, depth, sequence_parallel), "
                  "got unknown key '",
                  tkey, "'");
        }
      }
    } else {
      TS_FAIL("config", "expected a key of parallel (data, pipeline, sequence, tensor), got unknown key '",
              key, "'");
    }
  }
  c.validate();
  return c;
}

nlohmann::json ParallelConfig::to_json() const {
  return {{"data", data},
          {"pipeline",
           {{"size", pipeline},
            {"schedule", pipeline::schedule_name(pipeline_options.schedule)},
            {"virtual_stages", pipeline_options.virtual_stages},
            {"partition", pipeline_options.partition.to_json()}}},
          {"sequence", {{"size", sequence}, {"mode", sequence::mode_name(sequence_mode)}}},
          {"tensor",
           {{"size", tensor.size},
            {"mode", tensor_mode_name(tensor.mode)},
            {"depth", tensor.depth},
            {"sequence_parallel", tensor.sequence_parallel}}}};
}

int tensor_grid_dim(const TensorParallelConfig& tensor) {
  switch (tensor.mode) {
    case TensorMode::one_d:
      return tensor.size;
    case TensorMode::two_d:
      return exact_root(tensor.size, 2);
    case TensorMode::two_point_five_d:
      return exact_root(tensor.size / tensor.depth, 2);
    case TensorMode::three_d:
      return exact_root(tensor.size, 3);
  }
  TS_FAIL("config", "expected a TensorMode, got the value ", int(tensor.mode));
}

}  // namespace tessera::parallel
