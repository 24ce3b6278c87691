/// @file
/// The per-image transforms of ImageNet training, with torchvision's semantics, fused into one pass:
/// the crop box is chosen from the header's size (RandomResizedCrop's sampling rule, or Resize then
/// CenterCrop for evaluation), the JPEG is decoded at the DCT scale the box allows, and one resampling
/// pass (antialiased bilinear, torchvision's antialias=True, PIL's BILINEAR) reads the box, flips,
/// normalises and writes the sample straight into its slot of the batch, NCHW or channels-last, in
/// float32, float16 or bfloat16.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "data/image_decode.h"
#include "data/rng.h"
#include "tensor/tensor.h"

namespace ember::data {

/// A box of an image in pixel coordinates: rows [top, top + height), columns [left, left + width).
/// Fractional after a DCT-scaled decode divides it.
struct CropBox {
  double top = 0;     ///< first row
  double left = 0;    ///< first column
  double height = 0;  ///< rows
  double width = 0;   ///< columns
  bool operator==(const CropBox&) const = default;  ///< Same box.
};

/// torchvision's RandomResizedCrop.get_params on an image of height x width: up to ten tries of an
/// area fraction uniform in `scale` and a log-uniform aspect ratio (width / height) in `ratio`, sides
/// rounded, placed uniformly; then the central crop clamped to `ratio`. Integer boxes.
CropBox random_resized_crop_box(int64_t height, int64_t width, std::pair<double, double> scale,
                                std::pair<double, double> ratio, RandomStream& rs);
/// The box of the source that Resize(resize) (the shorter side to `resize`, the longer side scaled
/// and truncated, torchvision's rule) followed by CenterCrop(crop_h, crop_w) keeps. ValueError when the
/// crop is larger than the resized image.
CropBox resize_center_crop_box(int64_t height, int64_t width, int64_t resize, int64_t crop_h, int64_t crop_w);

/// Where one sample goes: its first element and the element strides of its channels, rows and
/// columns (NCHW: H*W, W, 1; channels-last: 1, W*C, C).
struct SampleSlot {
  void* data;       ///< element (0, 0, 0) of the sample
  DType dtype;      ///< f32, f16 or bf16
  int64_t stride_c;  ///< elements between channels
  int64_t stride_h;  ///< elements between rows
  int64_t stride_w;  ///< elements between columns
};

/// Resamples `box` of `image` to out_h x out_w with the antialiased bilinear filter (a triangle whose
/// support grows with the downscale factor, as PIL and torchvision's antialias=True), mirrored left-right
/// when `flip`, and writes (v / 255 - mean[c]) / stddev[c] to `slot`. Computed in float; one rounding, at
/// the store. ValueError for an empty box or one outside the image.
void resample_to(const RgbImage& image, const CropBox& box, int64_t out_h, int64_t out_w, bool flip,
                 const std::array<float, 3>& mean, const std::array<float, 3>& stddev, const SampleSlot& slot);

/// ImageNet's normalisation (torchvision's reference scripts): the mean per RGB channel of the
/// training set, on [0, 1] values.
inline constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
/// And the standard deviation per RGB channel.
inline constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};

/// The whole per-image pipeline of a data set of image files.
struct ImageTransformOptions {
  bool train = true;  ///< RandomResizedCrop + flip (true), or Resize + CenterCrop (false)
  int64_t size = 224;  ///< the output's side (both crops)
  int64_t resize = 256;  ///< evaluation: the shorter side before the center crop
  std::pair<double, double> scale{0.08, 1.0};          ///< RandomResizedCrop's area fractions
  std::pair<double, double> ratio{3.0 / 4.0, 4.0 / 3.0};  ///< and aspect ratios (width / height)
  double flip_p = 0.5;                                 ///< RandomHorizontalFlip's probability (training)
  std::array<float, 3> mean = kImageNetMean;           ///< Normalize's mean
  std::array<float, 3> stddev = kImageNetStd;          ///< and standard deviation
  DType dtype = DType::f32;                            ///< of the batch: f32, f16 or bf16
  bool channels_last = false;  ///< the batch in channels-last memory (its shape stays (B, 3, size, size))
  bool dct_scaling = true;     ///< decode JPEGs at 1/2, 1/4, 1/8 when the crop allows it (jpeg_scale_for)
};

/// ValueError naming the field for options no pipeline can run (a size below 1, an empty or inverted
/// range, a flip probability outside [0, 1], a stddev of 0, a dtype other than f32, f16, bf16).
void check_image_transform(const ImageTransformOptions& options);

/// Runs the pipeline on one file's bytes into `slot`: header, crop box (random draws from `rs`), decode
/// at the allowed scale, resample. decode_image's DataError naming `source` for a bad file.
void transform_image(std::span<const uint8_t> bytes, const std::string& source, const ImageTransformOptions& options,
                     RandomStream& rs, const SampleSlot& slot);

}  // namespace ember::data
