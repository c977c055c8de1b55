// Point to point, batched transfers, overlapping works, split groups, byte counters, argument
// errors and the configuration check, on however many ranks the job has.
#include <algorithm>
#include <thread>
#include <vector>

#include "core/factory.h"
#include "parallel/comm/config_check.h"
#include "tests/parallel/collective_checks.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::testing {
namespace {

void check_point_to_point(Communicator& comm) {
  const int p = comm.size(), me = comm.rank();
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  // Two messages to the next rank with different tags, received in the opposite order: tags match.
  Tensor a = full({5}, me * 10 + 1), b = full({3}, me * 10 + 2);
  Tensor ra = empty({5}), rb = empty({3});
  WorkPtr s1 = comm.send(a, next, 1), s2 = comm.send(b, next, 2);
  WorkPtr r2 = comm.recv(rb, prev, 2), r1 = comm.recv(ra, prev, 1);
  r2->wait();
  r1->wait();
  s1->wait();
  s2->wait();
  for (int64_t i = 0; i < 5; ++i) RANK_CHECK(element(ra, i) == prev * 10 + 1, "recv tag 1 i=", i);
  for (int64_t i = 0; i < 3; ++i) RANK_CHECK(element(rb, i) == prev * 10 + 2, "recv tag 2 i=", i);

  // A batch exchanging with both neighbours at once (the pipeline pattern).
  Tensor to_next = full({4}, me, {.dtype = DType::i64}), to_prev = full({4}, -me, {.dtype = DType::i64});
  Tensor from_prev = empty({4}, {.dtype = DType::i64}), from_next = empty({4}, {.dtype = DType::i64});
  comm.batch_send_recv({{P2POp::Kind::send, to_next, next, 7},
                        {P2POp::Kind::send, to_prev, prev, 8},
                        {P2POp::Kind::recv, from_prev, prev, 7},
                        {P2POp::Kind::recv, from_next, next, 8}})
      ->wait();
  RANK_CHECK(element(from_prev, 3) == prev, "batch from prev");
  RANK_CHECK(element(from_next, 0) == -next, "batch from next");

  // A work in flight holds its tensors (a call that finishes inside the communicator only
  // borrows them), so the caller may drop its handles before wait().
  Tensor box = empty({6});
  WorkPtr r = comm.recv(box, prev, 9);
  RANK_CHECK(!box.is_sole_owner(), "a pending recv holds its tensor");
  WorkPtr s = comm.send(full({6}, me + 0.5), next, 9);  // the temporary is gone after this line
  s->wait();
  r->wait();
  RANK_CHECK(box.is_sole_owner(), "a finished recv releases its tensor");
  RANK_CHECK(element(box, 5) == prev + 0.5, "recv from a dropped send buffer");
}

void check_overlap(Communicator& comm) {
  const int p = comm.size(), me = comm.rank();
  std::vector<Tensor> ts;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 4; ++k) {
    ts.push_back(full({1000 + k}, me + k));
    works.push_back(comm.all_reduce(ts.back()));
  }
  for (int k = 3; k >= 0; --k) works[size_t(k)]->wait();  // waited in reverse order
  const double ranks_sum = p * (p - 1) / 2.0;
  for (int k = 0; k < 4; ++k) {
    RANK_CHECK(works[size_t(k)]->is_completed(), "completed after wait");
    RANK_CHECK(element(ts[size_t(k)], 999) == ranks_sum + p * k, "overlapped all_reduce ", k);
  }
  // is_completed() alone drives a work to completion.
  Tensor t = full({17}, 1.0);
  WorkPtr w = comm.all_reduce(t, ReduceOp::max);
  while (!w->is_completed()) {
  }
  RANK_CHECK(element(t, 16) == 1.0, "polled all_reduce");
  comm.barrier()->wait();
}

void check_split(Communicator& world) {
  const int p = world.size(), me = world.rank();
  // Even and odd ranks, ordered by descending world rank (key = -rank).
  auto sub = world.split(me % 2, -me);
  RANK_CHECK(sub != nullptr, "split returns a group");
  std::vector<int> members;
  for (int r = p - 1; r >= 0; --r)
    if (r % 2 == me % 2) members.push_back(r);
  RANK_CHECK(sub->size() == int(members.size()), "split size");
  int want_rank = int(std::find(members.begin(), members.end(), me) - members.begin());
  RANK_CHECK(sub->rank() == want_rank, "split rank ", sub->rank(), " want ", want_rank);
  RANK_CHECK(sub->name() == str_cat("world/", me % 2), "split name ", sub->name());
  Tensor t = full({3}, me, {.dtype = DType::i32});
  sub->all_reduce(t)->wait();
  int want = 0;
  for (int r : members) want += r;
  RANK_CHECK(element(t, 2) == want, "all_reduce within the split group");
  // The group's rank 0 is the highest world rank: broadcast proves the order.
  Tensor b = full({2}, me, {.dtype = DType::i64});
  sub->broadcast(b, 0)->wait();
  RANK_CHECK(element(b, 1) == members[0], "broadcast from the split group's rank 0");

  // A negative color joins nothing; the rest form one named group.
  auto rest = world.split(me == 0 && p > 1 ? -1 : 0, me, "rest");
  if (me == 0 && p > 1) {
    RANK_CHECK(rest == nullptr, "negative color gives no group");
  } else {
    RANK_CHECK(rest != nullptr && rest->size() == (p > 1 ? p - 1 : 1) && rest->name() == "rest",
               "rest group");
    auto single = rest->split(rest->rank(), 0);  // nested split into singletons
    Tensor s = full({2}, 5.0);
    single->all_reduce(s)->wait();
    RANK_CHECK(single->size() == 1 && element(s, 0) == 5.0, "singleton group");
  }
}

