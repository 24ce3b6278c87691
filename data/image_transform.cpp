#include "data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/convert.h"
#include "tensor/error.h"

namespace ember::data {

namespace {

// Python's round(): to nearest, ties to even (std::nearbyint in the default rounding mode).
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// The taps of every output pixel of one axis, in flat tables: output i reads inputs
// [first[i], first[i] + count[i]) with weights[i * width + k].
struct AxisTaps {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<float> weights;
  int64_t width = 0;  // the most taps of any output pixel
};

// PIL's precompute_coeffs for the bilinear (triangle) filter, support 1 scaled by the downscale
// factor (Imaging/Resample.c; torchvision's antialiased kernels compute the same weights): output
// pixel i of `out` covers [box0, box0 + box_len) of an input axis of `in` pixels.
void bilinear_taps(double box0, double box_len, int64_t in, int64_t out, AxisTaps& taps) {
  const double scale = box_len / static_cast<double>(out);
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's support is 1 before scaling
  taps.width = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  taps.first.assign(static_cast<size_t>(out), 0);
  taps.count.assign(static_cast<size_t>(out), 0);
  taps.weights.assign(static_cast<size_t>(out * taps.width), 0.0f);
  std::vector<double> w(static_cast<size_t>(taps.width));
  for (int64_t i = 0; i < out; ++i) {
    const double center = box0 + (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    const int64_t n = std::min(hi - lo, taps.width);
    double total = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double d = std::abs((static_cast<double>(lo + k) - center + 0.5) / filter_scale);
      w[static_cast<size_t>(k)] = d < 1 ? 1 - d : 0;
      total += w[static_cast<size_t>(k)];
    }
    taps.first[static_cast<size_t>(i)] = lo;
    taps.count[static_cast<size_t>(i)] = n;
    for (int64_t k = 0; k < n; ++k)
      taps.weights[static_cast<size_t>(i * taps.width + k)] =
          static_cast<float>(total != 0 ? w[static_cast<size_t>(k)] / total : 0);
  }
}

// What one thread reuses from image to image: tap tables and the intermediate rows.
struct ResampleScratch {
  AxisTaps across, down;
  std::vector<float> rows, line;
};
thread_local ResampleScratch scratch;

template <class T>
void store_row(const float* rgb, int64_t out_w, const SampleSlot& slot, int64_t y) {
  T* row = static_cast<T*>(slot.data) + y * slot.stride_h;
  if (slot.stride_c == 1 && slot.stride_w == 3) {  // channels-last: the row is contiguous
    for (int64_t i = 0; i < out_w * 3; ++i) row[i] = convert<T>(rgb[i]);
    return;
  }
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t x = 0; x < out_w; ++x) row[c * slot.stride_c + x * slot.stride_w] = convert<T>(rgb[x * 3 + c]);
}

}  // namespace

CropBox random_resized_crop_box(int64_t height, int64_t width, std::pair<double, double> scale,
                                std::pair<double, double> ratio, RandomStream& rs) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_r0 = std::log(ratio.first), log_r1 = std::log(ratio.second);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * (scale.first + (scale.second - scale.first) * rs.uniform_double());
    const double aspect = std::exp(log_r0 + (log_r1 - log_r0) * rs.uniform_double());
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t top = static_cast<int64_t>(rs.below(static_cast<uint64_t>(height - h + 1)));
      const int64_t left = static_cast<int64_t>(rs.below(static_cast<uint64_t>(width - w + 1)));
      return {double(top), double(left), double(h), double(w)};
    }
  }
  // The central crop, its aspect ratio clamped to `ratio`.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < std::min(ratio.first, ratio.second)) {
    h = round_half_even(static_cast<double>(w) / std::min(ratio.first, ratio.second));
  } else if (in_ratio > std::max(ratio.first, ratio.second)) {
    w = round_half_even(static_cast<double>(h) * std::max(ratio.first, ratio.second));
  }
  return {double((height - h) / 2), double((width - w) / 2), double(h), double(w)};
}

