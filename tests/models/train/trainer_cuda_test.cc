// The trainer on a CUDA GPU (each case is skipped without one): gpt-tiny trains to the CPU's
// losses, BERT and ViT evaluate like on the CPU, bf16 and f16 (loss scaling of device gradients)
// train, checkpoints resume on the GPU and across devices, the progress line shows the GPU's
// memory, and gradient clipping / unscaling of device tensors match the CPU's.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/cuda/runtime.h"
#include "core/error.h"
#include "core/factory.h"
#include "models/train/train_config.h"
#include "models/train/train_device.h"
#include "optim/clip_grad.h"
#include "optim/loss_scaler.h"
#include "tests/models/train/train_test_util.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using namespace tessera::train;
using namespace tessera::train::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The bundled gpt-tiny (2 layers, width 128, context 64) shortened to `steps` steps, with two
// accumulation micro-batches per step and no files written.
json gpt_tiny(int64_t steps) {
  json j = read_config_file("tools/configs/gpt-tiny.json");
  j["train"]["steps"] = steps;
  j["train"]["batch_size"] = 8;
  j["train"]["micro_batch_size"] = 4;
  j["train"]["threads"] = 2;
  j["train"]["eval_every"] = 0;
  j["train"]["eval_batches"] = 2;
  j["train"]["sample_tokens"] = 0;
  j["schedule"]["warmup_steps"] = 5;
  j["data"] = {{"builtin_tokens", 65536}, {"builtin_val_tokens", 4096}};
  j.erase("checkpoint");
  j["logging"] = {{"progress", false}};
  return j;
}

json on_cuda(json j) {
  j["train"]["device"] = "cuda";
  return j;
}

// Each loss of `got` within `rel` (relative) of `want`.
void check_losses(const std::vector<double>& got, const std::vector<double>& want, double rel) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i + 1 << ": " << got[i] << " vs " << want[i]);
    CHECK(std::isfinite(got[i]));
    CHECK(std::abs(got[i] - want[i]) <= rel * std::abs(want[i]));
  }
}

}  // namespace

TEST_CASE("gpt-tiny on CUDA follows the CPU's losses within 1e-3 (f32, 30 steps)") {
  TS_REQUIRE_GPU();
  const json j = gpt_tiny(30);
  const TrainSummary cpu = train_json(j);
  const TrainSummary gpu = train_json(on_cuda(j));
  check_losses(gpu.losses, cpu.losses, 1e-3);
  CHECK(mean_tail(gpu.losses, 5) < gpu.losses.front() - 1.0);
  REQUIRE(gpu.last_eval.contains("val_loss"));
  CHECK(gpu.last_eval["val_loss"].get<double>() ==
        Approx(cpu.last_eval["val_loss"].get<double>()).epsilon(1e-3));
}

TEST_CASE("bf16 with f32 masters on CUDA trains close to the CPU's bf16 run") {
  TS_REQUIRE_GPU();
  json j = gpt_tiny(30);
  j["precision"]["dtype"] = "bf16";
  const TrainSummary cpu = train_json(j);
  const TrainSummary gpu = train_json(on_cuda(j));
  check_losses(gpu.losses, cpu.losses, 5e-2);
  CHECK(mean_tail(gpu.losses, 5) < gpu.losses.front() - 1.0);
}

TEST_CASE("f16 on CUDA: the loss scaler unscales device gradients and skips inf steps") {
  TS_REQUIRE_GPU();
  json j = on_cuda(tiny_gpt());
  j["precision"] = {{"dtype", "f16"},
                    {"loss_scale", {{"init_scale", 1e12}, {"growth_interval", 1000}}}};
  const TrainSummary s = train_json(j);
  CHECK(s.skipped_steps > 0);  // 1e12 overflows f16 gradients until the scale backs off
  CHECK(s.skipped_steps < 30);
  for (double l : s.losses) CHECK(std::isfinite(l));
  CHECK(mean_tail(s.losses, 5) < s.losses.front() - 1.0);
}

