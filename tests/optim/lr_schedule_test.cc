// LR schedules against their closed forms, and their JSON configuration errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/lr_schedule.h"

namespace {

using namespace tessera;
using nlohmann::json;
using optim::LrSchedule;

template <typename Fn>
void require_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    FAIL("expected an error containing '" << needle << "'");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

TEST_CASE("cosine schedule: linear warmup, cosine to the floor, then the floor", "[optim][schedule]") {
  const LrSchedule s = LrSchedule::from_json(
      {{"type", "cosine"}, {"warmup_steps", 10}, {"total_steps", 110}, {"min_lr", 1e-4}}, 1e-3);
  CHECK(s.lr_at(0) == Approx(1e-4).epsilon(1e-12));
  CHECK(s.lr_at(4) == Approx(5e-4).epsilon(1e-12));
  CHECK(s.lr_at(9) == Approx(1e-3).epsilon(1e-12));
  CHECK(s.lr_at(10) == Approx(1e-3).epsilon(1e-12));  // decay starts from the peak
  for (int64_t step : {10, 23, 60, 97, 109}) {
    const double f = double(step - 10) / 100.0;
    const double expect = 1e-4 + (1e-3 - 1e-4) * 0.5 * (1.0 + std::cos(std::numbers::pi * f));
    INFO("step " << step);
    CHECK(s.lr_at(step) == Approx(expect).epsilon(1e-12));
  }
  CHECK(s.lr_at(60) == Approx(5.5e-4).epsilon(1e-12));  // halfway: the midpoint
  CHECK(s.lr_at(110) == 1e-4);
  CHECK(s.lr_at(100000) == 1e-4);
  // Monotone after the warmup.
  for (int64_t k = 10; k < 120; ++k) CHECK(s.lr_at(k + 1) <= s.lr_at(k));
}

TEST_CASE("linear schedule and constant schedule", "[optim][schedule]") {
  const LrSchedule lin({.type = "linear", .lr = 2.0, .warmup_steps = 0, .total_steps = 8, .min_lr = 0.4});
  CHECK(lin.lr_at(0) == Approx(2.0));
  CHECK(lin.lr_at(2) == Approx(0.4 + 1.6 * 0.75));
  CHECK(lin.lr_at(4) == Approx(1.2));
  CHECK(lin.lr_at(7) == Approx(0.4 + 1.6 / 8.0));
  CHECK(lin.lr_at(8) == Approx(0.4));
  const LrSchedule c = LrSchedule::from_json({{"type", "constant"}, {"warmup_steps", 4}}, 0.1);
  CHECK(c.lr_at(0) == Approx(0.025));
  CHECK(c.lr_at(3) == Approx(0.1));
  CHECK(c.lr_at(1000) == Approx(0.1));
  const LrSchedule plain = LrSchedule::from_json(json::object(), 0.3);
  CHECK(plain.lr_at(0) == 0.3);
  // "lr" in the object overrides the base, and to_json round-trips.
  const LrSchedule own = LrSchedule::from_json({{"type", "linear"}, {"lr", 0.5}, {"total_steps", 10}}, 0.1);
  CHECK(own.lr_at(0) == 0.5);
  const LrSchedule again = LrSchedule::from_json(own.to_json(), 99.0);
  for (int64_t k : {0, 3, 9, 10, 11}) CHECK(again.lr_at(k) == own.lr_at(k));
}

TEST_CASE("schedule configuration errors name the key or value", "[optim][schedule][errors]") {
  require_error([] { LrSchedule::from_json({{"type", "cosine"}, {"warmup", 10}, {"total_steps", 100}}, 1.0); },
                "got unknown key 'warmup'");
  require_error([] { LrSchedule::from_json({{"type", "exponential"}}, 1.0); }, "got 'exponential'");
  require_error([] { LrSchedule::from_json({{"type", "cosine"}, {"warmup_steps", 10}}, 1.0); },
                "expected total_steps > warmup_steps (10)");
  require_error([] { LrSchedule::from_json({{"type", "cosine"}, {"total_steps", 10}, {"min_lr", 2.0}}, 1.0); },
                "expected 0 <= min_lr <= lr");
  require_error([] { LrSchedule::from_json({{"type", "cosine"}, {"total_steps", 10.5}}, 1.0); },
                "expected an integer for 'total_steps'");
  require_error([] { LrSchedule::from_json({{"type", 3}}, 1.0); }, "expected a string for 'type'");
  require_error([] { LrSchedule::from_json(json::object(), -1.0); }, "expected lr >= 0");
  require_error([] { LrSchedule::from_json(json::array(), 1.0); }, "expected a JSON object");
  const LrSchedule s({.type = "constant", .lr = 1.0});
  require_error([&] { s.lr_at(-1); }, "expected step >= 0");
}

}  // namespace