CropBox resize_center_crop_box(int64_t height, int64_t width, int64_t resize, int64_t crop_h, int64_t crop_w) {
  const bool portrait = width <= height;
  const int64_t shorter = portrait ? width : height, longer = portrait ? height : width;
  const int64_t new_long = static_cast<int64_t>(static_cast<double>(resize) * static_cast<double>(longer) /
                                                static_cast<double>(shorter));  // truncated, as int() is
  const int64_t new_h = portrait ? new_long : resize, new_w = portrait ? resize : new_long;
  if (crop_h > new_h || crop_w > new_w)
    throw ValueError("CenterCrop(" + std::to_string(crop_h) + ", " + std::to_string(crop_w) + ") is larger than the image " +
                     std::to_string(new_w) + " x " + std::to_string(new_h) + " after Resize(" + std::to_string(resize) +
                     ") of " + std::to_string(width) + " x " + std::to_string(height));
  const int64_t top = round_half_even(static_cast<double>(new_h - crop_h) / 2.0);
  const int64_t left = round_half_even(static_cast<double>(new_w - crop_w) / 2.0);
  // The same box in the source's pixels: resampling it at the resize's scale gives exactly the pixels
  // that resizing the whole image and then cropping would.
  const double sy = static_cast<double>(height) / static_cast<double>(new_h);
  const double sx = static_cast<double>(width) / static_cast<double>(new_w);
  return {double(top) * sy, double(left) * sx, double(crop_h) * sy, double(crop_w) * sx};
}

void resample_to(const RgbImage& image, const CropBox& box, int64_t out_h, int64_t out_w, bool flip,
                 const std::array<float, 3>& mean, const std::array<float, 3>& stddev, const SampleSlot& slot) {
  const double slack = 1e-6;  // a box mapped through a DCT scale may overshoot the edge by rounding
  if (!(box.height > 0 && box.width > 0 && box.top >= -slack && box.left >= -slack &&
        box.top + box.height <= static_cast<double>(image.height) + slack &&
        box.left + box.width <= static_cast<double>(image.width) + slack) ||
      out_h < 1 || out_w < 1)
    throw ValueError("resample_to: box (top " + std::to_string(box.top) + ", left " + std::to_string(box.left) +
                     ", " + std::to_string(box.width) + " x " + std::to_string(box.height) + ") of a " +
                     std::to_string(image.width) + " x " + std::to_string(image.height) + " image to " +
                     std::to_string(out_w) + " x " + std::to_string(out_h));
  ResampleScratch& s = scratch;
  bilinear_taps(box.left, box.width, image.width, out_w, s.across);
  bilinear_taps(box.top, box.height, image.height, out_h, s.down);
  // Horizontal pass over the rows the vertical taps read (mirrored when flipping), then the vertical one.
  const int64_t row0 = s.down.first.front();
  const int64_t row1 = s.down.first.back() + s.down.count.back();
  s.rows.resize(static_cast<size_t>((row1 - row0) * out_w * 3));
  const AxisTaps& across = s.across;
  for (int64_t y = row0; y < row1; ++y) {
    const uint8_t* src = image.pixels.data() + y * image.width * 3;
    float* dst = s.rows.data() + (y - row0) * out_w * 3;
    for (int64_t x = 0; x < out_w; ++x) {
      const uint8_t* p = src + across.first[static_cast<size_t>(x)] * 3;
      const float* w = across.weights.data() + x * across.width;
      float r = 0, g = 0, b = 0;
      for (int64_t k = 0, n = across.count[static_cast<size_t>(x)]; k < n; ++k, p += 3) {
        r += w[k] * static_cast<float>(p[0]);
        g += w[k] * static_cast<float>(p[1]);
        b += w[k] * static_cast<float>(p[2]);
      }
      float* o = dst + (flip ? out_w - 1 - x : x) * 3;
      o[0] = r, o[1] = g, o[2] = b;
    }
  }
  // (v / 255 - mean) / stddev = v * gain + bias, per channel, repeated along the row.
  float gain[3], bias[3];
  for (int c = 0; c < 3; ++c) {
    gain[c] = 1.0f / (255.0f * stddev[c]);
    bias[c] = -mean[c] / stddev[c];
  }
  s.line.resize(static_cast<size_t>(out_w * 3));
  float* line = s.line.data();
  for (int64_t y = 0; y < out_h; ++y) {
    std::fill(line, line + out_w * 3, 0.0f);
    const float* w = s.down.weights.data() + y * s.down.width;
    for (int64_t k = 0, n = s.down.count[static_cast<size_t>(y)]; k < n; ++k) {
      const float* src = s.rows.data() + (s.down.first[static_cast<size_t>(y)] + k - row0) * out_w * 3;
      for (int64_t i = 0; i < out_w * 3; ++i) line[i] += w[k] * src[i];
    }
    for (int64_t x = 0; x < out_w; ++x)
      for (int c = 0; c < 3; ++c) line[x * 3 + c] = line[x * 3 + c] * gain[c] + bias[c];
    switch (slot.dtype) {
      case DType::f32: store_row<float>(line, out_w, slot, y); break;
      case DType::f16: store_row<f16>(line, out_w, slot, y); break;
      case DType::bf16: store_row<bf16>(line, out_w, slot, y); break;
      default:
        throw DTypeError(std::string("resample_to: the batch must be float32, float16 or bfloat16, not ") +
                         dtype_name(slot.dtype));
    }
  }
}

