// Per-rank traffic of each collective kind (what the byte counters add up).
#include <catch2/catch.hpp>

#include "parallel/comm/comm_types.h"

using namespace tessera::parallel;

TEST_CASE("collective traffic follows the bandwidth-optimal volumes") {
  auto t = collective_traffic(CommKind::all_reduce, 800, 4, false);
  CHECK(t.sent == 1200);
  CHECK(t.received == 1200);
  t = collective_traffic(CommKind::reduce_scatter, 800, 4, false);
  CHECK(t.sent == 600);
  t = collective_traffic(CommKind::all_gather, 800, 8, false);
  CHECK(t.received == 700);
  t = collective_traffic(CommKind::all_to_all, 64, 2, false);
  CHECK(t.sent == 32);
  CHECK(collective_traffic(CommKind::broadcast, 100, 4, true).sent == 100);
  CHECK(collective_traffic(CommKind::broadcast, 100, 4, false).received == 100);
  CHECK(collective_traffic(CommKind::reduce, 100, 4, true).received == 100);
  CHECK(collective_traffic(CommKind::reduce, 100, 4, false).sent == 100);
  CHECK(collective_traffic(CommKind::send, 100, 4, false).sent == 100);
  CHECK(collective_traffic(CommKind::recv, 100, 4, false).received == 100);
  CHECK(collective_traffic(CommKind::barrier, 0, 4, false).sent == 0);
  CHECK(collective_traffic(CommKind::all_reduce, 800, 1, false).sent == 0);
}

TEST_CASE("comm stats sum and print the kinds that were used") {
  CommStats s;
  s[CommKind::all_reduce] = {2, 80, 80, 80};
  s[CommKind::send] = {1, 10, 10, 0};
  CommCounter total = s.total();
  CHECK(total.calls == 3);
  CHECK(total.bytes_sent == 90);
  CHECK(s.str() == "all_reduce calls=2 payload=80 sent=80 received=80\nsend calls=1 payload=10 sent=10 received=0\n");
  CHECK(std::string(reduce_op_name(ReduceOp::avg)) == "avg");
  CHECK(std::string(comm_kind_name(CommKind::all_to_all)) == "all_to_all");
}
