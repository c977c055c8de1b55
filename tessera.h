// Tessera's umbrella header: the tensor engine, the differentiable op API and autograd, the nn
// modules, the optimizers, and the distributed runtime (communicators, mesh, parallel context,
// tensor-parallel placements, the ZeRO sharded optimizer).
#pragma once

#include "autograd/ops.h"
#include "core/factory.h"
#include "core/tensor.h"
#include "models/nn/nn.h"
#include "optim/optim.h"
#include "parallel/comm/communicator.h"
#include "parallel/comm/config_check.h"
#include "parallel/comm/mpi_communicator.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/pipeline/executor.h"
#include "parallel/sequence/attention.h"
#include "parallel/tensor/placement_ops.h"
#include "parallel/zero/sharded_optimizer.h"