void check_image_transform(const ImageTransformOptions& o) {
  const auto bad = [](const std::string& what) { throw ValueError("image transform: " + what); };
  if (o.size < 1) bad("size must be at least 1, got " + std::to_string(o.size));
  if (!o.train && o.resize < o.size)
    bad("resize (" + std::to_string(o.resize) + ") must be at least size (" + std::to_string(o.size) + ")");
  if (!(0 < o.scale.first && o.scale.first <= o.scale.second && o.scale.second <= 1))
    bad("scale must satisfy 0 < min <= max <= 1, got (" + std::to_string(o.scale.first) + ", " +
        std::to_string(o.scale.second) + ")");
  if (!(0 < o.ratio.first && o.ratio.first <= o.ratio.second && std::isfinite(o.ratio.second)))
    bad("ratio must satisfy 0 < min <= max, got (" + std::to_string(o.ratio.first) + ", " +
        std::to_string(o.ratio.second) + ")");
  if (!(o.flip_p >= 0 && o.flip_p <= 1)) bad("flip_p must be in [0, 1], got " + std::to_string(o.flip_p));
  for (int c = 0; c < 3; ++c)
    if (!(o.stddev[c] != 0 && std::isfinite(o.stddev[c]) && std::isfinite(o.mean[c])))
      bad("mean and stddev must be finite and stddev nonzero; channel " + std::to_string(c) + " has mean " +
          std::to_string(o.mean[c]) + ", stddev " + std::to_string(o.stddev[c]));
  if (o.dtype != DType::f32 && o.dtype != DType::f16 && o.dtype != DType::bf16)
    bad(std::string("dtype must be float32, float16 or bfloat16, got ") + dtype_name(o.dtype));
}

void transform_image(std::span<const uint8_t> bytes, const std::string& source, const ImageTransformOptions& o,
                     RandomStream& rs, const SampleSlot& slot) {
  const ImageInfo info = read_image_info(bytes, source);
  const CropBox box = o.train ? random_resized_crop_box(info.height, info.width, o.scale, o.ratio, rs)
                              : resize_center_crop_box(info.height, info.width, o.resize, o.size, o.size);
  const bool flip = o.train && rs.uniform_double() < o.flip_p;  // torchvision: torch.rand(1) < p
  const int scale = o.dct_scaling ? jpeg_scale_for(info, box.height, box.width, o.size, o.size) : 1;
  thread_local RgbImage image;  // its buffer reused from image to image
  decode_image_into(bytes, source, scale, image);
  // The box in the decoded pixels: pixel j of a JPEG decoded at 1/scale is source pixels
  // [j * scale, (j + 1) * scale) (the DCT scales each 8 x 8 block to 8 / scale), so coordinates divide by
  // scale exactly; only the last pixel of a side that scale does not divide covers less.
  const double inv = 1.0 / static_cast<double>(scale);
  const CropBox scaled{box.top * inv, box.left * inv, box.height * inv, box.width * inv};
  resample_to(image, scaled, o.size, o.size, flip, o.mean, o.stddev, slot);
}

}  // namespace ember::data
