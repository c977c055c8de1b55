// Pipeline schedules: literal lists for small cases, then every schedule over stages 2..8,
// micro-batches 1..16 and virtual stages 1..4 for order, matching (by the simulator), memory in
// flight and bubble; the simulator's own errors on broken lists.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "parallel/pipeline/schedule.h"

using namespace tessera;
using namespace tessera::parallel::pipeline;

using Lists = std::vector<std::vector<Action>>;

namespace {

ScheduleSpec make(ScheduleKind kind, int stages, int micro_batches, int virtual_stages = 1) {
  return {kind, stages, virtual_stages, micro_batches};
}

Lists all_lists(const ScheduleSpec& spec) {
  Lists lists;
  for (int r = 0; r < spec.stages; ++r) lists.push_back(schedule_actions(spec, r));
  return lists;
}

bool is_compute(ActionType t) {
  return t == ActionType::forward || t == ActionType::backward || t == ActionType::backward_input ||
         t == ActionType::backward_weight;
}

// The compute actions alone: "F3" forward, "B3" full backward, "I3" backward_input, "W3"
// backward_weight of micro-batch 3; "F(1,3)" etc. with the chunk first when there are chunks.
std::string compute_order(const ScheduleSpec& spec, int rank) {
  std::string out;
  for (const Action& a : schedule_actions(spec, rank)) {
    if (!is_compute(a.type)) continue;
    const char* letter = a.type == ActionType::forward          ? "F"
                         : a.type == ActionType::backward       ? "B"
                         : a.type == ActionType::backward_input ? "I"
                                                                : "W";
    out += out.empty() ? "" : " ";
    out += spec.virtual_stages > 1 ? str_cat(letter, "(", a.chunk, ",", a.micro_batch, ")")
                                   : str_cat(letter, a.micro_batch);
  }
  return out;
}

// Every schedule the issue names: stages 2..8, micro-batches 1..16, virtual stages 1..4 for
// interleaved (micro-batches a multiple of the stages, as it requires).
std::vector<ScheduleSpec> every_spec() {
  std::vector<ScheduleSpec> out;
  for (int P = 2; P <= 8; ++P)
    for (int M = 1; M <= 16; ++M) {
      for (ScheduleKind k :
           {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zero_bubble})
        out.push_back(make(k, P, M));
      if (M % P == 0)
        for (int v = 1; v <= 4; ++v) out.push_back(make(ScheduleKind::interleaved, P, M, v));
    }
  return out;
}

std::string describe(const ScheduleSpec& s) {
  return str_cat(schedule_name(s.kind), " P=", s.stages, " M=", s.micro_batches,
                 " v=", s.virtual_stages);
}

// The structure schedule.h promises of one rank's list; "" when it holds, else what broke.
std::string structure_error(const ScheduleSpec& spec, int rank, const std::vector<Action>& list) {
  const int P = spec.stages, M = spec.micro_batches, v = spec.virtual_stages, last = P * v - 1;
  const bool split = spec.kind == ScheduleKind::zero_bubble;
  const ActionType bwd = split ? ActionType::backward_input : ActionType::backward;
  // Each compute exactly once per (chunk, micro-batch); every transfer next to its compute.
  std::vector<int> forwards(size_t(v * M)), backwards(size_t(v * M)), weights(size_t(v * M));
  size_t transfers = 0, expected_transfers = 0;
  int last_backward = -1, next_backward_mb[4] = {0, 0, 0, 0}, next_weight_mb = 0;
  int last_forward_index = -1, first_weight_index = -1, last_b_index = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    const size_t id = size_t(a.chunk * M + a.micro_batch);
    const int stage = a.chunk * P + rank;
    const auto at = [&](size_t j) -> const Action* { return j < list.size() ? &list[j] : nullptr; };
    const auto is = [&](const Action* x, ActionType t, int peer_stage) {
      return x && x->type == t && x->chunk == a.chunk && x->micro_batch == a.micro_batch &&
             x->peer == peer_stage % P;
    };
    if (!is_compute(a.type)) {
      ++transfers;
      continue;
    }
    if (a.peer != -1) return str_cat("compute with a peer at ", i);
    if (a.type == ActionType::forward) {
      ++forwards[id];
      last_forward_index = int(i);
      if (stage > 0 && !(i > 0 && is(at(i - 1), ActionType::recv_activation, stage - 1)))
        return str_cat("forward at ", i, " without its recv_activation just before");
      if (stage < last && !is(at(i + 1), ActionType::send_activation, stage + 1))
        return str_cat("forward at ", i, " without its send_activation just after");
      expected_transfers += (stage > 0) + (stage < last);
    } else if (a.type == bwd) {
      ++backwards[id];
      last_b_index = int(i);
      if (forwards[id] != 1) return str_cat("backward at ", i, " before its forward");
      if (stage < last && !(i > 0 && is(at(i - 1), ActionType::recv_gradient, stage + 1)))
        return str_cat("backward at ", i, " without its recv_gradient just before");
      if (stage > 0 && !is(at(i + 1), ActionType::send_gradient, stage - 1))
        return str_cat("backward at ", i, " without its send_gradient just after");
      expected_transfers += (stage > 0) + (stage < last);
      // Micro-batch order within a chunk (the same gradient sums under every schedule).
      if (a.micro_batch != next_backward_mb[a.chunk]++)
        return str_cat("backward out of order at ", i);
      last_backward = int(i);
    } else if (split && a.type == ActionType::backward_weight) {
      ++weights[id];
      if (first_weight_index < 0) first_weight_index = int(i);
      if (backwards[id] != 1) return str_cat("W at ", i, " before its B");
      if (a.micro_batch != next_weight_mb++) return str_cat("W out of order at ", i);
    } else {
      return str_cat("unexpected ", to_string(a), " at ", i);
    }
  }
  for (size_t id = 0; id < forwards.size(); ++id)
    if (forwards[id] != 1 || backwards[id] != 1 || weights[id] != (split ? 1 : 0))
      return str_cat("chunk ", id / size_t(M), " micro-batch ", id % size_t(M), ": ", forwards[id],
                     " forwards, ", backwards[id], " backwards, ", weights[id], " Ws");
  if (transfers != expected_transfers) return "transfers not next to their computes";
  if (last_backward < 0) return "no backward";
  if (split) {
    // Deferred, but bounded whatever M (ZB-H1): micro-batches forwarded and not yet through W
    // never exceed 1F1B's in-flight count plus `rank`, at most P, 1F1B's peak; all done by the end.
    const int bound = std::min(P - rank, M) + rank;
    int forwarded = 0, weighted = 0;
    for (const Action& a : list) {
      forwarded += a.type == ActionType::forward;
      weighted += a.type == ActionType::backward_weight;
      if (forwarded - weighted > bound)
        return str_cat(forwarded - weighted, " micro-batches waiting for W, above ", bound);
    }
    (void)first_weight_index;
    (void)last_forward_index;
    for (size_t i = size_t(last_b_index) + 1; i < list.size(); ++i)  // B's own send aside
      if (is_compute(list[i].type) && list[i].type != ActionType::backward_weight)
        return "a compute other than W after the last B";
    if (list.back().type != ActionType::backward_weight) return "the list does not end with W";
  }
  return "";
}

