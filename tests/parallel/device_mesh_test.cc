// DeviceMesh: coordinates, ranks and groups of a named grid, without MPI.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "parallel/mesh/device_mesh.h"

using namespace tessera;
using namespace tessera::parallel;

TEST_CASE("mesh maps ranks to coordinates with the last axis innermost") {
  DeviceMesh mesh({{"pipeline", 2}, {"data", 3}, {"tensor", 4}});
  CHECK(mesh.size() == 24);
  CHECK(mesh.ndim() == 3);
  CHECK(mesh.coords_of(0) == std::vector<int>{0, 0, 0});
  CHECK(mesh.coords_of(1) == std::vector<int>{0, 0, 1});
  CHECK(mesh.coords_of(4) == std::vector<int>{0, 1, 0});
  CHECK(mesh.coords_of(23) == std::vector<int>{1, 2, 3});
  CHECK(mesh.coords_of(13) == std::vector<int>{1, 0, 1});
  for (int r = 0; r < mesh.size(); ++r) CHECK(mesh.rank_of(mesh.coords_of(r)) == r);
  CHECK(mesh.coord(13, "data") == 0);
  CHECK(mesh.coord(13, "pipeline") == 1);
  CHECK(mesh.axis_size("data") == 3);
  CHECK(mesh.axis_index("tensor") == 2);
  CHECK(mesh.has_axis("data"));
  CHECK_FALSE(mesh.has_axis("sequence"));
  CHECK(mesh.str() == "(pipeline=2, data=3, tensor=4)");
}

TEST_CASE("mesh groups share every coordinate but the given axes") {
  DeviceMesh mesh({{"pipeline", 2}, {"data", 3}, {"tensor", 4}});
  CHECK(mesh.group_ranks(13, {"tensor"}) == std::vector<int>{12, 13, 14, 15});
  CHECK(mesh.group_ranks(13, {"data"}) == std::vector<int>{13, 17, 21});
  CHECK(mesh.group_ranks(13, {"pipeline"}) == std::vector<int>{1, 13});
  CHECK(mesh.group_ranks(5, {"data", "tensor"}) ==
        std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // Axis order in the argument does not matter; members stay in increasing rank order.
  CHECK(mesh.group_ranks(6, {"tensor", "pipeline"}) ==
        std::vector<int>{4, 5, 6, 7, 16, 17, 18, 19});
  CHECK(mesh.group_ranks(7, {}) == std::vector<int>{7});
  CHECK(mesh.index_in_group(17, {"data"}) == 1);
  CHECK(mesh.index_in_group(15, {"tensor"}) == 3);

  auto groups = mesh.all_groups({"data"});
  REQUIRE(groups.size() == 8);
  CHECK(groups[0] == std::vector<int>{0, 4, 8});
  CHECK(groups[4] == std::vector<int>{12, 16, 20});
  std::vector<int> owner(24, -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int r : groups[g]) {
      CHECK(owner[size_t(r)] == -1);  // a partition: no rank in two groups
      owner[size_t(r)] = int(g);
    }
  }
  for (int r = 0; r < 24; ++r) CHECK(mesh.group_index(r, {"data"}) == owner[size_t(r)]);
}

TEST_CASE("mesh rejects bad axes, ranks and coordinates") {
  CHECK_THROWS_WITH(DeviceMesh({{"data", 2}, {"data", 2}}),
                    Catch::Contains("[mesh] expected unique axis names, got 'data' twice"));
  CHECK_THROWS_WITH(DeviceMesh({{"data", 0}}),
                    Catch::Contains("expected axis 'data' to have size >= 1, got 0"));
  DeviceMesh mesh({{"data", 2}, {"tensor", 2}});
  CHECK_THROWS_WITH(mesh.coords_of(4), Catch::Contains("expected a rank in [0, 4)"));
  CHECK_THROWS_WITH(mesh.rank_of({0, 2}), Catch::Contains("expected coordinate 1 ('tensor') in [0, 2), got 2"));
  CHECK_THROWS_WITH(mesh.rank_of({0}), Catch::Contains("expected 2 coordinates"));
  CHECK_THROWS_WITH(mesh.group_ranks(0, {"pipe"}),
                    Catch::Contains("expected an axis of (data=2, tensor=2), got 'pipe'"));
  CHECK_THROWS_AS(mesh.group_ranks(0, {"data", "data"}), ValueError);
}

TEST_CASE("an empty mesh is one rank") {
  DeviceMesh mesh({});
  CHECK(mesh.size() == 1);
  CHECK(mesh.coords_of(0).empty());
  CHECK(mesh.group_ranks(0, {}) == std::vector<int>{0});
}
