#include "data/image_decode.h"

#include <spng.h>
#include <turbojpeg.h>

#include <algorithm>
#include <memory>

#include "tensor/error.h"

namespace ember::data {

namespace {

bool is_jpeg(std::span<const uint8_t> b) { return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
bool is_png(std::span<const uint8_t> b) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return b.size() >= 8 && std::equal(kSignature, kSignature + 8, b.begin());
}

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw DataError(source + ": " + what); }

void check_size(const std::string& source, int64_t height, int64_t width) {
  if (height <= 0 || width <= 0)
    fail(source, "the header gives a size of " + std::to_string(width) + " x " + std::to_string(height) + " pixels");
  if (height > kMaxImagePixels / width)
    fail(source, "the header gives " + std::to_string(width) + " x " + std::to_string(height) +
                     " pixels, more than the limit of " + std::to_string(kMaxImagePixels) + " (a decompression bomb?)");
}

// One decompressor per thread: loader workers decode side by side, and a handle is not thread-safe.
// A handle that failed is replaced: libjpeg-turbo 2.1 leaves it mid-stream after an error, and the
// next image would then fail too ("Unsupported marker type").
struct JpegDecompressor {
  tjhandle handle = nullptr;
  ~JpegDecompressor() { reset(); }
  void reset() {
    if (handle) tjDestroy(handle);
    handle = nullptr;
  }
  tjhandle get() {
    if (!handle) handle = tjInitDecompress();
    if (!handle) throw DataError(std::string("libjpeg-turbo: cannot create a decompressor: ") + tjGetErrorStr2(nullptr));
    return handle;
  }
};
thread_local JpegDecompressor jpeg;

// Raises DataError naming `source`, with libjpeg's message, and drops the failed handle.
[[noreturn]] void fail_jpeg(const std::string& source, const std::string& what) {
  const std::string detail = tjGetErrorStr2(jpeg.handle);
  jpeg.reset();
  fail(source, what + " (" + detail + ")");
}

struct JpegHeader {
  int width, height, subsampling, colorspace;
};

JpegHeader jpeg_header(std::span<const uint8_t> bytes, const std::string& source) {
  JpegHeader h{};
  if (tjDecompressHeader3(jpeg.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), &h.width, &h.height,
                          &h.subsampling, &h.colorspace) != 0)
    fail_jpeg(source, "not a readable JPEG header: corrupt or truncated");
  check_size(source, h.height, h.width);
  return h;
}

using SpngContext = std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)>;

// A decoder over `bytes` whose header was read and checked.
SpngContext png_context(std::span<const uint8_t> bytes, const std::string& source, spng_ihdr& ihdr) {
  SpngContext ctx(spng_ctx_new(0), &spng_ctx_free);
  if (!ctx) fail(source, "libspng: cannot create a decoder");
  // Chunks that the decoder keeps (text, ICC profiles) may not claim more than the file holds.
  spng_set_chunk_limits(ctx.get(), bytes.size(), bytes.size());
  int err = spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size());
  if (err == 0) err = spng_get_ihdr(ctx.get(), &ihdr);
  if (err != 0) fail(source, std::string("not a readable PNG header: corrupt or truncated (") + spng_strerror(err) + ")");
  check_size(source, ihdr.height, ihdr.width);
  return ctx;
}

// Adobe's CMYK, as Photoshop writes it and PIL reads it when the Adobe marker is there: the stored
// values are inverted (255 - ink), and convert('RGB') takes r = 255 - min(255, c + k) on the inks.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t pixels) {
  for (int64_t i = 0; i < pixels; ++i) {
    const int k_ink = 255 - cmyk[4 * i + 3];
    for (int c = 0; c < 3; ++c) rgb[3 * i + c] = static_cast<uint8_t>(255 - std::min(255, (255 - cmyk[4 * i + c]) + k_ink));
  }
}

void decode_jpeg(std::span<const uint8_t> bytes, const std::string& source, int scale, RgbImage& out) {
  const JpegHeader h = jpeg_header(bytes, source);
  const tjscalingfactor factor{1, scale};
  out.width = TJSCALED(h.width, factor);
  out.height = TJSCALED(h.height, factor);
  const bool cmyk = h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK;
  std::vector<uint8_t> cmyk_pixels(cmyk ? static_cast<size_t>(out.height * out.width * 4) : 0);
  out.pixels.resize(static_cast<size_t>(out.height * out.width * 3));
  uint8_t* dst = cmyk ? cmyk_pixels.data() : out.pixels.data();
  if (tjDecompress2(jpeg.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), dst, static_cast<int>(out.width),
                    0, static_cast<int>(out.height), cmyk ? TJPF_CMYK : TJPF_RGB, TJFLAG_STOPONWARNING) != 0)
    fail_jpeg(source, "corrupt or truncated JPEG data");
  if (cmyk) cmyk_to_rgb(cmyk_pixels.data(), out.pixels.data(), out.height * out.width);
}

