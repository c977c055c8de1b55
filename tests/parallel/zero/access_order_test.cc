// AccessOrder: the first training window's gathers are recorded, later windows follow them.
#include "parallel/zero/access_order.h"

#include <catch2/catch.hpp>

using namespace tessera::parallel::zero;
using V = std::vector<size_t>;

TEST_CASE("AccessOrder records the first training window and predicts along it") {
  AccessOrder order;
  for (size_t p : V{0, 1, 2, 1, 0}) CHECK(order.on_gather(p, 2).empty());  // recording
  CHECK_FALSE(order.recorded());
  order.end_window(true);
  REQUIRE(order.recorded());
  CHECK(order.order() == V{0, 1, 2, 1, 0});
  CHECK(order.on_gather(0, 2) == V{1, 2});
  CHECK(order.on_gather(1, 2) == V{2, 1});
  CHECK(order.on_gather(2, 1) == V{1});
  CHECK(order.on_gather(1, 3) == V{0});
  CHECK(order.on_gather(0, 3).empty());  // the record's end
  order.end_window(true);                // the record stays the first one
  CHECK(order.order() == V{0, 1, 2, 1, 0});
  CHECK(order.on_gather(0, 0).empty());
}

TEST_CASE("AccessOrder resyncs off the record and skips windows that are not steps") {
  AccessOrder order;
  order.on_gather(7, 1);
  order.end_window(false);  // loading a checkpoint, say: not recorded
  CHECK_FALSE(order.recorded());
  for (size_t p : V{0, 1, 2, 3, 2, 1, 0}) order.on_gather(p, 1);
  order.end_window(true);
  CHECK(order.order() == V{0, 1, 2, 3, 2, 1, 0});
  // An evaluation's forward, then training's forward in the same window: 0 is found again from
  // the record's start.
  CHECK(order.on_gather(0, 1) == V{1});
  CHECK(order.on_gather(1, 1) == V{2});
  CHECK(order.on_gather(0, 1).empty());     // 0's next place is the record's last
  CHECK(order.on_gather(1, 2) == V{2, 3});  // wrapped around to 1's first place
  CHECK(order.on_gather(9, 1).empty());     // not in the record: lost until the window ends
  CHECK(order.on_gather(2, 1).empty());
  order.end_window(false);
  CHECK(order.on_gather(0, 1) == V{1});
}
