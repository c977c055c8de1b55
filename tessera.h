// Tessera's umbrella header: the tensor engine, the differentiable op API and autograd.
#pragma once

#include "autograd/ops.h"
#include "core/factory.h"
#include "core/tensor.h"