// Peak micro-batch chunks forwarded and not yet through B (or the full backward).
int expected_peak(const ScheduleSpec& s, int rank) {
  const int P = s.stages, M = s.micro_batches, v = s.virtual_stages;
  switch (s.kind) {
    case ScheduleKind::gpipe:
      return M;
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::zero_bubble:
      return std::min(P - rank, M);
    case ScheduleKind::interleaved:
      return std::min(v * M, (v - 1) * P + 2 * (P - rank - 1) + 1);
  }
  return -1;
}

double idle(const SimulationResult& r, int rank) { return r.makespan - r.busy[size_t(rank)]; }

}  // namespace

TEST_CASE("schedule names round-trip; an unknown one lists the known") {
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                         ScheduleKind::zero_bubble})
    CHECK(schedule_kind(schedule_name(k)) == k);
  CHECK(std::string(schedule_name(ScheduleKind::one_f_one_b)) == "1f1b");
  CHECK_THROWS_AS(schedule_kind("pipedream"), ValueError);
  CHECK_THROWS_WITH(schedule_kind("pipedream"),
                    Catch::Contains("gpipe, 1f1b, interleaved or zero_bubble, got 'pipedream'"));
}

TEST_CASE("check_schedule refuses schedules that cannot run, naming the numbers") {
  using K = ScheduleKind;
  CHECK_NOTHROW(check_schedule(make(K::interleaved, 4, 8, 2)));
  CHECK_NOTHROW(check_schedule(make(K::one_f_one_b, 1, 1)));
  CHECK_THROWS_WITH(check_schedule(make(K::gpipe, 0, 4)),
                    Catch::Contains("expected at least 1 pipeline stage, got 0"));
  CHECK_THROWS_WITH(check_schedule(make(K::one_f_one_b, 4, 0)),
                    Catch::Contains("expected at least 1 micro-batch, got 0"));
  CHECK_THROWS_WITH(check_schedule(make(K::interleaved, 4, 8, 0)),
                    Catch::Contains("expected at least 1 virtual stage, got 0"));
  CHECK_THROWS_WITH(
      check_schedule(make(K::one_f_one_b, 4, 8, 2)),
      Catch::Contains("expected 1 virtual stage for schedule 1f1b") && Catch::Contains("got 2"));
  CHECK_THROWS_WITH(check_schedule(make(K::interleaved, 4, 6, 2)), Catch::Contains("M = 6") &&
                                                                       Catch::Contains("P = 4") &&
                                                                       Catch::Contains("Megatron"));
  CHECK_THROWS_AS(check_schedule(make(K::zero_bubble, 4, 8, 3)), ValueError);
  CHECK_THROWS_WITH(schedule_actions(make(K::gpipe, 4, 8), 4),
                    Catch::Contains("expected a pipeline rank in 0..3, got 4"));
  CHECK_THROWS_WITH(simulate(make(K::interleaved, 3, 4, 2)), Catch::Contains("M = 4"));
}

