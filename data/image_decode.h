/// @file
/// Image files to 8-bit RGB pixels: JPEG through libjpeg-turbo, with its DCT-domain scaling (a JPEG
/// decoded at 1/2, 1/4 or 1/8 of its size for little more than the cost of its entropy decoding, as
/// DALI and PIL's draft mode use it), and PNG through libspng. Greyscale, palette and CMYK images
/// become RGB and alpha is dropped, as PIL's convert('RGB') does. The size in the header is checked
/// before anything is allocated, and every problem (an unknown format, a corrupt or truncated file,
/// a size beyond the limit) raises DataError naming the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/data_file.h"  // DataError

namespace ember::data {

/// The image formats decode_image() reads.
enum class ImageFormat { jpeg, png };

/// What an image file's header says.
struct ImageInfo {
  ImageFormat format;  ///< JPEG or PNG, from the file's first bytes (not its name)
  int64_t height;      ///< rows
  int64_t width;       ///< columns
};

/// The most pixels an image may have: PIL's decompression-bomb limit (twice its MAX_IMAGE_PIXELS,
/// 89,478,485), past which PIL refuses a file too.
inline constexpr int64_t kMaxImagePixels = 2 * 89'478'485;

/// The format and size of the image in `bytes` (from `source`, named in errors). DataError for an
/// unknown format, a header that does not parse, a zero size or one above kMaxImagePixels.
ImageInfo read_image_info(std::span<const uint8_t> bytes, const std::string& source);

/// Pixels in rows of width * 3 bytes, RGB.
struct RgbImage {
  int64_t height = 0;          ///< rows
  int64_t width = 0;           ///< columns
  std::vector<uint8_t> pixels;  ///< height * width * 3 bytes, row-major, RGB interleaved
};

/// Decodes `bytes` to RGB. A JPEG is decoded at 1/scale of its size (scale 1, 2, 4 or 8;
/// ceil(side / scale) pixels a side); a PNG is always whole, and scale must then be 1. DataError
/// naming `source` for anything read_image_info() refuses, and for corrupt or truncated data (libjpeg's
/// warnings, such as a premature end of the data, count as errors); ValueError for another scale.
RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& source, int scale = 1);
/// decode_image into `out`, reusing its buffer (a loader decodes image after image into one).
void decode_image_into(std::span<const uint8_t> bytes, const std::string& source, int scale, RgbImage& out);

/// The largest of 1, 2, 4 and 8 at which a crop of crop_h x crop_w pixels still has at least
/// out_h x out_w: decoding at that scale loses nothing the resize to out_h x out_w would keep, give or
/// take the filter (the crop shrinks by at least 2 per scale step taken). 1 for a PNG.
int jpeg_scale_for(const ImageInfo& info, double crop_h, double crop_w, int64_t out_h, int64_t out_w);

}  // namespace ember::data
