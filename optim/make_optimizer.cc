// The optimizer factory over JSON configurations.
#include "optim/make_optimizer.h"

#include "core/error.h"
#include "optim/adam.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/sgd.h"

namespace tessera::optim {

namespace {

template <typename Opt, typename Options>
std::unique_ptr<Optimizer> build(const nlohmann::json& options, const std::vector<ParamGroup>& groups) {
  Options o{};
  options_from_json(options, &o);
  return std::make_unique<Opt>(groups, o);
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const nlohmann::json& config, const std::vector<ParamGroup>& groups) {
  const char* op = "optimizer";
  TS_CHECK(config.is_object() && config.contains("type") && config.at("type").is_string(), op,
           "expected an object with a string 'type', got ", config.dump());
  const std::string type = config.at("type").get<std::string>();
  nlohmann::json options = config;
  options.erase("type");
  if (type == "sgd") return build<SGD, SgdOptions>(options, groups);
  if (type == "adam") return build<Adam, AdamOptions>(options, groups);
  if (type == "adamw") return build<AdamW, AdamWOptions>(options, groups);
  if (type == "lamb") return build<Lamb, LambOptions>(options, groups);
  if (type == "lars") return build<Lars, LarsOptions>(options, groups);
  TS_FAIL(op, "expected type sgd, adam, adamw, lamb or lars, got '", type, "'");
}

}  // namespace tessera::optim
