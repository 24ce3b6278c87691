// How conv2d chooses its cuDNN algorithms on CUDA, as torch.backends.cudnn does: benchmark mode and
// TF32. Process-wide switches; they change nothing on the CPU or in a build without cuDNN.
#pragma once

#include <cstddef>

namespace ember::cuda {

// Benchmark mode (torch.backends.cudnn.benchmark): the first convolution of each problem times
// cuDNN's algorithms on its real buffers and keeps the fastest. Off (the default): cuDNN's
// heuristics choose, without running anything.
void set_benchmark(bool on);
bool benchmark();

// Lets f32 convolutions run on TF32 tensor cores (inputs rounded to a 10-bit mantissa). Off by default.
void set_conv_allow_tf32(bool on);
bool conv_allow_tf32();

// The number of algorithm choices cached (one per shape, layout, dtype, parameters, direction,
// device, math mode and benchmark mode; always 0 without cuDNN), and emptying that cache.
size_t conv_algorithm_cache_size();
void clear_conv_algorithm_cache();

}  // namespace ember::cuda
