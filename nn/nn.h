/// @file
/// The nn umbrella header: the functional ops, Module, init, layers and models.
#pragma once

#include "nn/attention.h"
#include "nn/checkpoint.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/layers/attention.h"
#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"
#include "nn/layers/recurrent.h"
#include "nn/loss.h"
#include "nn/models/mlp.h"
#include "nn/models/resnet.h"
#include "nn/models/vit.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
