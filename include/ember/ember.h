/// @file
/// Everything a training program needs, in one include: `#include <ember/ember.h>`. Tensors and
/// their ops, autograd (custom functions too), nn (functional ops, layers, models), optimizers, schedules and clipping,
/// mixed precision (autocast, GradScaler), data loading, checkpoints (safetensors, state dicts),
/// and data parallelism (process groups, DataParallel over DDP and ZeRO). Installed, each header is also reachable as
/// <ember/tensor/ops.h> and, as before, "tensor/ops.h" (ember.pc puts both directories on the path).
#pragma once

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "data/dataloader.h"
#include "data/distributed_sampler.h"
#include "dist/data_parallel.h"
#include "dist/distributed_data_parallel.h"
#include "dist/init.h"
#include "dist/zero_optimizer.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/amp/grad_scaler.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tensor/autocast.h"
#include "tensor/einsum.h"
#include "tensor/layout.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tensor/sort.h"
#include "tensor/state_dict.h"
