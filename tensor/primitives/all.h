// Every primitive, for code that must treat all of them alike (the throwing CUDA definitions of a
// build without CUDA). A new primitive class is added to its family header and to this list.
#pragma once

#include "tensor/primitives/creation.h"
#include "tensor/primitives/elementwise.h"
#include "tensor/primitives/index.h"
#include "tensor/primitives/linalg.h"
#include "tensor/primitives/reduce.h"
#include "tensor/primitives/scan.h"
#include "tensor/primitives/sort.h"

// Primitives with kernels (view primitives have none). Unary<Op>/Binary<Op> follow their op lists.
#define EMBER_KERNEL_PRIMITIVES(X) \
  X(Where)                         \
  X(Cast)                          \
  X(CopyInto)                      \
  X(Fill)                          \
  X(Sum)                           \
  X(Prod)                          \
  X(Extremum)                      \
  X(ArgExtremum)                   \
  X(CumulativeSum)                 \
  X(SortRows)                      \
  X(Cat)                           \
  X(IndexSelect)                   \
  X(IndexAdd)                      \
  X(Gather)                        \
  X(ScatterAdd)                    \
  X(Matmul)                        \
  X(Linear)                        \
  X(Softmax)                       \
  X(RandomFill)
