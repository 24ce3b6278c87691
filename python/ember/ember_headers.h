// The ember headers the extension uses, included with default visibility although the extension is
// compiled with -fvisibility=hidden (as nanobind advises): an inline variable of a header
// (detail::g_deterministic in tensor/deterministic.h) must stay one object shared with libember,
// not a hidden copy of the extension's own.
#pragma once

#pragma GCC visibility push(default)
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "tensor/atomic_file.h"
#include "tensor/cuda_settings.h"
#include "tensor/cuda_stream.h"
#include "tensor/decimal.h"
#include "tensor/einsum.h"
#include "tensor/layout.h"
#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tensor/safetensors.h"
#include "tensor/set_data.h"
#include "tensor/sort.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"
#pragma GCC visibility pop
