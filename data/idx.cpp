// IDX reader: the header is 0x00 0x00 <type> <ndim>, then ndim big-endian u32 sizes, then the data.
#include "data/idx.h"

#include <algorithm>
#include <cstring>

#include "tensor/ops.h"
#include "tensor/printable.h"

namespace ember::data {

namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

Tensor read_idx(const std::string& path, int expected_ndim) {
  DataFile file(path);
  uint8_t magic_bytes[4];
  const size_t got = file.read(magic_bytes, 4);
  if (got < 4)
    throw DataError(printable_path(path) + ": truncated: " + std::to_string(got) + " bytes, too short for an IDX magic number");
  const uint32_t magic = be32(magic_bytes);
  const int ndim = magic_bytes[3];
  if (magic_bytes[0] != 0 || magic_bytes[1] != 0 || magic_bytes[2] != 0x08 || ndim == 0 ||
      (expected_ndim > 0 && ndim != expected_ndim)) {
    std::string want = expected_ndim > 0 ? hex32(0x800u + expected_ndim) : "0x0000080N";
    throw DataError(printable_path(path) + ": bad magic number " + hex32(magic) + ", expected " + want +
                    " (an IDX file of unsigned bytes)");
  }
  const size_t header = 4 + 4 * size_t(ndim);
  uint8_t dims[4 * 255];
  if (const size_t found = 4 + file.read(dims, 4 * size_t(ndim)); found < header)
    throw DataError(printable_path(path) + ": truncated: header needs " + std::to_string(header) + " bytes, found " + std::to_string(found));
  Shape shape;
  uint64_t promised = 1, extent = 1;  // extent: zero dims counted as one, as the strides count them
  for (int d = 0; d < ndim; ++d) {
    const uint32_t n = be32(dims + 4 * d);
    if (d > 0 && n == 0) throw DataError(printable_path(path) + ": bad dims: dim " + std::to_string(d) + " is 0");
    promised *= n;
    extent *= std::max<uint32_t>(n, 1);
    if (extent > (uint64_t(1) << 40))
      throw DataError(printable_path(path) + ": bad dims: header promises more than 2^40 bytes");
    shape.push_back(int64_t(n));
  }
  // Checked before allocating: a header may promise more than the file can hold.
  const uint64_t room = file.max_content_bytes() - std::min<uint64_t>(header, file.max_content_bytes());
  if (promised > room)
    throw DataError(printable_path(path) + ": truncated: header promises " + std::to_string(promised) + " bytes of data, " +
                    (file.compressed() ? "more than the compressed file can hold" : "found " + std::to_string(room)));
  Tensor t = Tensor::empty(shape, DType::u8);
  const uint64_t found = promised ? file.read(t.data<uint8_t>(), promised) : 0;
  if (found < promised)
    throw DataError(printable_path(path) + ": truncated: header promises " + std::to_string(promised) + " bytes of data, found " +
                    std::to_string(found));
  if (const uint64_t trailing = file.skip_rest())
    throw DataError(printable_path(path) + ": " + std::to_string(trailing) + " trailing bytes: header promises " +
                    std::to_string(promised) + " bytes of data, found " + std::to_string(found + trailing));
  return t;
}

Tensor read_idx_images(const std::string& path) { return read_idx(path, 3); }

Tensor read_idx_labels(const std::string& path) {
  Tensor u8 = read_idx(path, 1);
  Tensor out = Tensor::empty(u8.shape(), DType::i64);
  const uint8_t* src = u8.data<uint8_t>();
  int64_t* dst = out.data<int64_t>();
  for (int64_t i = 0; i < u8.numel(); ++i) dst[i] = src[i];
  return out;
}

}  // namespace ember::data
