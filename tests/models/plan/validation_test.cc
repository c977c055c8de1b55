// The arithmetic of `tessera plan validate` on values worked out by hand or by SciPy
// (scipy.stats.kendalltau computes tau-b).
#include "models/plan/validation.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "core/error.h"

using namespace tessera::plan;

TEST_CASE("a layout's text names the axes a search varies") {
  Layout l;
  l.parallel.data = 2;
  l.parallel.tensor.size = 2;
  l.zero.stage = 1;
  l.micro_batch_size = 4;
  CHECK(layout_text(l) == "dp2 tp2(1d) pp1 zero1 mb4");

  Layout m;
  m.parallel.tensor.size = 8;
  m.parallel.tensor.mode = tessera::parallel::TensorMode::two_point_five_d;
  m.parallel.tensor.depth = 2;
  m.parallel.pipeline = 4;
  m.parallel.pipeline_options.schedule = tessera::parallel::pipeline::ScheduleKind::interleaved;
  m.parallel.pipeline_options.virtual_stages = 2;
  m.parallel.sequence = 2;
  m.parallel.sequence_mode = tessera::parallel::sequence::SequenceAttentionMode::ring;
  m.zero.stage = 3;
  m.zero.offload = true;
  m.zero.offload_params = true;
  m.micro_batch_size = 1;
  m.checkpoint = true;
  CHECK(layout_text(m) ==
        "dp1 tp8(2.5d d2) pp4(interleaved v2) sp2(ring) zero3+offload+params mb1 ckpt");

  Layout s;
  s.parallel.tensor.size = 4;
  s.parallel.tensor.sequence_parallel = true;
  s.micro_batch_size = 2;
  CHECK(layout_text(s) == "dp1 tp4(1d+sp) pp1 zero0 mb2");
}

TEST_CASE("the runs are the best half and a seeded sample of the rest") {
  const std::vector<size_t> a = choose_layouts(20, 12, 7);
  REQUIRE(a.size() == 12);
  for (size_t i = 0; i < 6; ++i) CHECK(a[i] == i);  // the best 6, in the planner's order
  for (size_t i = 6; i < 12; ++i) {
    CHECK(a[i] >= 6);
    CHECK(a[i] < 20);
    CHECK(a[i] > a[i - 1]);  // ascending, so no index twice
  }
  CHECK(choose_layouts(20, 12, 7) == a);  // the seed decides
  CHECK(choose_layouts(20, 12, 8) != a);
  // An odd k keeps the larger half for the best; k beyond the feasible runs them all.
  CHECK(choose_layouts(10, 3, 1).size() == 3);
  CHECK(choose_layouts(10, 3, 1)[1] == 1);
  CHECK(choose_layouts(5, 12, 1) == std::vector<size_t>{0, 1, 2, 3, 4});
  CHECK(choose_layouts(5, 1, 1) == std::vector<size_t>{0});
  CHECK(choose_layouts(0, 4, 1).empty());
}

TEST_CASE("every layout of the rest can be sampled") {
  std::vector<int> seen(10, 0);
  for (uint64_t seed = 0; seed < 200; ++seed)
    for (size_t i : choose_layouts(10, 4, seed)) ++seen[i];
  CHECK(seen[0] == 200);
  CHECK(seen[1] == 200);
  for (size_t i = 2; i < 10; ++i) {
    CHECK(seen[i] > 20);  // about 50 each: 2 of 8 per seed
    CHECK(seen[i] < 90);
  }
}

TEST_CASE("medians and percentage errors") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == 2.5);
  CHECK(median({5}) == 5);
  CHECK_THROWS_AS(median({}), tessera::ValueError);
  CHECK(relative_error(110, 100) == Approx(0.1));
  CHECK(relative_error(90, 100) == Approx(-0.1));
  CHECK_THROWS_AS(relative_error(1, 0), tessera::ValueError);
  const ErrorStats e = absolute_percentage_errors({120, 100}, {100, 200});
  CHECK(e.mean_pct == Approx(35));
  CHECK(e.worst_pct == Approx(50));
  CHECK_THROWS_AS(absolute_percentage_errors({1, 2}, {1}), tessera::ValueError);
}

