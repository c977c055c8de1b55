// Multi-rank program run by comm_test.sh: builds a ParallelContext for every layout that fits the
// world size and checks each group's communicator against the pure layout: same members, same
// order, and traffic that stays inside the group.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/factory.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using namespace tessera::parallel;

namespace {

ParallelConfig make(int pipeline, int data, int sequence, int tensor, const char* mode, int depth = 1) {
  ParallelConfig c;
  c.pipeline = pipeline;
  c.data = data;
  c.sequence = sequence;
  c.tensor = {tensor, tensor_mode_from_name(mode), depth};
  return c;
}

// The embedding group: the first and last stage of this rank's pipeline group, none elsewhere;
// its traffic stays between those two ranks.
void check_embedding_group(const ParallelContext& ctx, const ParallelConfig& config, int me) {
  const std::vector<int>* mine = nullptr;
  const std::vector<std::vector<int>> groups = embedding_groups(config);
  for (const auto& g : groups)
    if (std::find(g.begin(), g.end(), me) != g.end()) mine = &g;
  const auto& comm = ctx.embedding_group();
  RANK_CHECK((comm != nullptr) == (mine != nullptr), "embedding group membership in ",
             config.to_json().dump());
  if (!comm) return;
  RANK_CHECK(comm->name() == "embedding" && comm->size() == 2, "embedding group of 2");
  Tensor in = full({1}, me, {.dtype = DType::i32});
  Tensor out = empty({2}, {.dtype = DType::i32});
  comm->all_gather(in, out)->wait();
  for (int i = 0; i < 2; ++i)
    RANK_CHECK(testing::element(out, i) == (*mine)[size_t(i)], "embedding member ", i);
}

void check_context(const ParallelConfig& config, const std::shared_ptr<Communicator>& world) {
  ParallelContext ctx(config, world);
  const int me = world->rank();
  GroupLayout layout = group_layout(config);
  RANK_CHECK(ctx.group_names().size() == layout.size(), config.to_json().dump());
  for (const auto& [name, groups] : layout) {
    const std::vector<int>* mine = nullptr;
    for (const auto& g : groups)
      for (int r : g)
        if (r == me) mine = &g;
    RANK_CHECK(mine != nullptr, "rank in a ", name, " group");
    RANK_CHECK(ctx.group_ranks(name) == *mine, "group_ranks of ", name);
    const auto& comm = ctx.group(name);
    RANK_CHECK(comm->name() == name && comm->size() == int(mine->size()), "group ", name);
    // Gathering world ranks through the group's communicator yields exactly its members, in order.
    Tensor in = full({1}, me, {.dtype = DType::i32});
    Tensor out = empty({int64_t(comm->size())}, {.dtype = DType::i32});
    comm->all_gather(in, out)->wait();
    for (int i = 0; i < comm->size(); ++i)
      RANK_CHECK(testing::element(out, i) == (*mine)[size_t(i)], "member ", i, " of ", name, " in ",
                 config.to_json().dump());
  }
  RANK_CHECK(ctx.coord("pipeline") == me / (config.data * config.sequence * config.tensor.size),
             "pipeline coordinate");
  check_embedding_group(ctx, config, me);
  std::string err;
  try {
    ctx.group("2d_row_typo");
  } catch (const ValueError& e) {
    err = e.what();
  }
  RANK_CHECK(err.find("expected a group of tensor mode") != std::string::npos, err);
}

}  // namespace

int main(int argc, char** argv) {
  return run_distributed(argc, argv, [](const std::shared_ptr<Communicator>& world) {
    const std::vector<ParallelConfig> configs = {
        make(1, 1, 1, 1, "1d"),       make(1, 2, 1, 1, "1d"), make(2, 1, 1, 1, "1d"),
        make(1, 1, 2, 1, "1d"),       make(1, 1, 1, 2, "1d"), make(1, 1, 1, 4, "2d"),
        make(2, 2, 1, 1, "1d"),       make(1, 1, 1, 4, "2.5d", 1), make(1, 1, 1, 8, "2.5d", 2),
        make(1, 1, 1, 8, "3d"),       make(1, 2, 1, 4, "2d"), make(2, 2, 2, 1, "1d"),
        make(2, 1, 1, 4, "1d"),       make(1, 1, 2, 4, "1d"),
    };
    int built = 0;
    for (const ParallelConfig& c : configs) {
      if (c.world_size() != world->size()) continue;
      check_context(c, world);
      ++built;
    }
    RANK_CHECK(built > 0, "some layout fits ", world->size(), " ranks");
    // Four stages: the middle ones belong to no embedding group.
    if (world->size() % 4 == 0) check_context(make(4, world->size() / 4, 1, 1, "1d"), world);
    // A layout for another world size fails the same way on every rank (no hang).
    std::string err;
    try {
      ParallelContext bad(make(1, world->size() + 1, 1, 1, "1d"), world);
    } catch (const ValueError& e) {
      err = e.what();
    }
    RANK_CHECK(err.find(tessera::str_cat("ranks, got ", world->size(), " ranks")) != std::string::npos,
               err);
    world->barrier()->wait();
    if (world->rank() == 0) {
      std::printf("context: %d layouts checked on %d ranks (%lld checks on rank 0)\n", built,
                  world->size(), static_cast<long long>(testing::checks_passed()));
    }
    return 0;
  });
}
