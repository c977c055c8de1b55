// Umbrella header of models/nn: Module, the layers and their factories.
#pragma once

#include "models/nn/factory.h"
#include "models/nn/module.h"
#include "models/nn/module_list.h"
