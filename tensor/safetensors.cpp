#include "tensor/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include <zlib.h>

#include "tensor/atomic_file.h"
#include "tensor/file_bytes.h"
#include "tensor/json_check.h"
#include "tensor/printable.h"
#include "tensor/tensor.h"

namespace ember {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");
static_assert(sizeof(bool) == 1, "bool tensors are stored as one byte");

namespace {

// Like Hugging Face's reader: a header above 100 MB is refused before it is parsed.
constexpr uint64_t kMaxHeader = 100'000'000;
// {name: {"shape": [dim]}}: a dim is a value at depth 3.
constexpr int kMaxDepth = 3;

// The metadata entry in which ember's writer records each tensor's CRC-32 (zlib's), in the data
// buffer's order, as 8 hex digits separated by commas: the format has no checksum of its own, and a
// flipped bit in a weight would otherwise load as a different number. Readers of the format ignore it;
// load_safetensors checks it where present and leaves it out of the metadata it returns.
constexpr const char* kChecksumKey = "ember.crc32";

uint32_t crc32_of(const void* data, size_t bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  // zlib's length is a uInt: feed it in chunks below 4 GiB.
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min<size_t>(bytes - done, size_t(1) << 30);
    crc = crc32(crc, p + done, static_cast<uInt>(n));
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// A JSON value for an error message, cut to a readable length.
std::string excerpt(const nlohmann::json& v) { return printable(v.dump(), 80); }

const char* st_name(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
  }
  throw DTypeError("safetensors: unknown dtype");
}

bool st_parse(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16}, {"F64", DType::f64},
      {"I32", DType::i32}, {"I64", DType::i64}, {"U8", DType::u8},     {"BOOL", DType::boolean}};
  for (const auto& [name, d] : table)
    if (s == name) {
      out = d;
      return true;
    }
  return false;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// The metadata entry in which ember's writer records the CRC-32 of the rest of the header: each
// metadata entry but the two checksums and each tensor's name, dtype, shape and offsets, in a fixed
// order. The epoch, iteration and loader position of a checkpoint live in the metadata: a flipped
// digit there would resume at the wrong batch. Checked where present (files of older writers lack it).
constexpr const char* kHeaderChecksumKey = "ember.header_crc32";

std::string header_checksum(const std::map<std::string, std::string>& metadata, std::vector<const Entry*> entries) {
  std::string text;
  for (const auto& [k, v] : metadata)
    if (k != kChecksumKey && k != kHeaderChecksumKey) text.append(k).append(1, '\0').append(v).append(1, '\0');
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });
  for (const Entry* e : entries) {
    text.append(e->name).append(1, '\0').append(st_name(e->dtype)).append(1, '\0');
    for (int64_t d : e->shape) text.append(std::to_string(d)).append(1, ',');
    text.append(1, '\0').append(std::to_string(e->begin)).append(1, '\0').append(std::to_string(e->end)).append(1, '\0');
  }
  return hex32(crc32_of(text.data(), text.size()));
}

}  // namespace

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Host, contiguous copies, laid out widest dtype first (then by name) as Hugging Face's writer
  // does, so every tensor starts at an offset aligned to its element size.
  std::vector<std::pair<std::string, Tensor>> items;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") throw ValueError("save_safetensors: '__metadata__' is a reserved name ('" + printable_path(path) + "')");
    if (!t.defined()) throw ValueError("save_safetensors: tensor '" + name + "' is undefined ('" + printable_path(path) + "')");
    items.emplace_back(name, t.detach().to(kCPU).contiguous());
  }
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype());
  });

  for (const char* reserved : {kChecksumKey, kHeaderChecksumKey})
    if (metadata.count(reserved))
      throw ValueError("save_safetensors: the metadata key '" + std::string(reserved) +
                       "' is reserved for ember's checksums ('" + printable_path(path) + "')");
  std::string checksums;
  for (const auto& [name, t] : items) {
    if (!checksums.empty()) checksums += ',';
    checksums += hex32(crc32_of(t.raw_data(), static_cast<size_t>(t.numel() * dtype_size(t.dtype()))));
  }
  std::vector<Entry> entries;
  uint64_t offset = 0;
  for (const auto& [name, t] : items) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(dtype_size(t.dtype()));
    entries.push_back({name, t.dtype(), t.shape(), offset, offset + bytes});
    offset += bytes;
  }
  std::vector<const Entry*> described;
  for (const Entry& e : entries) described.push_back(&e);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [k, v] : metadata) m[k] = v;
  if (!items.empty()) m[kChecksumKey] = checksums;
  if (!metadata.empty() || !items.empty()) m[kHeaderChecksumKey] = header_checksum(metadata, described);
  if (!m.empty()) header["__metadata__"] = std::move(m);
  for (const Entry& e : entries)
    header[e.name] = {{"dtype", st_name(e.dtype)}, {"shape", e.shape.vec()}, {"data_offsets", {e.begin, e.end}}};
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // pad so the byte buffer starts 8-aligned
  const uint64_t n = json.size();

  write_file_atomic(path, [&](AtomicWriter& w) {
    w.write(&n, sizeof n);
    w.write(json.data(), json.size());
    for (const auto& [name, t] : items)
      if (t.numel() > 0) w.write(t.raw_data(), static_cast<size_t>(t.numel() * dtype_size(t.dtype())));
  });
}

