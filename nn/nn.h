// The nn umbrella header: Module, init, layers and models (functional ops come with their layers).
#pragma once

#include "nn/init.h"
#include "nn/layers/attention.h"
#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"
#include "nn/models/mlp.h"
#include "nn/models/resnet.h"
#include "nn/models/vit.h"
#include "nn/module.h"
