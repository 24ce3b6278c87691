// The ember headers of the training stack (nn, optim, amp, data, dist, train), included by the parts
// of the extension that bind them, with default visibility for the reason ember_headers.h gives. Kept
// apart from ember_headers.h so that the tensor parts do not parse them.
#pragma once

#pragma GCC visibility push(default)
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/image_folder.h"
#include "data/transforms.h"
#include "dist/data_parallel.h"
#include "dist/distributed_data_parallel.h"
#include "dist/error.h"
#include "dist/init.h"
#include "dist/process_group.h"
#include "dist/zero_optimizer.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/amp/grad_scaler.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
#include "tensor/autocast.h"
#include "train/checkpoint.h"
#include "train/model_zoo.h"
#include "train/precision.h"
#pragma GCC visibility pop