SafetensorsFile load_safetensors(const std::string& path) {
  auto bad = [&](const std::string& problem) -> FormatError {
    return FormatError("load_safetensors: '" + path + "': " + problem);
  };
  std::vector<uint8_t> bytes;
  try {
    bytes = read_regular_file(path);
  } catch (const IOError& e) {
    throw IOError(std::string("load_safetensors: ") + e.what());
  }
  const auto* file = reinterpret_cast<const char*>(bytes.data());
  if (bytes.size() < 8)
    throw bad("file is " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, file, 8);
  const uint64_t rest = bytes.size() - 8;
  if (n > rest)
    throw bad("header length " + std::to_string(n) + " exceeds the " + std::to_string(rest) + " bytes after it");
  if (n > kMaxHeader) throw bad("header length " + std::to_string(n) + " exceeds the 100 MB limit");

  // Checked before it is parsed: every key once per object (nlohmann keeps only the last one), no
  // nesting deeper than the format's (a shape's dims sit at depth 3), which would cost recursion later.
  const char* hb = file + 8;
  const JsonCheck check = check_json(hb, n, kMaxDepth);
  if (check.huge_number) throw bad("header holds a number too large for a double at byte " + std::to_string(8 + check.byte));
  if (!check.valid) throw bad("header is not valid JSON at byte " + std::to_string(8 + check.byte) + " of the file");
  if (check.too_deep) throw bad("header nests values deeper than the format's " + std::to_string(kMaxDepth) + " levels");
  if (!check.repeated_key.empty())
    throw bad("the key '" + printable(check.repeated_key) + "' appears twice in one object of the header");
  const nlohmann::json header = nlohmann::json::parse(hb, hb + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) throw bad("header is not valid JSON");
  if (!header.is_object()) throw bad("header is not a JSON object");

  const uint64_t buffer_size = rest - n;
  const char* buffer = hb + n;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) throw bad("__metadata__ value of '" + printable(k) + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + printable(name) + "': ";
    if (!info.is_object()) throw bad(where + "entry is not an object");
    const auto dt = info.find("dtype");
    const auto sh = info.find("shape");
    const auto off = info.find("data_offsets");
    if (dt == info.end() || sh == info.end() || off == info.end())
      throw bad(where + "entry needs dtype, shape and data_offsets");
    Entry e;
    e.name = name;
    if (!dt->is_string()) throw bad(where + "dtype is not a string");
    if (!st_parse(dt->get<std::string>(), e.dtype)) throw bad(where + "unknown dtype " + excerpt(*dt));
    if (!sh->is_array()) throw bad(where + "shape is not an array");
    if (sh->size() > static_cast<size_t>(kMaxDims))
      throw bad(where + "shape has " + std::to_string(sh->size()) + " dims, ember supports at most " +
                std::to_string(kMaxDims));
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : *sh) {
      if (d.is_number_integer() && !d.is_number_unsigned())
        throw bad(where + "shape " + excerpt(*sh) + " has a negative dim");
      if (!d.is_number_unsigned()) throw bad(where + "shape " + excerpt(*sh) + " has a dim that is not an integer");
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, v, &numel))
        overflow = true;
      e.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max())));
    }
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      throw bad(where + "data_offsets " + excerpt(*off) + " is not two non-negative integers");
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    if (e.begin > e.end)
      throw bad(where + "data_offsets begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end));
    if (e.end > buffer_size)
      throw bad(where + "data_offsets end " + std::to_string(e.end) + " is beyond the " + std::to_string(buffer_size) +
                "-byte data buffer");
    uint64_t bytes = 0;
    overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &bytes);
    if (overflow || bytes != e.end - e.begin)
      throw bad(where + "data_offsets cover " + std::to_string(e.end - e.begin) + " bytes, shape " + excerpt(*sh) +
                " of " + dt->get<std::string>() + " needs " + (overflow ? std::string("2^64 or more") : std::to_string(bytes)));
    entries.push_back(std::move(e));
  }

  // Like Hugging Face's reader: the tensors must tile the buffer exactly, no overlap, gap or tail.
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    if (e->begin < pos)
      throw bad("tensors '" + printable(prev->name) + "' and '" + printable(e->name) + "' overlap (bytes " + std::to_string(e->begin) +
                " to " + std::to_string(pos) + ")");
    if (e->begin > pos)
      throw bad("bytes " + std::to_string(pos) + " to " + std::to_string(e->begin) + " of the data buffer belong to no tensor");
    pos = e->end;
    prev = e;
  }
  if (pos != buffer_size)
    throw bad("data buffer has " + std::to_string(buffer_size - pos) + " trailing bytes that belong to no tensor");
  if (const auto stored = out.metadata.find(kChecksumKey); stored != out.metadata.end()) {
    const std::string& list = stored->second;
    if (list.size() != (order.empty() ? 0 : order.size() * 9 - 1))
      throw bad(std::string(kChecksumKey) + " holds " + std::to_string(list.size()) + " characters, not the checksums of " +
                std::to_string(order.size()) + " tensors");
    for (size_t i = 0; i < order.size(); ++i) {
      const Entry& e = *order[i];
      const std::string expected = list.substr(i * 9, 8);
      const std::string actual = hex32(crc32_of(buffer + e.begin, static_cast<size_t>(e.end - e.begin)));
      if (actual != expected)
        throw bad("tensor '" + printable(e.name) + "' fails its checksum (crc32 " + actual + ", written as " +
                  printable(expected) + "): its bytes " + std::to_string(e.begin) + " to " + std::to_string(e.end) +
                  " of the data buffer were damaged");
    }
    out.metadata.erase(stored);
  }
  if (const auto stored = out.metadata.find(kHeaderChecksumKey); stored != out.metadata.end()) {
    const std::string actual = header_checksum(out.metadata, order);
    if (actual != stored->second)
      throw bad("the header fails its checksum (crc32 " + actual + ", written as " + printable(stored->second, 16) +
                "): its metadata or tensor descriptions were damaged");
    out.metadata.erase(stored);
  }

  for (const auto& e : entries) {
    const char* src = buffer + e.begin;
    const size_t bytes = static_cast<size_t>(e.end - e.begin);
    if (e.dtype == DType::boolean)
      for (size_t i = 0; i < bytes; ++i)
        if (static_cast<unsigned char>(src[i]) > 1)
          throw bad("tensor '" + printable(e.name) + "': BOOL byte " + std::to_string(i) + " is " +
                    std::to_string(static_cast<unsigned char>(src[i])) + ", not 0 or 1");
    Tensor t = Tensor::empty(e.shape, TensorOptions(e.dtype));
    if (bytes > 0) std::memcpy(t.raw_data(), src, bytes);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace ember
