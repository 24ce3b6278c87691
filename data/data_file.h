/// @file
/// The content of a data set file: its bytes, or, for a gzip file, its decompressed bytes, read in
/// order and checked to the end (every member's CRC-32 and length, nothing after the last member).
/// Every problem raises DataError naming the file, the byte offset and what is wrong; nothing is
/// allocated beyond what the file can hold or the machine has.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace ember::data {

/// A data set file that is missing, unreadable, truncated or corrupt.
class DataError : public Error { using Error::Error; };

/// A data set file read as a stream of content bytes (see the file's description).
class DataFile {
 public:
  /// Reads the file; DataError when it is missing, not a regular file, unreadable or larger than memory.
  explicit DataFile(std::string path);
  ~DataFile();
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;

  const std::string& path() const { return path_; }  ///< The path, as given.
  bool compressed() const;  ///< Whether the file is gzip (it starts with the gzip magic bytes).
  /// The most content bytes the file can yield: its size, or for gzip 1032 times it (deflate's
  /// largest expansion, RFC 1951), and never more than the machine's memory.
  uint64_t max_content_bytes() const;
  /// Fills `dst` with the next `n` content bytes; returns fewer only where the content ends.
  size_t read(void* dst, size_t n);
  /// Reads what is left, checking the compressed stream to its end; returns how many bytes that was.
  uint64_t skip_rest();
  /// All the content not yet read, at most max_content_bytes().
  std::vector<uint8_t> read_rest();
  /// Content bytes read so far.
  uint64_t position() const { return position_; }

 private:
  struct Inflater;
  std::string path_;
  std::vector<uint8_t> raw_;
  size_t raw_pos_ = 0;  // plain files: the next byte to read
  uint64_t position_ = 0;
  std::unique_ptr<Inflater> inflater_;  // gzip files
};

}  // namespace ember::data
