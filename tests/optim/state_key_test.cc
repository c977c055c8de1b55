// "state.<k>.<name>": written and parsed by one pair of functions; anything else is not a key.
#include "optim/state_key.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

using tessera::optim::parse_state_key;
using tessera::optim::state_key;

TEST_CASE("state keys round-trip") {
  CHECK(state_key(0, "exp_avg") == "state.0.exp_avg");
  for (const std::string key : {"state.0.exp_avg", "state.17.momentum_buffer", "state.3.a.b"}) {
    const auto parsed = parse_state_key(key);
    REQUIRE(parsed.has_value());
    CHECK(state_key(*parsed) == key);
  }
  const auto dotted = parse_state_key("state.12.exp.avg");
  REQUIRE(dotted.has_value());
  CHECK(dotted->param == 12);
  CHECK(dotted->name == "exp.avg");  // the name is everything after the index's dot
}

TEST_CASE("other names are not state keys") {
  for (const std::string key :
       {"", "state.", "state.0", "state.0.", "state..exp_avg", "state.x.exp_avg", "state.-1.m",
        "State.0.m", "param_groups", "state.99999999999999999999999.m"})
    CHECK_FALSE(parse_state_key(key).has_value());
}

}  // namespace
