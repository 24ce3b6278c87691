// The TCP store's wire format, shared by client and server. A message is a little-endian u32 byte
// count, then fields, each a u32 byte count and its bytes. A request's first field is the command;
// a reply's first field is the status; integers travel as decimal text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::dist {

enum class StoreCommand : char { set = 'S', get = 'G', wait = 'W', add = 'A', compare_set = 'C', check = 'K',
                                 delete_key = 'D' };
enum class StoreStatus : char { ok = 'o', missing = 'm', timeout = 't', error = 'e' };

// Larger messages are refused: a corrupt length must not make the server allocate gigabytes.
inline constexpr uint32_t kMaxStoreMessageBytes = 256u << 20;

// The whole message, length prefix included.
std::string encode_message(const std::vector<std::string>& fields);
// The fields of a payload (the bytes after the length prefix); nullopt when malformed.
std::optional<std::vector<std::string>> decode_fields(const std::string& payload);
// The length prefix at the front of `bytes` (at least 4 of them).
uint32_t decode_length(const std::string& bytes);

}  // namespace ember::dist
