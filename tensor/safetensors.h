/// @file
/// safetensors (Hugging Face's tensor file format) read and write: an 8-byte little-endian header
/// length, a JSON header naming each tensor's dtype, shape and byte range, then the raw bytes.
#pragma once

#include <map>
#include <string>

#include "tensor/error.h"
#include "tensor/state_dict.h"

namespace ember {

/// A file that breaks its format's rules; the message names the file and the problem.
class FormatError : public Error { using Error::Error; };

/// What a safetensors file holds.
struct SafetensorsFile {
  StateDict tensors;  ///< by name, on the CPU
  std::map<std::string, std::string> metadata;  ///< the header's "__metadata__", if any
};

/// Writes every tensor (copied to the host, contiguous) and the metadata to `path`, atomically:
/// a crash mid-save leaves the previous file intact. Raises ValueError for an undefined tensor or
/// the reserved name "__metadata__", IOError when the file cannot be written.
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads and fully validates `path`: a corrupt or truncated file raises FormatError (IOError if
/// it cannot be read) and never yields a partial result. Tensors are on the CPU.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace ember
