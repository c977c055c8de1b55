// Strict, path-naming JSON section reading for the training configuration (see config_reader.h).
#include "models/train/config_reader.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/train/train_config.h"

namespace tessera::train {

using nlohmann::json;

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

SectionReader::SectionReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  TS_CHECK(j_.is_null() || j_.is_object(), "config", path_, ": expected an object, got ",
           j_.dump());
}

std::string SectionReader::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool SectionReader::has(const char* key) const { return j_.is_object() && j_.contains(key); }

const json* SectionReader::value(const char* key) {
  known_.push_back(key);
  if (!has(key)) return nullptr;
  return &j_.at(key);
}

int64_t SectionReader::integer(const char* key, int64_t fallback, int64_t min, int64_t max) {
  const json* v = value(key);
  if (!v) return fallback;
  TS_CHECK(v->is_number_integer(), "config", key_path(key), ": expected an integer, got ",
           v->dump());
  // Unsigned JSON numbers above int64's range would wrap.
  TS_CHECK(!v->is_number_unsigned() || v->get<uint64_t>() <= uint64_t(max), "config", key_path(key),
           ": expected at most ", max, ", got ", v->dump());
  const int64_t x = v->get<int64_t>();
  TS_CHECK(x >= min && x <= max, "config", key_path(key), ": expected ",
           max == std::numeric_limits<int64_t>::max()
               ? str_cat(">= ", min)
               : str_cat("a value in [", min, ", ", max, "]"),
           ", got ", x);
  return x;
}

double SectionReader::number(const char* key, double fallback, double min, double max) {
  const json* v = value(key);
  if (!v) return fallback;
  TS_CHECK(v->is_number(), "config", key_path(key), ": expected a number, got ", v->dump());
  const double x = v->get<double>();
  TS_CHECK(std::isfinite(x) && x >= min && x <= max, "config", key_path(key),
           ": expected a number in [", min, ", ", max, "], got ", v->dump());
  return x;
}

bool SectionReader::boolean(const char* key, bool fallback) {
  const json* v = value(key);
  if (!v) return fallback;
  TS_CHECK(v->is_boolean(), "config", key_path(key), ": expected true or false, got ", v->dump());
  return v->get<bool>();
}

std::string SectionReader::string(const char* key, const std::string& fallback,
                                  const std::vector<std::string>& choices) {
  const json* v = value(key);
  if (!v) return fallback;
  TS_CHECK(v->is_string(), "config", key_path(key), ": expected a string, got ", v->dump());
  std::string s = v->get<std::string>();
  TS_CHECK(choices.empty() || std::find(choices.begin(), choices.end(), s) != choices.end(),
           "config", key_path(key), ": expected one of ", join(choices), ", got '", s, "'");
  return s;
}

const json& SectionReader::object(const char* key) {
  static const json kNull;
  const json* v = value(key);
  if (!v) return kNull;
  TS_CHECK(v->is_object(), "config", key_path(key), ": expected an object, got ", v->dump());
  return *v;
}

void SectionReader::done() const {
  if (!j_.is_object()) return;
  check_known_keys(j_, path_, known_);
}

void check_known_keys(const json& j, const std::string& path,
                      const std::vector<std::string>& known) {
  TS_CHECK(j.is_object(), "config", path, ": expected an object, got ", j.dump());
  for (const auto& item : j.items()) {
    if (std::find(known.begin(), known.end(), item.key()) != known.end()) continue;
    const std::string full = path.empty() ? item.key() : path + "." + item.key();
    TS_FAIL("config", "unknown key '", full, "' (", path.empty() ? "the top level" : path,
            " takes: ", join(known), ")");
  }
}

void rethrow_in_section(const std::string& section, const std::exception& e) {
  std::string msg = error_text(e);
  if (dynamic_cast<const Error*>(&e) && msg.rfind("[config] ", 0) == 0) {
    throw ValueError("config", msg.substr(9));  // already ours: keep the path it names
  }
  const std::string marker = "got unknown key '";
  const size_t at = msg.find(marker);
  const size_t expected = msg.find("expected keys ");
  if (at != std::string::npos && expected != std::string::npos && expected < at) {
    const size_t key_begin = at + marker.size();
    const size_t key_end = msg.find('\'', key_begin);
    const std::string key = msg.substr(key_begin, key_end - key_begin);
    const size_t list_begin = expected + 14;
    std::string known = msg.substr(list_begin, at - list_begin);
    while (!known.empty() && (known.back() == ' ' || known.back() == ',')) known.pop_back();
    TS_FAIL("config", "unknown key '", section, ".", key, "' (", section, " takes: ", known, ")");
  }
  TS_FAIL("config", section, ": ", msg);
}

}  // namespace tessera::train
