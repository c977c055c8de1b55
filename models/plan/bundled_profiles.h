// The bundled cluster profiles (models/plan/profiles/*.json), compiled into the library by the
// bundled_profiles_cc genrule so that no run depends on files beside the binary.
#pragma once

#include <vector>

namespace tessera::plan {

struct BundledProfile {
  const char* name;  // the file's stem: "dgx-a100-80g", "host", ...
  const char* text;  // the file's JSON, byte for byte
};

// In file-name order; defined in the generated bundled_profiles_data.cc.
const std::vector<BundledProfile>& bundled_profiles();

}  // namespace tessera::plan
