// Strict reading of one JSON object of the training configuration: typed getters with defaults
// and ranges, and an unknown-key check, all reporting the full dotted key path.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace tessera::train {

// Reads the keys of `j` (an object, or null for an absent section) found at `path` ("train",
// "precision.loss_scale"). Every getter records its key; done() rejects the keys nobody read.
// Errors throw ValueError("config", "<path.key>: expected ..., got ...").
class SectionReader {
 public:
  SectionReader(const nlohmann::json& j, std::string path);

  int64_t integer(const char* key, int64_t fallback,
                  int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max());
  double number(const char* key, double fallback,
                double min = -std::numeric_limits<double>::infinity(),
                double max = std::numeric_limits<double>::infinity());
  bool boolean(const char* key, bool fallback);
  std::string string(const char* key, const std::string& fallback,
                     const std::vector<std::string>& choices = {});
  // A sub-object (null when absent), recorded as read.
  const nlohmann::json& object(const char* key);
  bool has(const char* key) const;
  // A value of any type (null when absent), recorded as read: for keys another reader checks.
  const nlohmann::json* any(const char* key) { return value(key); }
  // Throws "unknown key '<path.key>' (<path> takes: a, b, c)" for the first unread key.
  void done() const;

  std::string key_path(const std::string& key) const;

 private:
  const nlohmann::json* value(const char* key);

  const nlohmann::json& j_;
  std::string path_;
  std::vector<std::string> known_;
};

// Checks that every key of `j` is in `known` (an object's allowed keys), naming the full path.
void check_known_keys(const nlohmann::json& j, const std::string& path,
                      const std::vector<std::string>& known);

// Runs fn(); a Tessera error it throws is rethrown as ValueError("config", "<section>: <message>"),
// and a foreign parser's "got unknown key 'k'" is reported as the full path "<section>.k".
template <typename Fn>
auto within_section(const std::string& section, Fn&& fn) -> decltype(fn());
[[noreturn]] void rethrow_in_section(const std::string& section, const std::exception& e);

template <typename Fn>
auto within_section(const std::string& section, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    rethrow_in_section(section, e);
  }
}

}  // namespace tessera::train
