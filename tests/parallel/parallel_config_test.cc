// The `parallel` configuration section: parsing, defaults and validation messages.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "parallel/mesh/parallel_config.h"

using namespace tessera;
using namespace tessera::parallel;
using nlohmann::json;

TEST_CASE("parallel config parses, keeps defaults and round-trips") {
  ParallelConfig c = ParallelConfig::from_json(
      json::parse(R"({"data": 2, "pipeline": 3, "tensor": {"size": 8, "mode": "2.5d", "depth": 2}})"));
  CHECK(c.data == 2);
  CHECK(c.pipeline == 3);
  CHECK(c.sequence == 1);
  CHECK(c.tensor.size == 8);
  CHECK(c.tensor.mode == TensorMode::two_point_five_d);
  CHECK(c.tensor.depth == 2);
  CHECK(c.world_size() == 48);
  CHECK(tensor_grid_dim(c.tensor) == 2);
  ParallelConfig back = ParallelConfig::from_json(c.to_json());
  CHECK(back.to_json() == c.to_json());

  ParallelConfig d = ParallelConfig::from_json(json::object());
  CHECK(d.world_size() == 1);
  CHECK(d.tensor.mode == TensorMode::one_d);
}

TEST_CASE("parallel config names unknown keys and wrong types") {
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"dta": 2})")),
                    Catch::Contains("[config] expected a key of parallel (data, pipeline, sequence, "
                                    "tensor), got unknown key 'dta'"));
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"tensor": {"size": 4, "modes": "2d"}})")),
                    Catch::Contains("got unknown key 'modes'"));
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"data": "2"})")),
                    Catch::Contains("expected parallel.data to be an integer, got \"2\""));
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"tensor": 4})")),
                    Catch::Contains("expected parallel.tensor to be an object, got 4"));
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"tensor": {"mode": 2}})")),
                    Catch::Contains("expected parallel.tensor.mode to be a string"));
}

TEST_CASE("parallel config rejects impossible layouts") {
  auto with_tensor = [](int size, const char* mode, int depth = 1) {
    ParallelConfig c;
    c.tensor = {size, tensor_mode_from_name(mode), depth};
    return c;
  };
  CHECK_NOTHROW(with_tensor(9, "2d").validate());
  CHECK_THROWS_WITH(with_tensor(8, "2d").validate(),
                    Catch::Contains("expected parallel.tensor.size to be a square (q * q) for mode 2d, got 8"));
  CHECK_NOTHROW(with_tensor(18, "2.5d", 2).validate());
  CHECK_THROWS_WITH(with_tensor(12, "2.5d", 2).validate(),
                    Catch::Contains("expected parallel.tensor.size = q * q * depth for mode 2.5d with "
                                    "depth 2, got size 12"));
  CHECK_THROWS_AS(with_tensor(9, "2.5d", 2).validate(), ValueError);
  CHECK_NOTHROW(with_tensor(27, "3d").validate());
  CHECK_THROWS_WITH(with_tensor(16, "3d").validate(),
                    Catch::Contains("expected parallel.tensor.size to be a cube (q * q * q) for mode 3d, got 16"));
  CHECK_THROWS_WITH(
      ParallelConfig::from_json(json::parse(R"({"tensor": {"size": 4, "mode": "4d"}})")),
      Catch::Contains("expected parallel.tensor.mode to be one of 1d, 2d, 2.5d, 3d, got '4d'"));
  ParallelConfig c;
  c.data = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("expected parallel.data >= 1, got 0"));

  ParallelConfig w;
  w.data = 2;
  w.pipeline = 2;
  w.tensor = {2, TensorMode::one_d, 1};
  CHECK_NOTHROW(w.validate(8));
  CHECK_THROWS_WITH(w.validate(6), Catch::Contains("[config] expected a world size of pipeline 2 x data 2 x "
                                                   "sequence 1 x tensor 2 = 8 ranks, got 6 ranks"));
}

