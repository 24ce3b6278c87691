/// @file
/// Reading a whole file into memory, as the readers of untrusted files do (safetensors, data sets):
/// only a regular file, its size checked against the machine's memory before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/atomic_file.h"  // IOError

namespace ember {

/// The bytes of the regular file at `path`. IOError naming the path for a missing or unreadable
/// file, a device or directory, a file larger than memory, and the byte where a read failed.
std::vector<uint8_t> read_regular_file(const std::string& path);

}  // namespace ember
