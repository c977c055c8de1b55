// Everything in optim/: optimizers, the JSON factory, LR schedules, clipping, loss scaling and
// master weights.
#pragma once

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/make_optimizer.h"
#include "optim/mixed_precision.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
