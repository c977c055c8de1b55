// Command-line argument reading shared by the subcommands (see commands.h).
#include <cstdlib>

#include "core/error.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

ArgReader::ArgReader(const std::vector<std::string>& args, const char* command)
    : args_(args), command_(command) {}

bool ArgReader::next() {
  if (i_ >= args_.size()) return false;
  name_ = args_[i_++];
  value_taken_ = false;
  return true;
}

const std::string& ArgReader::value() {
  if (!value_taken_) {
    TS_CHECK(i_ < args_.size(), command_, "expected a value after ", name_);
    value_ = args_[i_++];
    value_taken_ = true;
  }
  return value_;
}

void ArgReader::unknown() const {
  TS_FAIL(command_, "unknown argument '", name_, "' (see --help)");
}

long long ArgReader::to_int(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  TS_CHECK(!text.empty() && *end == '\0', "args", "expected an integer after ", flag, ", got '",
           text, "'");
  return v;
}

double ArgReader::to_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  TS_CHECK(!text.empty() && *end == '\0', "args", "expected a number after ", flag, ", got '", text,
           "'");
  return v;
}

bool ArgReader::plan_job(PlanJob& job) {
  if (name_ == "--config")
    job.config = value();
  else if (name_ == "--world")
    job.world = int(to_int(name_, value()));
  else if (name_ == "--cluster")
    job.cluster = value();
  else if (name_ == "--set")
    job.sets.push_back(value());
  else
    return false;
  return true;
}

void ArgReader::check_plan_job(const PlanJob& job, const char* command) {
  TS_CHECK(!job.config.empty(), command, "expected --config FILE (see --help)");
  TS_CHECK(job.world >= 1, command, "expected --world N with N >= 1 ranks, got ", job.world);
}

}  // namespace tessera::cli