TEST_CASE("Kendall's tau-b counts ties as neither concordant nor discordant") {
  CHECK(kendall_tau_b({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1));
  CHECK(kendall_tau_b({1, 2, 3, 4}, {40, 30, 20, 10}) == Approx(-1));
  CHECK(kendall_tau_b({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}) == Approx(0.6));
  // scipy.stats.kendalltau: the example of its documentation, and a tie in one series.
  CHECK(kendall_tau_b({12, 2, 1, 12, 2}, {1, 4, 7, 1, 0}) == Approx(-0.4714045207910316));
  CHECK(kendall_tau_b({1, 2, 2, 3}, {1, 3, 2, 4}) == Approx(0.912870929175277));
  CHECK(kendall_tau_b({1, 1, 2, 2}, {1, 2, 1, 2}) == Approx(0).margin(1e-12));
  CHECK(std::isnan(kendall_tau_b({1}, {2})));
  CHECK(std::isnan(kendall_tau_b({3, 3, 3}, {1, 2, 3})));
  CHECK_THROWS_AS(kendall_tau_b({1, 2}, {1}), tessera::ValueError);
}

TEST_CASE("a run's measurement: the median step after the warm-up, the last record's peaks") {
  std::vector<nlohmann::json> records;
  const double seconds[] = {0.9, 0.5, 0.2, 0.4, 0.3};
  for (int s = 1; s <= 5; ++s)
    records.push_back({{"step", s},
                       {"step_seconds", seconds[s - 1]},
                       {"peak_bytes", 100 * s},
                       {"peak_bytes_ranks", {100 * s, 300 * s, 200 * s}}});
  records.push_back({{"step", 5}, {"eval", true}, {"val_loss", 1.0}});  // not a step
  const Measurement m = measure_run(records, 2);
  CHECK(m.step_seconds == Approx(0.3));  // median of 0.2, 0.4, 0.3
  CHECK(m.steps_used == 3);
  CHECK(m.peak_bytes == 1500);
  CHECK(m.peak_rank == 1);
  CHECK(m.peak_bytes_ranks == std::vector<int64_t>{500, 1500, 1000});

  CHECK_THROWS_WITH(measure_run(records, 5), Catch::Contains("after the first 5 (warm-up) steps"));
  records[4].erase("peak_bytes_ranks");
  CHECK_THROWS_WITH(measure_run(records, 2), Catch::Contains("expected peak_bytes_ranks"));
}

TEST_CASE("the summary: errors, rank correlation and the chosen layout's regret") {
  // The planner ranks run 0 fastest, but run 1 is measured fastest, 20% ahead of run 0.
  const std::vector<Comparison> runs = {{.predicted_seconds = 1.0,
                                         .measured_seconds = 1.2,
                                         .predicted_peak = 100,
                                         .measured_peak = 100},
                                        {.predicted_seconds = 1.1,
                                         .measured_seconds = 1.0,
                                         .predicted_peak = 90,
                                         .measured_peak = 100},
                                        {.predicted_seconds = 2.0,
                                         .measured_seconds = 2.0,
                                         .predicted_peak = 200,
                                         .measured_peak = 250}};
  const ValidationSummary s = summarize(runs);
  CHECK(s.runs == 3);
  CHECK(s.step_time.mean_pct == Approx((100.0 / 6 + 10 + 0) / 3));
  CHECK(s.step_time.worst_pct == Approx(100.0 / 6));
  CHECK(s.peak_memory.mean_pct == Approx((0 + 10 + 20) / 3.0));
  CHECK(s.peak_memory.worst_pct == Approx(20));
  CHECK(s.kendall_tau == Approx(1.0 / 3));  // 2 concordant pairs, 1 discordant
  CHECK(s.chosen == 0);
  CHECK(s.measured_best == 1);
  CHECK(s.chosen_regret == Approx(0.2));
  CHECK_THROWS_AS(summarize({}), tessera::ValueError);
}
