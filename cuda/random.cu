// Kernel of RandomFill. Thread b draws Philox block first_block + b (of the resolved counter) and writes the elements that
// cpu/random.cpp maps to that block (4 per block for f32/f16/bf16 uniforms, 2 otherwise), so both
// devices fill identical tensors for one seed and offset.
#include <cmath>

#include "cuda/loops.cuh"
#include "tensor/convert.h"
#include "tensor/philox.h"

namespace ember::cuda {

namespace {

template <class T>
__global__ void __launch_bounds__(kThreads) random_kernel(T* out, int64_t n, int kind, philox::Counter counter,
                                                          int64_t low, int64_t high) {
  const philox::Counter c = counter.resolved();  // a captured step's base, read at each replay
  constexpr bool kDouble = std::is_same_v<T, double>;
  const int per_block = (kind == 0 && !kDouble) ? 4 : 2;
  const int64_t blocks = (n + per_block - 1) / per_block;
  const int64_t step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t b = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; b < blocks; b += step) {
    const philox::Block r = philox::generate(c.seed, c.first_block + static_cast<uint64_t>(b));
    const int64_t i0 = b * per_block;
    if (kind == 0) {
      if constexpr (kDouble) {
        for (int lane = 0; lane < 2 && i0 + lane < n; ++lane)
          out[i0 + lane] = philox::to_unit_double(r.v[2 * lane], r.v[2 * lane + 1]);
      } else {
        for (int lane = 0; lane < 4 && i0 + lane < n; ++lane)
          out[i0 + lane] = convert<T>(philox::to_unit_float<significand_digits<T>>(r.v[lane]));
      }
    } else if (kind == 1) {  // Box-Muller, as on the CPU: even element the cosine, odd the sine
      const double u1 = philox::to_unit_double(r.v[0], r.v[1]);
      const double u2 = philox::to_unit_double(r.v[2], r.v[3]);
      const double radius = std::sqrt(-2.0 * std::log(1.0 - u1));
      const double theta = 6.283185307179586 * u2;
      out[i0] = convert<T>(radius * std::cos(theta));
      if (i0 + 1 < n) out[i0 + 1] = convert<T>(radius * std::sin(theta));
    } else {
      const auto range = static_cast<uint64_t>(high - low);
      for (int lane = 0; lane < 2 && i0 + lane < n; ++lane) {
        const uint64_t word = (static_cast<uint64_t>(r.v[2 * lane]) << 32) | r.v[2 * lane + 1];
        out[i0 + lane] = convert<T>(low + static_cast<int64_t>(word % range));
      }
    }
  }
}

}  // namespace

void launch_random(DType dtype, int kind, philox::Counter counter, int64_t low, int64_t high, void* out,
                   int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  visit(dtype, [&]<class T>() {
    const int per_block = (kind == 0 && !std::is_same_v<T, double>) ? 4 : 2;
    const int64_t blocks = (n + per_block - 1) / per_block;
    random_kernel<T><<<grid_blocks(blocks, kThreads), kThreads, 0, stream>>>(static_cast<T*>(out), n, kind, counter,
                                                                           low, high);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
