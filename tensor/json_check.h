/// @file
/// A pass over JSON text before it is parsed into values: what nlohmann's parser would accept
/// silently or pay for later. One SAX pass, linear in the text (nlohmann's parse with a callback
/// rescans an object's entries each time one closes: quadratic, 60 s for a 12 MB safetensors header).
#pragma once

#include <cstddef>
#include <string>

namespace ember {

/// What check_json found.
struct JsonCheck {
  bool valid = true;         ///< false: not JSON, or a number beyond a double (huge_number); byte says where
  size_t byte = 0;           ///< the offset of the first byte that is not JSON (or of a NUL byte)
  bool huge_number = false;  ///< a number too large for a double ("1e400")
  bool too_deep = false;     ///< an object or array nests deeper than the limit
  std::string repeated_key;  ///< the first key given twice in one object (nlohmann keeps the last)
};

/// Checks `size` bytes at `text` as one JSON value, nested at most max_depth objects and arrays deep.
/// A NUL byte anywhere is invalid (nlohmann's parser stops there and ignores what follows).
JsonCheck check_json(const char* text, size_t size, int max_depth);

}  // namespace ember