TEST_CASE("BERT and ViT on CUDA match their CPU losses and metrics") {
  TS_REQUIRE_GPU();
  const json bert = json::parse(R"({
    "model": {"type": "bert", "vocab_size": 260, "max_positions": 32, "n_layers": 1, "n_heads": 2,
              "d_model": 32, "mlp_hidden": 64, "dropout": 0.0, "attn_dropout": 0.0},
    "optimizer": {"type": "adamw", "lr": 1e-2},
    "train": {"steps": 12, "batch_size": 8, "threads": 2, "eval_batches": 2},
    "data": {"builtin_tokens": 65536, "builtin_val_tokens": 4096},
    "logging": {"progress": false}
  })");
  TrainSummary cpu = train_json(bert), gpu = train_json(on_cuda(bert));
  check_losses(gpu.losses, cpu.losses, 1e-3);
  CHECK(gpu.last_eval["mlm_loss"].get<double>() ==
        Approx(cpu.last_eval["mlm_loss"].get<double>()).epsilon(1e-3));
  CHECK(gpu.last_eval["mlm_accuracy"].get<double>() ==
        Approx(cpu.last_eval["mlm_accuracy"].get<double>()).margin(0.05));

  const json vit = json::parse(R"({
    "model": {"type": "vit", "image_size": 16, "patch_size": 4, "num_classes": 4, "n_layers": 1,
              "n_heads": 2, "d_model": 32},
    "optimizer": {"type": "adamw", "lr": 3e-3},
    "train": {"steps": 12, "batch_size": 16, "threads": 2, "eval_batches": 4},
    "data": {"image_noise": 0.3},
    "logging": {"progress": false}
  })");
  cpu = train_json(vit);
  gpu = train_json(on_cuda(vit));
  check_losses(gpu.losses, cpu.losses, 1e-3);
  CHECK(gpu.last_eval["val_loss"].get<double>() ==
        Approx(cpu.last_eval["val_loss"].get<double>()).epsilon(1e-3));
  CHECK(gpu.last_eval["top1"].get<double>() ==
        Approx(cpu.last_eval["top1"].get<double>()).margin(0.05));  // near-tied logits may flip
}

TEST_CASE("a CUDA run resumes from its checkpoint on the GPU, and on the CPU") {
  TS_REQUIRE_GPU();
  for (const char* dtype : {"f32", "bf16"}) {
    INFO("precision " << dtype);
    json j = on_cuda(gpt_tiny(8));
    j["precision"]["dtype"] = dtype;
    j["checkpoint"] = {{"dir", fresh_dir(std::string("cuda_full_") + dtype)}, {"every", 4}};
    const TrainSummary full = train_json(j);
    REQUIRE(full.losses.size() == 8);

    // Stopped at step 3 and resumed on the GPU: the same run (the GPU kernels are deterministic,
    // so only a state that failed to come back could move the losses).
    const std::string parts = fresh_dir(std::string("cuda_parts_") + dtype);
    j["checkpoint"]["dir"] = parts;
    j["train"]["steps"] = 3;
    const TrainSummary first = train_json(j);
    REQUIRE(fs::exists(parts + "/step-00000003/model.safetensors"));
    j["train"]["steps"] = 8;
    const TrainSummary rest = train_json(j);
    CHECK(rest.start_step == 3);
    check_losses(first.losses, {full.losses.begin(), full.losses.begin() + 3}, 1e-6);
    check_losses(rest.losses, {full.losses.begin() + 3, full.losses.end()}, 1e-6);

    // The step-3 checkpoint resumed on the CPU: portable, within the devices' float differences.
    const std::string moved = fresh_dir(std::string("cuda_to_cpu_") + dtype);
    fs::create_directories(moved);
    fs::copy(parts + "/step-00000003", moved + "/step-00000003", fs::copy_options::recursive);
    j["checkpoint"]["dir"] = moved;
    j["train"]["device"] = "cpu";
    const TrainSummary on_cpu = train_json(j);
    CHECK(on_cpu.start_step == 3);
    check_losses(on_cpu.losses, {full.losses.begin() + 3, full.losses.end()},
                 std::string(dtype) == "f32" ? 1e-3 : 5e-2);
  }
}