TEST_CASE("parallel config reads sequence_parallel strictly and only for 1d with size > 1") {
  ParallelConfig c = ParallelConfig::from_json(
      json::parse(R"({"tensor": {"size": 4, "mode": "1d", "sequence_parallel": true}})"));
  CHECK(c.tensor.sequence_parallel);
  CHECK(c.to_json()["tensor"]["sequence_parallel"] == true);
  CHECK(ParallelConfig::from_json(c.to_json()).tensor.sequence_parallel);
  CHECK_FALSE(ParallelConfig::from_json(json::object()).tensor.sequence_parallel);
  CHECK_FALSE(ParallelConfig::from_json(json::object()).to_json()["tensor"]["sequence_parallel"]);

  CHECK_THROWS_WITH(
      ParallelConfig::from_json(json::parse(R"({"tensor": {"size": 2, "sequence_parallel": 1}})")),
      Catch::Contains("expected parallel.tensor.sequence_parallel to be true or false, got 1"));
  CHECK_THROWS_WITH(
      ParallelConfig::from_json(
          json::parse(R"({"tensor": {"size": 2, "sequence_paralel": true}})")),
      Catch::Contains("expected a key of parallel.tensor (size, mode, depth, sequence_parallel), "
                      "got unknown key 'sequence_paralel'"));
  CHECK_THROWS_WITH(
      ParallelConfig::from_json(
          json::parse(R"({"tensor": {"size": 4, "mode": "2d", "sequence_parallel": true}})")),
      Catch::Contains("expected parallel.tensor.sequence_parallel only with parallel.tensor.mode "
                      "1d") &&
          Catch::Contains("got mode '2d'"));
  CHECK_THROWS_WITH(
      ParallelConfig::from_json(json::parse(R"({"tensor": {"sequence_parallel": true}})")),
      Catch::Contains("expected parallel.tensor.sequence_parallel with parallel.tensor.size > 1") &&
          Catch::Contains("got size 1"));
  ParallelConfig v;
  v.tensor = {.size = 8, .mode = TensorMode::three_d, .depth = 1, .sequence_parallel = true};
  CHECK_THROWS_AS(v.validate(), ValueError);
  v.tensor.mode = TensorMode::one_d;
  CHECK_NOTHROW(v.validate(8));
}

TEST_CASE("parallel.pipeline and parallel.sequence take objects with their options") {
  const ParallelConfig c = ParallelConfig::from_json(json::parse(
      R"({"pipeline": {"size": 2, "schedule": "interleaved", "virtual_stages": 2, "partition": [1, 3, 2, 2]},
          "sequence": {"size": 2, "mode": "ring"}})"));
  CHECK(c.pipeline == 2);
  CHECK(c.pipeline_options.schedule == pipeline::ScheduleKind::interleaved);
  CHECK(c.pipeline_options.virtual_stages == 2);
  CHECK(c.pipeline_options.partition.to_json() == json::parse("[1, 3, 2, 2]"));
  CHECK(c.sequence == 2);
  CHECK(c.sequence_mode == sequence::SequenceAttentionMode::ring);
  CHECK(ParallelConfig::from_json(c.to_json()).to_json() == c.to_json());
  CHECK(ParallelConfig::from_json(json::parse(R"({"sequence": 4})")).sequence_mode ==
        sequence::SequenceAttentionMode::ring_flash);
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"pipeline": {"size": 2, "schedule": "zigzag"}})")),
                    Catch::Contains("parallel.pipeline.schedule to be one of gpipe, 1f1b"));
  CHECK_THROWS_WITH(
      ParallelConfig::from_json(json::parse(R"({"pipeline": {"size": 2, "virtual_stages": 2}})")),
      Catch::Contains("virtual_stages 1 with schedule '1f1b', got 2"));
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"pipeline": {"stages": 2}})")),
                    Catch::Contains("unknown key 'stages'"));
  CHECK_THROWS_WITH(ParallelConfig::from_json(json::parse(R"({"sequence": {"size": 2, "mode": "ulysses"}})")),
                    Catch::Contains("parallel.sequence.mode to be one of ring, all_to_all, ring_flash"));
}
