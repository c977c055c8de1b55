// Command-line front end of the data preparation pipeline: argument parsing, messages and exit
// codes, shared by the standalone `prepare` binary and `tessera data prepare`.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "models/data/prepare.h"

namespace tessera::tools {

struct PrepareCommand {
  data::PrepareOptions options;  // options.progress is left null
  bool help = false;             // --help: print the usage and nothing else
  bool quiet = false;            // --quiet: no progress bar
};

// Parses the arguments after the command name. Throws ValueError naming the bad argument.
PrepareCommand parse_prepare_args(const std::vector<std::string>& args);

// Runs the command: 0 on success, 2 for a usage error, 1 when preparation fails. The progress bar
// and errors go to `err`, the summary to `out`.
int run_prepare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

extern const char* const kPrepareUsage;

}  // namespace tessera::tools
