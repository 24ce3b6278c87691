// CPU kernel of RandomFill: element i reads its words from Philox block first_block + i / k, the
// same words the CUDA kernel reads, so both devices draw identical tensors for one seed.
#include <cmath>

#include "cpu/parallel.h"
#include "tensor/convert.h"
#include "tensor/math.h"
#include "tensor/philox.h"
#include "tensor/primitives/creation.h"

namespace ember {

void RandomFill::eval_cpu(const std::vector<Tensor>&, std::vector<Tensor>& out) {
  const Tensor& t = out[0];
  const int64_t n = t.numel();
  const philox::Counter c = counter_.resolved();  // reads the base of a captured step
  visit(t.dtype(), [&]<class T>() {
    T* p = t.data<T>();
    cpu::parallel_for(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (kind_ == Kind::uniform) {
          if constexpr (std::is_same_v<T, double>) {
            const philox::Block b = philox::generate(c.seed, c.first_block + i / 2);
            const int lane = 2 * static_cast<int>(i % 2);
            p[i] = philox::to_unit_double(b.v[lane], b.v[lane + 1]);
          } else {
            const philox::Block b = philox::generate(c.seed, c.first_block + i / 4);
            p[i] = convert<T>(philox::to_unit_float<significand_digits<T>>(b.v[i % 4]));
          }
        } else if (kind_ == Kind::normal) {
          // Box-Muller on the pair (u1, u2) of block i / 2; even i takes the cosine, odd the sine.
          const philox::Block b = philox::generate(c.seed, c.first_block + i / 2);
          const double u1 = philox::to_unit_double(b.v[0], b.v[1]);
          const double u2 = philox::to_unit_double(b.v[2], b.v[3]);
          const double r = std::sqrt(-2.0 * math::log(1.0 - u1));  // 1 - u1 is in (0, 1]
          const double theta = 6.283185307179586 * u2;
          p[i] = convert<T>(i % 2 == 0 ? r * math::cos(theta) : r * math::sin(theta));
        } else {
          const philox::Block b = philox::generate(c.seed, c.first_block + i / 2);
          const int lane = 2 * static_cast<int>(i % 2);
          const uint64_t word = (static_cast<uint64_t>(b.v[lane]) << 32) | b.v[lane + 1];
          const auto range = static_cast<uint64_t>(high_ - low_);
          p[i] = convert<T>(low_ + static_cast<int64_t>(word % range));  // bias below 2^-32 for ranges < 2^32
        }
      }
    });
  });
}

}  // namespace ember
