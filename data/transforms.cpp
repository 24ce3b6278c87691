// Transforms as plain loops over contiguous f32: each is one pass over the batch.
#include "data/transforms.h"

#include <algorithm>
#include <string>

#include "data/rng.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace ember::data {

namespace {

Tensor check_images(const Tensor& images, const char* op) {
  if (images.dim() != 4)
    throw ShapeError(std::string(op) + ": images must be (B,C,H,W), got " + to_string(images.shape()));
  if (images.dtype() != DType::f32)
    throw DTypeError(std::string(op) + ": images must be f32, got " + dtype_name(images.dtype()));
  return images.contiguous();
}

}  // namespace

Tensor normalize(const Tensor& images, const std::vector<float>& mean, const std::vector<float>& std) {
  const Tensor x = check_images(images, "normalize");
  const int64_t B = x.size(0), C = x.size(1), HW = x.size(2) * x.size(3);
  auto ok = [&](const std::vector<float>& v) { return v.size() == 1 || int64_t(v.size()) == C; };
  if (!ok(mean) || !ok(std))
    throw ValueError("normalize: " + std::to_string(mean.size()) + " means and " + std::to_string(std.size()) +
                     " stds for " + std::to_string(C) + " channels");
  for (float s : std)
    if (!(s > 0)) throw ValueError("normalize: std " + std::to_string(s) + " is not positive");
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const float m = mean[mean.size() == 1 ? 0 : c], s = std[std.size() == 1 ? 0 : c];
      const int64_t base = (b * C + c) * HW;
      for (int64_t i = 0; i < HW; ++i) dst[base + i] = (src[base + i] - m) / s;
    }
  return out;
}

Tensor random_crop(const Tensor& images, int64_t size, int64_t padding, Generator& gen) {
  const Tensor x = check_images(images, "random_crop");
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  if (size <= 0 || padding < 0 || size > H + 2 * padding || size > W + 2 * padding)
    throw ValueError("random_crop: size " + std::to_string(size) + " with padding " + std::to_string(padding) +
                     " does not fit images " + to_string(x.shape()));
  RandomStream rs(gen);
  Tensor out = Tensor::empty({B, C, size, size}, DType::f32);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    // Window origin in padded coordinates, then shifted back into the image's.
    const int64_t top = int64_t(rs.below(H + 2 * padding - size + 1)) - padding;
    const int64_t left = int64_t(rs.below(W + 2 * padding - size + 1)) - padding;
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = src + (b * C + c) * H * W;
      float* o = dst + (b * C + c) * size * size;
      for (int64_t i = 0; i < size; ++i) {
        const int64_t y = top + i;
        for (int64_t j = 0; j < size; ++j) {
          const int64_t xx = left + j;
          o[i * size + j] = (y >= 0 && y < H && xx >= 0 && xx < W) ? plane[y * W + xx] : 0.0f;
        }
      }
    }
  }
  return out;
}

Tensor random_horizontal_flip(const Tensor& images, double p, Generator& gen) {
  const Tensor x = check_images(images, "random_horizontal_flip");
  if (!(p >= 0 && p <= 1)) throw ValueError("random_horizontal_flip: p = " + std::to_string(p) + " is not in [0, 1]");
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  RandomStream rs(gen);
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const bool flip = rs.uniform() < p;
    for (int64_t r = 0; r < C * H; ++r) {
      const float* row = src + (b * C * H + r) * W;
      float* o = dst + (b * C * H + r) * W;
      if (flip)
        std::reverse_copy(row, row + W, o);
      else
        std::copy(row, row + W, o);
    }
  }
  return out;
}

}  // namespace ember::data
