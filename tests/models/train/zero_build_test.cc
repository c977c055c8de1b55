// ZeRO stage 3's sharded build (models/train/zero_build.h): each rank's masters equal the pieces
// of the whole build's parameters bit for bit (f32 and bf16, a tied parameter registered twice, a
// layer built and dropped, registration order unlike the named order), the parameters come out
// released and unreadable until stage 3 takes them, the generator ends where one build leaves it,
// no build holds the whole model, and a build that changes between its runs is refused.
#include "models/train/zero_build.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "core/allocator.h"
#include "core/factory.h"
#include "models/nn/linear.h"
#include "optim/param_math.h"
#include "parallel/zero/sharded_optimizer.h"

using namespace tessera;

namespace {

// Children register before the parent's own parameter (the tie), so the named order (own first)
// is not the registration order; the dropped layer draws counters and registers, as a pipeline
// stage's skipped layers do.
struct Net : nn::Module {
  Net(Generator& gen, int64_t width) {
    { nn::Linear dropped({.in_features = 3, .out_features = 5}, gen); }
    a = register_module("a", std::make_shared<nn::Linear>(
                                 nn::LinearSpec{.in_features = 6, .out_features = width}, gen));
    b = register_module("b", std::make_shared<nn::Linear>(
                                 nn::LinearSpec{.in_features = width, .out_features = 7,
                                                .init = nn::LinearInit::uniform},
                                 gen));
    tied = register_parameter("tied", a->weight());
  }
  std::shared_ptr<nn::Linear> a, b;
  Tensor tied;
};

std::vector<optim::ParamGroup> groups_of(const nn::Module& m) {
  return optim::param_groups_with_decay(m.named_parameters(), 0.1);
}

// Rank `rank`'s f32 masters cut from a whole build (what ShardedOptimizer takes from it).
std::vector<Tensor> whole_masters(const nn::Module& model, int ranks, int rank, DType dtype) {
  std::vector<Tensor> params;
  for (const auto& entry : model.named_parameters()) params.push_back(entry.second);
  const parallel::zero::ZeroPlan plan =
      parallel::zero::plan_parameter_groups(params, groups_of(model), ranks);
  std::vector<Tensor> out;
  for (const parallel::zero::ZeroGroupPlan& g : plan.groups) {
    Tensor shard = zeros({g.shard_numel});
    for (const parallel::zero::ShardPiece& pc : g.pieces(rank)) {
      const Tensor p = params[pc.param].detach().to(dtype).to(DType::f32);
      shard.narrow(0, pc.shard_offset, pc.numel)
          .copy_(p.reshape({p.numel()}).narrow(0, pc.param_offset, pc.numel));
    }
    out.push_back(shard);
  }
  return out;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     size_t(a.numel()) * a.itemsize()) == 0;
}

}  // namespace

TEST_CASE("the sharded build's masters are the whole build's pieces, bit for bit") {
  const DType dtype = GENERATE(DType::f32, DType::bf16);
  const int ranks = 3;  // shard boundaries fall inside parameters
  Generator whole_gen(7);
  Net whole(whole_gen, 9);
  for (int rank = 0; rank < ranks; ++rank) {
    CAPTURE(dtype_name(dtype), rank);
    Generator gen(7);
    std::unique_ptr<Net> net;
    const std::vector<Tensor> masters = train::build_sharded(
        {.dtype = dtype, .groups = groups_of, .ranks = ranks, .rank = rank,
         .generators = {&gen}},
        [&]() -> const nn::Module& {
          net = std::make_unique<Net>(gen, 9);
          return *net;
        });
    const std::vector<Tensor> expected = whole_masters(whole, ranks, rank, dtype);
    REQUIRE(masters.size() == expected.size());
    for (size_t g = 0; g < masters.size(); ++g) CHECK(bit_equal(masters[g], expected[g]));
    CHECK(gen.offset() == whole_gen.offset());
    CHECK(net->tied.is_same(net->a->weight()));
    for (const auto& [name, p] : net->named_parameters()) {
      CAPTURE(name);
      CHECK(p.dtype() == dtype);
      CHECK(p.storage()->released());
    }
    // Nothing may read a parameter before stage 3 installs its gather.
    CHECK_THROWS_WITH(net->b->bias().contiguous().data_ptr(),
                      Catch::Contains("read before ZeRO stage 3 took it over"));
  }
}

// Sixteen equal layers: the whole model is sixteen times its largest parameter.
struct Stack : nn::Module {
  explicit Stack(Generator& gen) {
    for (int i = 0; i < 16; ++i)
      register_module("l" + std::to_string(i),
                      std::make_shared<nn::Linear>(
                          nn::LinearSpec{.in_features = 256, .out_features = 256, .bias = false},
                          gen));
  }
};

TEST_CASE("the sharded build never holds the whole model") {
  const int64_t start = memory_stats(kCPU).current_bytes;
  reset_peak_memory(kCPU);
  Generator gen(3);
  std::unique_ptr<Stack> net;
  const int ranks = 4;
  const std::vector<Tensor> masters = train::build_sharded(
      {.groups = groups_of, .ranks = ranks, .rank = 1, .generators = {&gen}},
      [&]() -> const nn::Module& {
        net.reset();
        net = std::make_unique<Stack>(gen);
        return *net;
      });
  const int64_t whole = 16 * 256 * 256 * 4, largest = 256 * 256 * 4;
  const int64_t peak = memory_stats(kCPU).peak_bytes - start;
  CAPTURE(whole, largest, peak);
  // This rank's shards (a quarter of the model, and the empty no-decay group's padding) and the
  // one parameter being drawn (in place): well under the whole model (a whole build peaks at all
  // of it).
  CHECK(peak <= whole / ranks + largest + 1024);
  CHECK(peak < whole / 2);
}

TEST_CASE("a build that changes between its probe and its run is refused") {
  Generator gen(5);
  std::unique_ptr<Net> net;
  int runs = 0;
  CHECK_THROWS_WITH(train::build_sharded({.groups = groups_of, .ranks = 2, .rank = 0},
                                         [&]() -> const nn::Module& {
                                           net = std::make_unique<Net>(gen, runs++ ? 8 : 9);
                                           return *net;
                                         }),
                    Catch::Contains("in its probe"));
}