void check_stats(Communicator& comm) {
  const int64_t p = comm.size();
  comm.reset_stats();
  Tensor t = zeros({1000});
  comm.all_reduce(t)->wait();
  comm.all_reduce(t, ReduceOp::max)->wait();
  Tensor in = zeros({10}, {.dtype = DType::f16}), out = zeros({10 * p}, {.dtype = DType::f16});
  comm.all_gather(in, out)->wait();
  comm.barrier()->wait();
  CommStats s = comm.stats();
  RANK_CHECK(s[CommKind::all_reduce].calls == 2, "all_reduce calls");
  RANK_CHECK(s[CommKind::all_reduce].payload_bytes == 8000, "all_reduce payload");
  RANK_CHECK(s[CommKind::all_reduce].bytes_sent == 2 * (2 * 4000 * (p - 1) / p), "all_reduce sent");
  RANK_CHECK(s[CommKind::all_gather].payload_bytes == 20 * p, "all_gather payload");
  RANK_CHECK(s[CommKind::all_gather].bytes_received == 20 * (p - 1), "all_gather received");
  RANK_CHECK(s[CommKind::barrier].calls == 1, "barrier calls");
  RANK_CHECK(s[CommKind::send].calls == 0, "no sends");
  RANK_CHECK(s.total().calls == 4, "total calls");

  // Calls from another thread (ZeRO's step worker) count too, and a reset clears them.
  std::thread other([&] { comm.all_reduce(t)->wait(); });
  other.join();
  comm.all_reduce(t)->wait();
  s = comm.stats();
  RANK_CHECK(s[CommKind::all_reduce].calls == 4, "all_reduce calls from two threads");
  RANK_CHECK(s[CommKind::all_reduce].payload_bytes == 16000, "all_reduce payload, two threads");
  comm.reset_stats();
  RANK_CHECK(comm.stats().total().calls == 0, "reset");
  std::thread again([&] { comm.barrier()->wait(); });
  again.join();
  s = comm.stats();
  RANK_CHECK(s.total().calls == 1 && s[CommKind::barrier].calls == 1, "another thread after reset");
  comm.reset_stats();
}

void check_argument_errors(Communicator& comm) {
  const int p = comm.size();
  Tensor m = zeros({4, 6});
  RANK_CHECK(contains(error_of([&] { comm.all_reduce(m.transpose(0, 1)); }),
                      "[all_reduce] expected a contiguous tensor, got (6, 4) f32 cpu"),
             "non-contiguous");
  RANK_CHECK(contains(error_of([&] { comm.all_gather(zeros({3}), zeros({3 * p + 1})); }),
                      "[all_gather] expected an output of group size"),
             "all_gather size");
  RANK_CHECK(contains(error_of([&] { comm.all_gather(zeros({3}), zeros({3 * p}, {.dtype = DType::f16})); }),
                      "[all_gather] expected input and output of the same dtype"),
             "all_gather dtype");
  RANK_CHECK(contains(error_of([&] { comm.all_reduce(zeros({3}, {.dtype = DType::i32}), ReduceOp::avg); }),
                      "[all_reduce] expected a floating dtype for avg, got (3) i32 cpu"),
             "avg on ints");
  RANK_CHECK(contains(error_of([&] { comm.broadcast(zeros({3}), p); }),
                      str_cat("[broadcast] expected root in [0, ", p, "), got ", p)),
             "root range");
  RANK_CHECK(contains(error_of([&] { comm.send(zeros({3}), 0, -1); }), "[send] expected a tag"),
             "negative tag");
  RANK_CHECK(contains(error_of([&] { comm.reduce_scatter(zeros({3 * p + 1}), zeros({3})); }),
                      "[reduce_scatter] expected an input of group size"),
             "reduce_scatter size");
  RANK_CHECK(contains(error_of([&] { comm.all_to_all(zeros({2 * p + 1}), zeros({2 * p + 2})); }),
                      "[all_to_all] expected input and output with the same numel, a multiple of"),
             "all_to_all size");
  RANK_CHECK(contains(error_of([&] { comm.all_reduce(Tensor()); }), "expected a defined tensor"),
             "undefined tensor");
  RANK_CHECK(contains(error_of([&] { comm.set_timeout_s(0); }), "expected a positive timeout"),
             "timeout");
}

}  // namespace

void run_feature_checks(Communicator& world) {
  check_point_to_point(world);
  check_overlap(world);
  check_split(world);
  check_stats(world);
  check_argument_errors(world);
  check_same_config(world, "{\"model\": \"gpt\"}");
  RANK_CHECK(config_hash("a") != config_hash("b") && config_hash("") == 0xcbf29ce484222325ull,
             "config hash");
}

}  // namespace tessera::parallel::testing
