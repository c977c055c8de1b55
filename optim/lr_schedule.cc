// Learning-rate schedule formulas and their JSON form.
#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/json_util.h"

namespace tessera::optim {

using nlohmann::json;

LrSchedule::LrSchedule(const LrScheduleOptions& o) : options_(o) {
  const char* op = "lr_schedule";
  TS_CHECK(o.type == "constant" || o.type == "cosine" || o.type == "linear", op,
           "expected type 'constant', 'cosine' or 'linear', got '", o.type, "'");
  TS_CHECK(o.lr >= 0.0 && std::isfinite(o.lr), op, "expected lr >= 0, got ", o.lr);
  TS_CHECK(o.warmup_steps >= 0, op, "expected warmup_steps >= 0, got ", o.warmup_steps);
  if (o.type != "constant") {
    TS_CHECK(o.total_steps > o.warmup_steps, op, "expected total_steps > warmup_steps (", o.warmup_steps,
             ") for a ", o.type, " schedule, got ", o.total_steps);
    TS_CHECK(o.min_lr >= 0.0 && o.min_lr <= o.lr, op, "expected 0 <= min_lr <= lr (", o.lr, "), got ",
             o.min_lr);
  }
}

LrSchedule LrSchedule::from_json(const json& j, double base_lr) {
  const char* where = "lr_schedule";
  detail::check_keys(j, {"type", "lr", "warmup_steps", "total_steps", "min_lr"}, where);
  LrScheduleOptions o;
  if (j.contains("type")) {
    TS_CHECK(j.at("type").is_string(), where, "expected a string for 'type', got ", j.at("type").dump());
    o.type = j.at("type").get<std::string>();
  }
  o.lr = detail::get_double(j, "lr", base_lr, where);
  o.warmup_steps = detail::get_int(j, "warmup_steps", 0, where);
  o.total_steps = detail::get_int(j, "total_steps", 0, where);
  o.min_lr = detail::get_double(j, "min_lr", 0.0, where);
  return LrSchedule(o);
}

json LrSchedule::to_json() const {
  return {{"type", options_.type}, {"lr", options_.lr}, {"warmup_steps", options_.warmup_steps},
          {"total_steps", options_.total_steps}, {"min_lr", options_.min_lr}};
}

double LrSchedule::lr_at(int64_t step) const {
  const LrScheduleOptions& o = options_;
  TS_CHECK(step >= 0, "lr_schedule", "expected step >= 0, got ", step);
  if (step < o.warmup_steps) return o.lr * double(step + 1) / double(o.warmup_steps);
  if (o.type == "constant") return o.lr;
  if (step >= o.total_steps) return o.min_lr;
  const double f = double(step - o.warmup_steps) / double(o.total_steps - o.warmup_steps);
  const double shape = o.type == "cosine" ? 0.5 * (1.0 + std::cos(std::numbers::pi * f)) : 1.0 - f;
  return o.min_lr + (o.lr - o.min_lr) * shape;
}

}  // namespace tessera::optim
