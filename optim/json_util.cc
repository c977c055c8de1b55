// Strict JSON option readers shared by optimizers, schedules and the loss scaler.
#include "optim/json_util.h"

#include "core/error.h"

namespace tessera::optim::detail {

using nlohmann::json;

namespace {

std::string key_list(std::initializer_list<const char*> known) {
  std::string out;
  for (const char* k : known) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

}  // namespace

void check_keys(const json& j, std::initializer_list<const char*> known, const char* where) {
  TS_CHECK(j.is_object(), where, "expected a JSON object, got ", j.dump());
  for (const auto& item : j.items()) {
    bool found = false;
    for (const char* k : known) found |= item.key() == k;
    TS_CHECK(found, where, "expected keys ", key_list(known), ", got unknown key '", item.key(), "'");
  }
}

double get_double(const json& j, const char* key, double fallback, const char* where) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  TS_CHECK(v.is_number(), where, "expected a number for '", key, "', got ", v.dump());
  return v.get<double>();
}

int64_t get_int(const json& j, const char* key, int64_t fallback, const char* where) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  TS_CHECK(v.is_number_integer(), where, "expected an integer for '", key, "', got ", v.dump());
  return v.get<int64_t>();
}

bool get_bool(const json& j, const char* key, bool fallback, const char* where) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  TS_CHECK(v.is_boolean(), where, "expected true or false for '", key, "', got ", v.dump());
  return v.get<bool>();
}

void get_betas(const json& j, double& beta1, double& beta2, const char* where) {
  if (!j.contains("betas")) return;
  const json& v = j.at("betas");
  TS_CHECK(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number(), where,
           "expected 'betas' as [beta1, beta2], got ", v.dump());
  beta1 = v[0].get<double>();
  beta2 = v[1].get<double>();
}

}  // namespace tessera::optim::detail
