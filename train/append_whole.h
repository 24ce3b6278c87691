/// @file
/// Appending to a file of whole records (JSON lines, TFRecords) so that it never ends inside one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::train {

/// Writes `bytes` at the end of the file open as `fd`, whose whole records end at `size`, and adds
/// their length to `size`. When a write fails, the part written is taken back (truncated to `size`;
/// should that fail too, the caller's readers stop at the cut record) and IOError names the file:
/// "cannot append to the" followed by `kind`, `path` and the reason.
void append_whole(int fd, std::string_view bytes, int64_t& size, const char* kind, const std::string& path);

}  // namespace ember::train
