// check_json: nlohmann's SAX interface, keeping only the keys of each open object.
#include "tensor/json_check.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace ember {

namespace {

using json = nlohmann::json;

class Checker final : public nlohmann::json_sax<json> {
 public:
  Checker(JsonCheck& result, int max_depth) : result_(result), max_depth_(max_depth) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_.emplace_back();
    return deep_enough();
  }
  bool key(string_t& k) override {
    if (open_.back().insert(k).second) return true;
    result_.repeated_key = k;
    return false;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    open_.emplace_back();  // an array holds no keys: its set stays empty
    return deep_enough();
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    result_.valid = false;
    result_.huge_number = e.id == 406;  // nlohmann's out_of_range.406: a number overflowing a double
    result_.byte = position == 0 ? 0 : position - 1;  // nlohmann counts the bytes read, the bad one included
    return false;
  }

 private:
  bool deep_enough() {
    if (static_cast<int>(open_.size()) <= max_depth_) return true;
    result_.too_deep = true;
    return false;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  JsonCheck& result_;
  int max_depth_;
  std::vector<std::set<std::string>> open_;  // the keys of each open object (and array), innermost last
};

}  // namespace

JsonCheck check_json(const char* text, size_t size, int max_depth) {
  JsonCheck result;
  if (const void* nul = std::memchr(text, 0, size)) {
    result.valid = false;
    result.byte = static_cast<size_t>(static_cast<const char*>(nul) - text);
    return result;
  }
  Checker checker(result, max_depth);
  json::sax_parse(text, text + size, &checker);
  return result;
}

}  // namespace ember
