// `prepare`: text files -> Tessera token files (see prepare_cli.h for the options).
#include <iostream>

#include "tools/data/prepare_cli.h"

int main(int argc, char** argv) {
  return tessera::tools::run_prepare_command(std::vector<std::string>(argv + 1, argv + argc),
                                             std::cout, std::cerr);
}
