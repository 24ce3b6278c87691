/// @file
/// The process-wide switches of the CUDA backend, as torch.backends.cuda and torch.backends.cudnn
/// hold them: TF32 for matmul and conv, cuDNN benchmark mode, and the caches they steer. Every build
/// has them (a CPU-only program may set them too); they change nothing on the CPU.
#pragma once

#include <cstddef>

namespace ember::cuda {

/// Lets f32 matmul, bmm and linear run on TF32 tensor cores (cuBLASLt's CUBLAS_COMPUTE_32F_FAST_TF32:
/// inputs rounded to a 10-bit mantissa, f32 accumulation), as torch.backends.cuda.matmul.allow_tf32.
/// Off by default.
void set_matmul_allow_tf32(bool on);
bool matmul_allow_tf32();  ///< Whether f32 matmul may run on TF32 (set_matmul_allow_tf32).

/// The number of cuBLASLt plans cached (one per shape, strides, dtype, transposes, alignment,
/// epilogue, compute type, device and deterministic mode; always 0 without CUDA).
size_t matmul_plan_cache_size();

/// Benchmark mode (torch.backends.cudnn.benchmark): the first convolution of each problem times
/// cuDNN's algorithms on its real buffers and keeps the fastest. Off (the default): cuDNN's
/// heuristics choose, without running anything.
void set_benchmark(bool on);
bool benchmark();  ///< Whether benchmark mode is on (set_benchmark).

/// Lets f32 convolutions run on TF32 tensor cores (inputs rounded to a 10-bit mantissa). Off by default.
void set_conv_allow_tf32(bool on);
bool conv_allow_tf32();  ///< Whether f32 convolutions may run on TF32 (set_conv_allow_tf32).

/// The number of conv algorithm choices cached (one per shape, layout, dtype, parameters, direction,
/// device, math mode, benchmark mode and deterministic mode; always 0 without cuDNN).
/// In deterministic mode (tensor/deterministic.h) benchmark mode is ignored.
size_t conv_algorithm_cache_size();
void clear_conv_algorithm_cache();  ///< Forgets every cached conv algorithm choice.

}  // namespace ember::cuda
