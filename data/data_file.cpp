#include "data/data_file.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "tensor/file_bytes.h"
#include "tensor/printable.h"
#include "tensor/storage.h"

namespace ember::data {

namespace {

constexpr uint64_t kMaxDeflateRatio = 1032;  // deflate's largest expansion (RFC 1951: 258 bytes per 2 bits)

bool gzip_magic(const uint8_t* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

uint64_t memory_bound() {
  const size_t total = backend::host_memory_total();
  return total > 0 ? total : std::numeric_limits<uint64_t>::max();
}

}  // namespace

// zlib's inflate over the raw bytes, one gzip member after another.
struct DataFile::Inflater {
  z_stream z{};
  bool ended = false;  // the last member's trailer is checked and no byte follows

  explicit Inflater(const std::string& path) {
    // 16 + MAX_WBITS: gzip wrapping only; inflate checks each member's CRC-32 and length itself.
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw DataError(printable_path(path) + ": cannot start zlib's inflate");
  }
  ~Inflater() { inflateEnd(&z); }
};

DataFile::DataFile(std::string path) : path_(std::move(path)) {
  try {
    raw_ = read_regular_file(path_);
  } catch (const IOError& e) {
    throw DataError(e.what());
  }
  if (gzip_magic(raw_.data(), raw_.size())) {
    inflater_ = std::make_unique<Inflater>(path_);
    inflater_->z.next_in = raw_.data();
    inflater_->z.avail_in = 0;  // fed below in pieces a uInt can count
  }
}

DataFile::~DataFile() = default;

bool DataFile::compressed() const { return inflater_ != nullptr; }

uint64_t DataFile::max_content_bytes() const {
  const uint64_t size = raw_.size();
  const uint64_t most = compressed() ? (size > std::numeric_limits<uint64_t>::max() / kMaxDeflateRatio
                                            ? std::numeric_limits<uint64_t>::max()
                                            : size * kMaxDeflateRatio)
                                     : size;
  return std::min(most, memory_bound());
}

size_t DataFile::read(void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  if (!inflater_) {
    const size_t k = std::min(n, raw_.size() - raw_pos_);
    if (k) std::memcpy(out, raw_.data() + raw_pos_, k);
    raw_pos_ += k;
    position_ += k;
    return k;
  }
  z_stream& z = inflater_->z;
  size_t got = 0;
  while (got < n && !inflater_->ended) {
    const size_t consumed = static_cast<size_t>(z.next_in - raw_.data());
    if (z.avail_in == 0 && consumed < raw_.size())
      z.avail_in = static_cast<uInt>(std::min<size_t>(raw_.size() - consumed, std::numeric_limits<uInt>::max()));
    z.next_out = out + got;
    z.avail_out = static_cast<uInt>(std::min<size_t>(n - got, std::numeric_limits<uInt>::max()));
    const uInt before = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    got += before - z.avail_out;
    const size_t at = static_cast<size_t>(z.next_in - raw_.data());  // the file offset inflate reached
    if (rc == Z_STREAM_END) {
      if (at == raw_.size()) {
        inflater_->ended = true;
      } else if (gzip_magic(raw_.data() + at, raw_.size() - at)) {
        inflateReset(&z);  // another member follows (as `cat a.gz b.gz` makes)
      } else {
        throw DataError(printable_path(path_) + ": " + std::to_string(raw_.size() - at) + " bytes after the end of the gzip stream at byte " +
                        std::to_string(at) + " are not a gzip member");
      }
    } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      throw DataError(printable_path(path_) + ": corrupt gzip data near byte " + std::to_string(at) + " of the file: " +
                      (z.msg ? z.msg : "invalid deflate data"));
    } else if (rc == Z_MEM_ERROR) {
      throw DataError(printable_path(path_) + ": out of memory decompressing");
    } else if (rc == Z_BUF_ERROR) {
      // No progress with room for output: all input is consumed before the stream's end and trailer.
      throw DataError(printable_path(path_) + ": truncated gzip data: the file ends at byte " + std::to_string(raw_.size()) +
                      " inside a compressed stream, after " + std::to_string(position_ + got) + " bytes of content");
    }
  }
  position_ += got;
  return got;
}

uint64_t DataFile::skip_rest() {
  uint8_t buf[1 << 16];
  uint64_t skipped = 0;
  for (size_t n; (n = read(buf, sizeof buf)) > 0;) skipped += n;
  return skipped;
}

std::vector<uint8_t> DataFile::read_rest() {
  const uint64_t limit = max_content_bytes();
  std::vector<uint8_t> out;
  // A plain file's rest in one read (one byte more shows its end); gzip content in growing pieces.
  size_t piece = inflater_ ? std::max<size_t>(4 * raw_.size(), 1 << 16) : raw_.size() - raw_pos_ + 1;
  try {
    for (;;) {
      const size_t old = out.size();
      out.resize(old + piece);
      const size_t n = read(out.data() + old, piece);
      out.resize(old + n);
      if (n < piece) break;
      if (out.size() > limit)
        throw DataError(printable_path(path_) + ": decompresses to more than " + std::to_string(limit) +
                        " bytes, more than this machine's memory");
      piece = std::min<size_t>(out.size(), size_t(1) << 28);
    }
  } catch (const std::bad_alloc&) {
    throw DataError(printable_path(path_) + ": out of memory after " + std::to_string(out.size()) + " bytes of content");
  }
  return out;
}

}  // namespace ember::data
