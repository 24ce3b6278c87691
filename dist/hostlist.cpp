#include "dist/hostlist.h"

#include <algorithm>
#include <cctype>

#include "dist/parse.h"
#include "tensor/error.h"
#include "tensor/printable.h"

namespace ember::dist {

namespace {

// More hosts than any cluster has: a typo like [1-1000000000] must not exhaust memory.
constexpr int64_t kMaxHosts = 1 << 20;

[[noreturn]] void malformed(const std::string& list, const std::string& why) {
  throw ValueError("Slurm host list '" + printable(list) + "': " + why);
}

// Splits at the commas outside brackets.
std::vector<std::string> split_top_level(const std::string& list) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) malformed(list, "unbalanced brackets");
    if (c == ',' && depth == 0) parts.emplace_back();
    else parts.back() += c;
  }
  if (depth != 0) malformed(list, "unbalanced brackets");
  return parts;
}

// The numbers of one bracket's "10,20-22" or "01-03", as text padded to the width of each lower bound.
std::vector<std::string> expand_ranges(const std::string& list, const std::string& ranges) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ranges.size()) {
    const size_t comma = std::min(ranges.find(',', start), ranges.size());
    const std::string item = ranges.substr(start, comma - start);
    const size_t dash = item.find('-');
    const std::string lo_text = item.substr(0, dash), hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    for (const std::string& t : {lo_text, hi_text})
      if (t.empty() || !std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); }))
        malformed(list, "'" + item + "' is not a number or a range a-b");
    const int64_t lo = parse_integer("host list bound", lo_text, 0, INT64_MAX);
    const int64_t hi = parse_integer("host list bound", hi_text, 0, INT64_MAX);
    if (hi < lo) malformed(list, "range '" + item + "' runs backwards");
    if (hi - lo >= kMaxHosts || static_cast<int64_t>(out.size()) + (hi - lo) >= kMaxHosts)
      malformed(list, "more than " + std::to_string(kMaxHosts) + " hosts");
    for (int64_t n = lo; n <= hi; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < lo_text.size()) digits.insert(0, lo_text.size() - digits.size(), '0');
      out.push_back(digits);
    }
    start = comma + 1;
  }
  return out;
}

// One host pattern with any number of bracket groups: "n[01-02]-ib[1-2]".
std::vector<std::string> expand_pattern(const std::string& list, const std::string& pattern) {
  const size_t open = pattern.find('[');
  if (open == std::string::npos) return {pattern};
  const size_t close = pattern.find(']', open);
  if (close == std::string::npos) malformed(list, "unbalanced brackets");
  const std::vector<std::string> tails = expand_pattern(list, pattern.substr(close + 1));
  std::vector<std::string> out;
  for (const auto& number : expand_ranges(list, pattern.substr(open + 1, close - open - 1)))
    for (const auto& tail : tails) out.push_back(pattern.substr(0, open) + number + tail);
  if (static_cast<int64_t>(out.size()) > kMaxHosts) malformed(list, "more than " + std::to_string(kMaxHosts) + " hosts");
  return out;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  for (const auto& part : split_top_level(list)) {
    if (part.empty()) malformed(list, "empty host name");
    for (auto& h : expand_pattern(list, part)) hosts.push_back(std::move(h));
  }
  return hosts;
}

}  // namespace ember::dist
