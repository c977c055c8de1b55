// For CUDA tests: TS_REQUIRE_GPU() ends a test case early, with one clear message, on a machine
// without a usable GPU, so the same tests build everywhere and run where a GPU is.
#pragma once

#include <catch2/catch.hpp>

#include "core/cuda/runtime.h"

#define TS_REQUIRE_GPU()                                                                    \
  do {                                                                                      \
    if (!::tessera::cuda::is_available()) {                                                 \
      WARN("skipped: this test needs a CUDA GPU; " << ::tessera::cuda::unavailable_reason()); \
      return;                                                                               \
    }                                                                                       \
  } while (0)
