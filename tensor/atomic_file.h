/// @file
/// Atomic file replacement: the new contents go to "<path>.tmp.<pid>" in the same directory, are
/// fsynced, renamed over the target, and the directory is fsynced. A crash leaves the old file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "tensor/error.h"

namespace ember {

/// A failed file-system call: the message names the path and the errno text.
class IOError : public Error { using Error::Error; };

/// What write_file_atomic's `fill` writes through: appends bytes to the temporary file; raises
/// IOError on a short or failed write.
class AtomicWriter {
 public:
  virtual ~AtomicWriter() = default;
  virtual void write(const void* data, size_t size) = 0;  ///< Appends `size` bytes from `data`.
};

/// Replaces `path` atomically with what `fill` writes. If `fill` throws or any step fails, the
/// temporary file is removed, `path` is untouched, and the error propagates (IOError for I/O). A
/// symbolic link is written through; an existing file keeps its mode; a path that holds anything but
/// a regular file (a directory, a device, a FIFO) is an IOError, not replaced.
void write_file_atomic(const std::string& path, const std::function<void(AtomicWriter&)>& fill);

/// Convenience: replaces `path` atomically with `size` bytes from `data`.
void write_file_atomic(const std::string& path, const void* data, size_t size);

/// Whether `file_name` is one of write_file_atomic's temporary files ("<name>.tmp.<pid>"): what a
/// process killed mid-write leaves behind.
bool is_atomic_temporary(const std::string& file_name);

}  // namespace ember
