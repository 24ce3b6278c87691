/// @file
/// printable(): a value that came from a file, a flag or the environment, as an error message shows
/// it. Such a value may hold any bytes (a terminal escape, a NUL, a megabyte of one line); a message
/// that printed it raw could garble the terminal or bury the cause.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ember {

/// `text` with printable ASCII kept, `\n`, `\t`, `\r` and `\\` spelled out, every other byte as
/// `\xHH`, and cut after `max` bytes of the original with "... (N bytes)" naming the whole length.
inline std::string printable(std::string_view text, size_t max = 160) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t shown = text.size() > max ? max : text.size();
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
  }
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

/// A file path as a message shows it: printable(), with room for a deep path.
inline std::string printable_path(std::string_view path) { return printable(path, 400); }

}  // namespace ember
