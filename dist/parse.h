// Strict integer parsing for dist/: launcher variables, ports, the store's counters. The whole
// text must be one decimal integer in range: no sign tricks, no trailing junk, no wrap-around.
#pragma once

#include <cstdint>
#include <string>

namespace ember::dist {

// The integer `text` spells, within [min, max]; ValueError naming `what` and the text otherwise.
int64_t parse_integer(const std::string& what, const std::string& text, int64_t min, int64_t max);
// value itself when within [min, max]; ValueError naming `what` and the value otherwise.
int64_t check_in_range(const std::string& what, int64_t value, int64_t min, int64_t max);

}  // namespace ember::dist
