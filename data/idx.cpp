// IDX reader: the header is 0x00 0x00 <type> <ndim>, then ndim big-endian u32 sizes, then the data.
#include "data/idx.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>

#include "tensor/ops.h"

namespace ember::data {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError(path + ": no such file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DataError(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> out;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    const size_t old = out.size();
    out.resize(old + kChunk);
    const int n = gzread(f, out.data() + old, kChunk);
    if (n < 0) {
      int errnum = 0;
      const std::string msg = gzerror(f, &errnum);
      gzclose(f);
      throw DataError(path + ": corrupt gzip data: " + msg);
    }
    out.resize(old + n);
    if (n == 0) break;
  }
  int errnum = 0;
  const std::string msg = gzerror(f, &errnum);
  gzclose(f);
  // A gzip stream cut short reads as far as it goes and then reports Z_BUF_ERROR.
  if (errnum != Z_OK) throw DataError(path + ": truncated or corrupt gzip data: " + msg);
  return out;
}

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
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  if (bytes.size() < 4)
    throw DataError(path + ": truncated: " + std::to_string(bytes.size()) + " bytes, too short for an IDX magic number");
  const uint32_t magic = be32(bytes.data());
  const int ndim = bytes[3];
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || ndim == 0 ||
      (expected_ndim > 0 && ndim != expected_ndim)) {
    std::string want = expected_ndim > 0 ? hex32(0x800u + expected_ndim) : "0x0000080N";
    throw DataError(path + ": bad magic number " + hex32(magic) + ", expected " + want +
                    " (an IDX file of unsigned bytes)");
  }
  const size_t header = 4 + 4 * size_t(ndim);
  if (bytes.size() < header)
    throw DataError(path + ": truncated: header needs " + std::to_string(header) + " bytes, found " +
                    std::to_string(bytes.size()));
  Shape shape;
  uint64_t promised = 1;
  for (int d = 0; d < ndim; ++d) {
    const uint32_t n = be32(bytes.data() + 4 + 4 * d);
    if (d > 0 && n == 0) throw DataError(path + ": bad dims: dim " + std::to_string(d) + " is 0");
    promised *= n;
    if (promised > (uint64_t(1) << 40))
      throw DataError(path + ": bad dims: header promises more than 2^40 bytes");
    shape.push_back(int64_t(n));
  }
  const uint64_t found = bytes.size() - header;
  if (found < promised)
    throw DataError(path + ": truncated: header promises " + std::to_string(promised) + " bytes of data, found " +
                    std::to_string(found));
  if (found > promised)
    throw DataError(path + ": " + std::to_string(found - promised) + " trailing bytes: header promises " +
                    std::to_string(promised) + " bytes of data, found " + std::to_string(found));
  Tensor t = Tensor::empty(shape, DType::u8);
  if (promised) std::memcpy(t.data<uint8_t>(), bytes.data() + header, promised);
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