TEST_CASE("the progress line and the header name the GPU and its memory") {
  TS_REQUIRE_GPU();
  json j = on_cuda(tiny_gpt());
  j["train"]["steps"] = 2;
  j["logging"] = {{"progress", true}, {"log_every", 1}};
  std::ostringstream out;
  run_training(TrainConfig::from_json(j), nullptr, {.out = &out});
  const std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("| device cuda:0") && Catch::Contains("step 2/2 | loss") &&
                       Catch::Contains("mem cuda:0 ") && Catch::Contains(" (peak "));
  CHECK(memory_stats(cuda_device(0)).peak_bytes > 0);
}

TEST_CASE("train.device cuda picks the local rank's GPU; cuda:N must exist") {
  TS_REQUIRE_GPU();
  const int count = cuda::device_count();
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(count).c_str(), 1);  // wraps to 0
  CHECK(resolve_train_device("cuda", 5) == cuda_device(0));
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(count + count - 1).c_str(), 1);
  CHECK(resolve_train_device("cuda", 0) == cuda_device(count - 1));
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  CHECK(resolve_train_device("cuda", 0) == cuda_device(0));  // world rank 0 without the variable
  CHECK(resolve_train_device("cuda:0", 3) == cuda_device(0));
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(count + 1).c_str(), 1);
  CHECK_THROWS_WITH(resolve_train_device("cuda", 0),
                    Catch::Contains("[config] train.device cuda: " + std::to_string(count + 1) +
                                    " ranks on this machine would share its"));
  CHECK(resolve_train_device("cuda:0", 0) == cuda_device(0));  // an explicit GPU is the user's call
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  CHECK_THROWS_WITH(resolve_train_device("cuda:" + std::to_string(count), 0),
                    Catch::Contains("[config] train.device cuda:" + std::to_string(count) +
                                    ": expected a device index below " + std::to_string(count)));
  cuda::set_device(0);
}

TEST_CASE("clipping and unscaling device gradients match the CPU's") {
  TS_REQUIRE_GPU();
  Generator gen(7);
  for (DType dtype : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    std::vector<Tensor> cpu, gpu;
    for (const Shape& shape : std::vector<Shape>{{37, 5}, {1}, {1025}}) {
      Tensor p = zeros(shape, {.dtype = dtype});
      p.set_grad(mul(randn(shape, {}, &gen), 3.0).to(dtype));
      Tensor q = p.to(cuda_device(0));
      q.set_grad(p.grad().to(cuda_device(0)));
      cpu.push_back(p);
      gpu.push_back(q);
    }
    gpu.push_back(zeros({3}, {.dtype = dtype, .device = cuda_device(0)}));  // no gradient
    const double sq = optim::grad_sq_sum(cpu);
    CHECK(optim::grad_sq_sum(gpu) == Approx(sq).epsilon(1e-5));
    const double norm_cpu = optim::clip_grad_norm(cpu, 1.0);
    const double norm_gpu = optim::clip_grad_norm(gpu, 1.0);
    CHECK(norm_gpu == Approx(norm_cpu).epsilon(1e-5));
    CHECK(norm_cpu > 1.0);  // so both were scaled
    for (size_t i = 0; i < cpu.size(); ++i) {
      const Tensor a = cpu[i].grad().to(DType::f32).contiguous();
      const Tensor b = gpu[i].grad().to(kCPU).to(DType::f32).contiguous();
      const float tol = dtype == DType::f32 ? 1e-5f : 1e-2f;
      for (int64_t k = 0; k < a.numel(); ++k)
        CHECK(std::abs(a.data<float>()[k] - b.data<float>()[k]) <=
              tol * (1.0f + std::abs(a.data<float>()[k])));
    }
    CHECK(optim::grad_sq_sum(gpu) == Approx(1.0).epsilon(1e-3));  // clipped to norm 1

    optim::DynamicLossScaler scaler({.init_scale = 4.0});
    CHECK_FALSE(scaler.unscale(gpu));  // finite: no inf found
    CHECK(optim::grad_sq_sum(gpu) == Approx(1.0 / 16).epsilon(1e-3));
    optim::DynamicLossScaler scaler2({.init_scale = 4.0});
    Tensor bad = gpu[2].grad();
    bad.narrow(0, 1000, 1).fill_(std::numeric_limits<double>::infinity());
    CHECK(scaler2.unscale(gpu));  // the inf is found on the device
  }
}
