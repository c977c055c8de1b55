// Element copies between tensors of any dtype, layout and device, and fills. The CPU path is here;
// a device backend registers the copies that touch its memory.
#pragma once

#include "core/tensor.h"

namespace tessera {

// dst[i] = convert(src[i]); shapes must match (broadcast src with expand first).
void copy_tensor(const Tensor& src, const Tensor& dst);
void fill_tensor(const Tensor& dst, double value);

// A backend's copy/fill for operations where either side lives on its device type.
using CopyFn = void (*)(const Tensor& src, const Tensor& dst);
using FillFn = void (*)(const Tensor& dst, double value);
void register_device_copy(DeviceType type, CopyFn copy, FillFn fill);

}  // namespace tessera
