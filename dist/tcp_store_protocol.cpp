#include "dist/tcp_store_protocol.h"

namespace ember::dist {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t get_u32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

}  // namespace

std::string encode_message(const std::vector<std::string>& fields) {
  std::string payload;
  for (const auto& f : fields) {
    put_u32(payload, static_cast<uint32_t>(f.size()));
    payload += f;
  }
  std::string out;
  put_u32(out, static_cast<uint32_t>(payload.size()));
  return out + payload;
}

std::optional<std::vector<std::string>> decode_fields(const std::string& payload) {
  std::vector<std::string> fields;
  size_t at = 0;
  while (at < payload.size()) {
    if (payload.size() - at < 4) return std::nullopt;
    const uint32_t n = get_u32(payload, at);
    at += 4;
    if (payload.size() - at < n) return std::nullopt;
    fields.push_back(payload.substr(at, n));
    at += n;
  }
  return fields;
}

uint32_t decode_length(const std::string& bytes) { return get_u32(bytes, 0); }

}  // namespace ember::dist
