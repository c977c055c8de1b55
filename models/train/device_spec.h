// The syntax of a device setting ("cpu", "cuda", "cuda:N"), checked where a configuration is read
// (a machine without a GPU reads configs meant for one); train_device.h resolves it to a device.
#pragma once

#include <string>

namespace tessera::train {

// Who asks for a device, for error messages: "[config] train.device ..." for the trainer,
// "[eval] --device ..." for a command-line flag.
struct DeviceSetting {
  const char* op = "config";
  const char* key = "train.device";
};

// Throws ValueError "[config] train.device: expected ..." unless spec is "cpu", "cuda" or
// "cuda:N" (syntax only: config files read on machines without a GPU).
void check_device_spec(const std::string& spec, const DeviceSetting& where = {});

}  // namespace tessera::train
