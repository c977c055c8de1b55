// Strict reading of JSON option objects (optimizer options, LR schedules, loss scaler settings):
// unknown keys and wrongly typed values are errors that name the key.
#pragma once

#include <nlohmann/json.hpp>
#include <initializer_list>
#include <string>

namespace tessera::optim::detail {

// Throws "[where] expected keys a, b, c, got unknown key 'k'" for the first key not in `known`,
// and "[where] expected a JSON object, got ..." when j is not an object.
void check_keys(const nlohmann::json& j, std::initializer_list<const char*> known, const char* where);

// j[key] as a number / integer / bool, `fallback` when absent; a value of another type throws
// naming the key.
double get_double(const nlohmann::json& j, const char* key, double fallback, const char* where);
int64_t get_int(const nlohmann::json& j, const char* key, int64_t fallback, const char* where);
bool get_bool(const nlohmann::json& j, const char* key, bool fallback, const char* where);
// "betas": [beta1, beta2], PyTorch's spelling; left unchanged when absent.
void get_betas(const nlohmann::json& j, double& beta1, double& beta2, const char* where);

}  // namespace tessera::optim::detail