TEST_CASE("small schedules, written out") {
  using K = ScheduleKind;
  CHECK(compute_order(make(K::gpipe, 2, 3), 0) == "F0 F1 F2 B0 B1 B2");
  CHECK(compute_order(make(K::gpipe, 2, 3), 1) == "F0 F1 F2 B0 B1 B2");
  // 1F1B: P - r - 1 warm-up forwards, then alternating, then the cool-down.
  CHECK(compute_order(make(K::one_f_one_b, 4, 6), 0) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  CHECK(compute_order(make(K::one_f_one_b, 4, 6), 2) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  CHECK(compute_order(make(K::one_f_one_b, 4, 6), 3) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  CHECK(compute_order(make(K::one_f_one_b, 4, 2), 0) == "F0 F1 B0 B1");
  // ZB-H1: 1F1B with B; rank r holds at most r Ws beyond its P - r in flight (the oldest runs
  // before a forward that would exceed it), one W before each cool-down B, the rest at the end.
  CHECK(compute_order(make(K::zero_bubble, 4, 6), 0) ==
        "F0 F1 F2 F3 I0 W0 F4 I1 W1 F5 I2 W2 I3 W3 I4 W4 I5 W5");
  CHECK(compute_order(make(K::zero_bubble, 4, 6), 2) ==
        "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 I5 W3 W4 W5");
  CHECK(compute_order(make(K::zero_bubble, 4, 6), 3) ==
        "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 W3 W4 W5");
  CHECK(compute_order(make(K::zero_bubble, 4, 2), 0) == "F0 F1 I0 W0 I1 W1");
  // Interleaved, P = 2, v = 2, M = 4: (chunk, micro-batch); groups of P micro-batches go through
  // chunk 0 then chunk 1; rank 0 warms up with (v - 1) P + 2 (P - 1) = 4 forwards, rank 1 with 2.
  const ScheduleSpec il = make(K::interleaved, 2, 4, 2);
  CHECK(compute_order(il, 0) ==
        "F(0,0) F(0,1) F(1,0) F(1,1) F(0,2) B(1,0) F(0,3) B(1,1) F(1,2) B(0,0) F(1,3) B(0,1) "
        "B(1,2) B(1,3) B(0,2) B(0,3)");
  CHECK(compute_order(il, 1) ==
        "F(0,0) F(0,1) F(1,0) B(1,0) F(1,1) B(1,1) F(0,2) B(0,0) F(0,3) B(0,1) F(1,2) B(1,2) "
        "F(1,3) B(1,3) B(0,2) B(0,3)");
}

TEST_CASE("transfers sit next to their computes, with the neighbouring stages' ranks as peers") {
  using T = ActionType;
  const ScheduleSpec spec = make(ScheduleKind::one_f_one_b, 2, 2);
  CHECK(schedule_actions(spec, 0) == std::vector<Action>{{T::forward, 0, 0, -1},
                                                         {T::send_activation, 0, 0, 1},
                                                         {T::forward, 1, 0, -1},
                                                         {T::send_activation, 1, 0, 1},
                                                         {T::recv_gradient, 0, 0, 1},
                                                         {T::backward, 0, 0, -1},
                                                         {T::recv_gradient, 1, 0, 1},
                                                         {T::backward, 1, 0, -1}});
  CHECK(schedule_actions(spec, 1) == std::vector<Action>{{T::recv_activation, 0, 0, 0},
                                                         {T::forward, 0, 0, -1},
                                                         {T::backward, 0, 0, -1},
                                                         {T::send_gradient, 0, 0, 0},
                                                         {T::recv_activation, 1, 0, 0},
                                                         {T::forward, 1, 0, -1},
                                                         {T::backward, 1, 0, -1},
                                                         {T::send_gradient, 1, 0, 0}});
  // Interleaved: the last rank's chunk 0 (stage 1) feeds rank 0's chunk 1 (stage 2).
  const std::vector<Action> r1 = schedule_actions(make(ScheduleKind::interleaved, 2, 2, 2), 1);
  const std::vector<Action> r0 = schedule_actions(make(ScheduleKind::interleaved, 2, 2, 2), 0);
  const auto has = [](const std::vector<Action>& l, const Action& a) {
    return std::find(l.begin(), l.end(), a) != l.end();
  };
  CHECK(has(r1, {T::send_activation, 1, 0, 0}));
  CHECK(has(r0, {T::recv_activation, 1, 1, 1}));
  CHECK(has(r0, {T::send_gradient, 1, 1, 1}));
  CHECK(has(r1, {T::recv_gradient, 1, 0, 0}));
  CHECK_FALSE(has(r0, {T::recv_activation, 0, 0, 1}));  // stage 0 reads its own inputs
  CHECK(to_string({T::recv_gradient, 3, 1, 2}) == "recv_gradient(chunk 1, micro-batch 3, peer 2)");
  CHECK(to_string({T::forward, 0, 0, -1}) == "forward(chunk 0, micro-batch 0)");
}

TEST_CASE("every schedule over stages 2..8, micro-batches 1..16, virtual stages 1..4") {
  const SimulationCosts unit{1, 2, 1, 1};
  int checked = 0;
  for (const ScheduleSpec& spec : every_spec()) {
    INFO(describe(spec));
    const int P = spec.stages, M = spec.micro_batches, v = spec.virtual_stages;
    const Lists lists = all_lists(spec);
    for (int r = 0; r < P; ++r) {
      INFO("rank " << r);
      CHECK(structure_error(spec, r, lists[size_t(r)]) == "");
    }
    // Matching and no deadlock: the simulator runs every list to the end.
    SimulationResult res;
    REQUIRE_NOTHROW(res = simulate_lists(spec, lists, unit));
    bool peaks_ok = true, bubble_ok = true;
    for (int r = 0; r < P; ++r) {
      peaks_ok = peaks_ok && res.peak_in_flight[size_t(r)] == expected_peak(spec, r);
      const double b = res.bubble_fraction[size_t(r)];
      if (spec.kind == ScheduleKind::gpipe || spec.kind == ScheduleKind::one_f_one_b)
        bubble_ok = bubble_ok && std::abs(b - double(P - 1) / (M + P - 1)) < 1e-9;
      if (spec.kind == ScheduleKind::interleaved)  // (P - 1) / (v M + P - 1) for equal chunks
        bubble_ok = bubble_ok && std::abs(b - double(P - 1) / (v * M + P - 1)) < 1e-9;
      if (spec.kind == ScheduleKind::zero_bubble && M >= P)  // F = B = W = 1: idle P - 1 each
        bubble_ok = bubble_ok && std::abs(res.makespan - (3 * M + P - 1)) < 1e-9 &&
                    std::abs(idle(res, r) - (P - 1)) < 1e-9;
    }
    CHECK(peaks_ok);
    CHECK(bubble_ok);
    ++checked;
  }
  CHECK(checked == 7 * 16 * 3 + 4 * (8 + 5 + 4 + 3 + 2 + 2 + 2));
}

TEST_CASE("bubbles at P = 4: 1F1B at theory, interleaved below it, zero bubble a third of it") {
  const SimulationCosts costs{1, 2, 1, 1};  // F = 1, full backward 2 = B + W
  for (int M : {8, 16}) {
    INFO("M = " << M);
    const double theory = 3.0 / (M + 3);
    const SimulationResult gpipe = simulate(make(ScheduleKind::gpipe, 4, M), costs);
    const SimulationResult f1b1 = simulate(make(ScheduleKind::one_f_one_b, 4, M), costs);
    CHECK(gpipe.bubble_fraction[0] == Approx(theory).epsilon(1e-12));
    CHECK(f1b1.bubble_fraction[0] == Approx(theory).epsilon(1e-12));
    CHECK(theoretical_bubble(make(ScheduleKind::one_f_one_b, 4, M)) == Approx(theory));
    for (int v : {2, 4}) {
      const ScheduleSpec spec = make(ScheduleKind::interleaved, 4, M, v);
      const double b = simulate(spec, costs).bubble_fraction[0];
      // Megatron's theory/v is the M >> P limit; the exact idle share is (P - 1) / (v M + P - 1).
      CHECK(b == Approx(3.0 / (v * M + 3)).epsilon(1e-12));
      CHECK(b < f1b1.bubble_fraction[0]);
      CHECK(b >= theoretical_bubble(spec));
      CHECK(b < 1.3 * theoretical_bubble(spec));
    }
    const SimulationResult zb = simulate(make(ScheduleKind::zero_bubble, 4, M), costs);
    for (int r = 0; r < 4; ++r) {
      // ZB-H1's idle time is (P - 1)(F + B - W) = 3 per rank against 1F1B's 3 (F + B + W) = 9.
      CHECK(idle(zb, r) == Approx(idle(f1b1, r) / 3).epsilon(1e-12));
      CHECK(zb.peak_in_flight[size_t(r)] == f1b1.peak_in_flight[size_t(r)]);
    }
    // As fractions of their makespans: (M + P - 1) / (3 M + P - 1) = 11/27 (M = 8), 19/51 (M = 16).
    CHECK(zb.bubble_fraction[0] / f1b1.bubble_fraction[0] ==
          Approx(double(M + 3) / (3 * M + 3)).epsilon(1e-12));
    CHECK(zb.bubble_fraction[0] <= 0.41 * f1b1.bubble_fraction[0]);
    CHECK(theoretical_bubble(make(ScheduleKind::zero_bubble, 4, M)) ==
          Approx(zb.bubble_fraction[0]));
  }
  // With a heavier W the deferred Ws still fill the cool-down, and zero bubble keeps its lead.
  const SimulationCosts heavy_w{1, 2.5, 1, 1.5};
  CHECK(simulate(make(ScheduleKind::zero_bubble, 4, 8), heavy_w).makespan <
        simulate(make(ScheduleKind::one_f_one_b, 4, 8), heavy_w).makespan);
}

TEST_CASE("simulate_lists throws on broken lists, naming what broke") {
  using T = ActionType;
  const ScheduleSpec spec = make(ScheduleKind::one_f_one_b, 3, 4);
  const Lists good = all_lists(spec);
  const auto erase_first = [](std::vector<Action>& l, const Action& a) {
    auto it = std::find(l.begin(), l.end(), a);
    REQUIRE(it != l.end());
    l.erase(it);
  };
  CHECK_NOTHROW(simulate_lists(spec, good));

  SECTION("a lost send deadlocks, naming the stuck ranks") {
    Lists l = good;
    erase_first(l[1], {T::send_activation, 2, 0, 2});
    CHECK_THROWS_WITH(simulate_lists(spec, l),
                      Catch::Contains("deadlock") && Catch::Contains("rank 2 action") &&
                          Catch::Contains("recv_activation(chunk 0, micro-batch 2, peer 1)") &&
                          Catch::Contains("rank 1 action"));
  }
  SECTION("a receive moved too early deadlocks") {
    Lists l = good;
    erase_first(l[0], {T::recv_gradient, 0, 0, 1});
    l[0].insert(l[0].begin(), {T::recv_gradient, 0, 0, 1});
    CHECK_THROWS_WITH(
        simulate_lists(spec, l),
        Catch::Contains("rank 0 action 0 recv_gradient(chunk 0, micro-batch 0, peer 1)"));
  }
  SECTION("a compute before its receive") {
    Lists l = good;
    erase_first(l[0], {T::recv_gradient, 1, 0, 1});
    CHECK_THROWS_WITH(simulate_lists(spec, l),
                      Catch::Contains("its gradient received before the backward"));
  }
  SECTION("a repeated forward") {
    Lists l = good;
    l[2].insert(l[2].begin() + 2, {T::forward, 0, 0, -1});
    CHECK_THROWS_WITH(simulate_lists(spec, l), Catch::Contains("once per chunk and micro-batch"));
  }
  SECTION("a wrong peer") {
    Lists l = good;
    l[1][0].peer = 2;
    CHECK_THROWS_WITH(simulate_lists(spec, l),
                      Catch::Contains("expected peer 0 (the rank of stage 0)"));
  }
  SECTION("a micro-batch out of range") {
    Lists l = good;
    l[0][0].micro_batch = 4;
    CHECK_THROWS_WITH(simulate_lists(spec, l), Catch::Contains("a micro-batch in 0..3"));
  }
  SECTION("a message nobody receives") {
    // Rank 2 skips micro-batch 3 altogether and rank 0 never waits for its gradient: rank 0's
    // activation for stage 1 is received, rank 1's for stage 2 is not.
    Lists l = good;
    for (T t : {T::recv_activation, T::send_gradient}) erase_first(l[2], {t, 3, 0, 1});
    erase_first(l[2], {T::forward, 3, 0, -1});
    erase_first(l[2], {T::backward, 3, 0, -1});
    erase_first(l[1], {T::recv_gradient, 3, 0, 2});
    erase_first(l[1], {T::backward, 3, 0, -1});
    erase_first(l[1], {T::send_gradient, 3, 0, 0});
    erase_first(l[0], {T::recv_gradient, 3, 0, 1});
    erase_first(l[0], {T::backward, 3, 0, -1});
    CHECK_THROWS_WITH(simulate_lists(spec, l),
                      Catch::Contains("1 message(s) sent and never received") &&
                          Catch::Contains("rank 1's activation of micro-batch 3 for stage 2"));
  }
  SECTION("a missing W") {
    const ScheduleSpec zb = make(ScheduleKind::zero_bubble, 3, 4);
    Lists l = all_lists(zb);
    l[1].pop_back();
    CHECK_THROWS_WITH(simulate_lists(zb, l),
                      Catch::Contains("expected rank 1 to run the backward_weight of chunk 0, "
                                      "micro-batch 3"));
  }
  SECTION("a W before its B") {
    const ScheduleSpec zb = make(ScheduleKind::zero_bubble, 3, 4);
    Lists l = all_lists(zb);
    l[2].insert(l[2].begin(), {T::backward_weight, 0, 0, -1});
    CHECK_THROWS_WITH(simulate_lists(zb, l), Catch::Contains("a backward_input before"));
  }
  SECTION("the wrong number of lists, negative costs") {
    CHECK_THROWS_WITH(simulate_lists(spec, Lists(2)),
                      Catch::Contains("one action list per pipeline rank (3), got 2"));
    CHECK_THROWS_WITH(simulate(spec, {1, -2, 1, 1}), Catch::Contains("expected costs >= 0"));
  }
}