// The fewest bytes a PNG's pixels inflate to: each row's samples, without the filter bytes.
uint64_t png_pixel_bytes(const spng_ihdr& h) {
  const uint64_t channels = h.color_type == SPNG_COLOR_TYPE_TRUECOLOR         ? 3
                            : h.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4
                            : h.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
                                                                               : 1;  // gray, palette
  return uint64_t{h.height} * ((uint64_t{h.width} * channels * h.bit_depth + 7) / 8);
}

void decode_png(std::span<const uint8_t> bytes, const std::string& source, RgbImage& out) {
  spng_ihdr ihdr{};
  const SpngContext ctx = png_context(bytes, source, ihdr);
  // Deflate expands at most 1032-fold (zlib's technical notes): a header claiming more pixels than
  // the file could inflate to is refused before the pixel buffer (13000 x 13000 x 3 from 69 bytes).
  if (png_pixel_bytes(ihdr) > uint64_t{1032} * bytes.size())
    fail(source, "a PNG of " + std::to_string(bytes.size()) + " bytes cannot hold the " + std::to_string(ihdr.width) +
                     " x " + std::to_string(ihdr.height) + " pixels its header claims (the file is cut or corrupt)");
  size_t size = 0;
  int err = spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &size);
  out.height = ihdr.height;
  out.width = ihdr.width;
  if (err == 0 && size != static_cast<size_t>(out.height * out.width * 3))
    fail(source, "libspng would decode " + std::to_string(size) + " bytes for " + std::to_string(out.width) + " x " +
                     std::to_string(out.height) + " RGB pixels");
  if (err == 0) {
    out.pixels.resize(size);
    err = spng_decode_image(ctx.get(), out.pixels.data(), size, SPNG_FMT_RGB8, 0);
  }
  if (err != 0) fail(source, std::string("corrupt or truncated PNG data (") + spng_strerror(err) + ")");
}

// The format the file's first bytes announce; DataError for an empty file or another format.
ImageFormat format_of(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.empty()) fail(source, "the file is empty (0 bytes), not an image");
  if (is_jpeg(bytes)) return ImageFormat::jpeg;
  if (is_png(bytes)) return ImageFormat::png;
  fail(source, "neither a JPEG nor a PNG file (it starts with neither's signature)");
}

}  // namespace

ImageInfo read_image_info(std::span<const uint8_t> bytes, const std::string& source) {
  if (format_of(bytes, source) == ImageFormat::jpeg) {
    const JpegHeader h = jpeg_header(bytes, source);
    return {ImageFormat::jpeg, h.height, h.width};
  }
  spng_ihdr ihdr{};
  png_context(bytes, source, ihdr);
  return {ImageFormat::png, static_cast<int64_t>(ihdr.height), static_cast<int64_t>(ihdr.width)};
}

void decode_image_into(std::span<const uint8_t> bytes, const std::string& source, int scale, RgbImage& out) {
  if (scale != 1 && scale != 2 && scale != 4 && scale != 8)
    throw ValueError("decode_image: scale must be 1, 2, 4 or 8, got " + std::to_string(scale));
  // Each decoder reads and checks its header itself: no separate read_image_info pass.
  if (format_of(bytes, source) == ImageFormat::png) {
    if (scale != 1) throw ValueError("decode_image: " + source + " is a PNG, decoded whole only; scale " + std::to_string(scale));
    decode_png(bytes, source, out);
  } else {
    decode_jpeg(bytes, source, scale, out);
  }
}

RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& source, int scale) {
  RgbImage out;
  decode_image_into(bytes, source, scale, out);
  return out;
}

int jpeg_scale_for(const ImageInfo& info, double crop_h, double crop_w, int64_t out_h, int64_t out_w) {
  if (info.format != ImageFormat::jpeg) return 1;
  int scale = 1;
  while (scale < 8 && crop_h / (2 * scale) >= static_cast<double>(out_h) && crop_w / (2 * scale) >= static_cast<double>(out_w))
    scale *= 2;
  return scale;
}

}  // namespace ember::data
