// The syntax check of a device setting (see device_spec.h).
#include "models/train/device_spec.h"

#include <exception>

#include "core/device.h"
#include "core/error.h"

namespace tessera::train {

void check_device_spec(const std::string& spec, const DeviceSetting& where) {
  try {
    (void)parse_device(spec);
  } catch (const std::exception&) {  // also stoi's out_of_range for a huge N
    TS_FAIL(where.op, where.key, ": expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", spec, "\"");
  }
}

}  // namespace tessera::train
