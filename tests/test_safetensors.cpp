// safetensors round trips, the byte layout checked by hand, corrupt and truncated files (errors,
// never crashes or partial loads), and atomic replacement surviving a failure mid-write.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include <zlib.h>

#include "helpers.h"
#include "tensor/atomic_file.h"
#include "tensor/safetensors.h"

using namespace ember_test;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}
// A file built by hand: header length (the real one unless given), JSON header, data bytes.
std::string st_bytes(const std::string& json, const std::string& data, std::optional<uint64_t> n = {}) {
  return le64(n.value_or(json.size())) + json + data;
}

void check_same(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  CHECK(got.dtype() == want.dtype());
  CHECK(got.shape() == want.shape());
  CHECK(got.device() == kCPU);
  CHECK(got.is_contiguous());
  CHECK(values(got) == values(want));
}

// Loads `path`, which must be valid or raise ember::Error; anything else fails the test.
// Returns 1 on success, 0 on an ember::Error.
int load_or_error(const std::string& path) {
  try {
    SafetensorsFile f = load_safetensors(path);
    for (const auto& [name, t] : f.tensors) {
      REQUIRE(t.defined());
      (void)values(t);  // every element readable
    }
    return 1;
  } catch (const ember::Error&) {
    return 0;
  } catch (const std::exception& e) {
    FAIL_CHECK("non-ember exception: ", std::string(e.what()));
    return 0;
  }
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("safetensors: round trip of every dtype, 0-dim, empty and non-contiguous tensors") {
  TempDir tmp;
  StateDict sd;
  uint64_t seed = 1;
  for (DType d : kAll) {
    const std::string n = name(d);
    sd[n + ".matrix"] = make_tensor(random_values(6, d, -50, 50, false, seed++), {2, 3}, d);
    sd[n + ".scalar"] = make_tensor(random_values(1, d, -50, 50, false, seed++), {}, d);
    sd[n + ".empty"] = Tensor::empty({0, 4}, TensorOptions(d));
    Tensor big = make_tensor(random_values(60, d, -50, 50, false, seed++), {3, 4, 5}, d);
    sd[n + ".permuted"] = big.permute({2, 0, 1});
    sd[n + ".sliced"] = big.narrow(1, 1, 2).select(2, 3);
    CHECK_FALSE(sd[n + ".permuted"].is_contiguous());
    CHECK(sd[n + ".sliced"].offset() != 0);
  }
  const std::string path = (tmp / "all.safetensors");
  save_safetensors(path, sd);
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata.empty());
  REQUIRE(f.tensors.size() == sd.size());
  for (const auto& [n, t] : sd) check_same(f.tensors.at(n), t, n);
  // Nothing but the file itself is left in the directory.
  CHECK(std::distance(fs::directory_iterator(tmp.path), fs::directory_iterator()) == 1);
}

TEST_CASE("safetensors: metadata round trip, empty dict, overwrite") {
  TempDir tmp;
  const std::string path = (tmp / "m.safetensors");
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"epoch", "3"}, {"note", "ünïcode \"q\"\n"}};
  save_safetensors(path, {{"w", ones({2}, DType::f32)}}, meta);
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata == meta);
  save_safetensors(path, {});  // replaces the previous file
  f = load_safetensors(path);
  CHECK(f.tensors.empty());
  CHECK(f.metadata.empty());
  CHECK(read_bytes(path).size() == 16);  // length + "{}" padded to 8
}

TEST_CASE("safetensors: a damaged tensor fails its checksum, naming it; the key is ember's own") {
  TempDir tmp;
  const std::string path = (tmp / "c.safetensors");
  save_safetensors(path, {{"w", from_vector(std::vector<float>{1, 2, 3, 4}, {4})}, {"b", zeros({2})}}, {{"k", "v"}});
  const SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata == std::map<std::string, std::string>{{"k", "v"}});  // the checksums are not the caller's
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  bytes[8 + n + 3] ^= 0x40;  // an exponent bit of b[0] (first in the buffer: both are f32, so in name order)
  { std::ofstream(path, std::ios::binary) << bytes; }
  const std::string m = message_of<FormatError>([&] { load_safetensors(path); });
  CHECK_MESSAGE(m.find("tensor 'b' fails its checksum") != std::string::npos, m);
  CHECK_MESSAGE(m.find("bytes 0 to 8 of the data buffer were damaged") != std::string::npos, m);
  CHECK(message_of<ValueError>([&] { save_safetensors(path, {}, {{"ember.crc32", "x"}}); }).find("reserved") !=
        std::string::npos);
  CHECK(message_of<ValueError>([&] { save_safetensors(path, {}, {{"ember.header_crc32", "x"}}); }).find("reserved") !=
        std::string::npos);
}

TEST_CASE("safetensors: a changed metadata value or tensor description fails the header's checksum") {
  TempDir tmp;
  const std::string path = (tmp / "h.safetensors");
  save_safetensors(path, {{"w", zeros({2, 3})}}, {{"iteration", "2"}, {"loader.batch", "2"}});
  const std::string good = read_bytes(path);
  // Digits for digits: the file stays valid JSON of the same length, as a flipped bit could leave it.
  for (const auto& [from, to] : {std::pair{"\"iteration\":\"2\"", "\"iteration\":\"3\""},
                                 std::pair{"\"shape\":[2,3]", "\"shape\":[3,2]"}}) {
    std::string bytes = good;
    const size_t at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, std::strlen(from), to);
    write_bytes(path, bytes);
    const std::string m = message_of<FormatError>([&] { load_safetensors(path); });
    CHECK_MESSAGE(m.find("the header fails its checksum") != std::string::npos, m);
  }
}

TEST_CASE("safetensors: byte layout follows the published format") {
  TempDir tmp;
  const std::string path = (tmp / "small.safetensors");
  save_safetensors(path, {{"b", from_vector(std::vector<int32_t>{7}, {})},
                          {"a", from_vector(std::vector<double>{1.5, -2.0}, {2, 1})}},
                   {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);
  REQUIRE(bytes.size() == 8 + n + 16 + 4);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  const std::string data = bytes.substr(8 + n);
  // ember's one addition, in the metadata: each tensor's CRC-32 in the buffer's order.
  const auto crc = [&](size_t begin, size_t size) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08lx", crc32(0L, reinterpret_cast<const Bytef*>(data.data() + begin), uInt(size)));
    return std::string(hex);
  };
  auto want = nlohmann::json::parse(R"({"__metadata__": {"k": "v"},
    "a": {"dtype": "F64", "shape": [2, 1], "data_offsets": [0, 16]},
    "b": {"dtype": "I32", "shape": [], "data_offsets": [16, 20]}})");
  want["__metadata__"]["ember.crc32"] = crc(0, 16) + "," + crc(16, 4);
  // And the CRC-32 of the rest of the header: each metadata entry as key NUL value NUL, then each
  // tensor by name as name NUL dtype NUL dims each followed by a comma NUL begin NUL end NUL.
  static constexpr char kDescribed[] = "k\0v\0a\0F64\0" "2,1,\0" "0\0" "16\0b\0I32\0\0" "16\0" "20\0";
  const std::string described(kDescribed, sizeof kDescribed - 1);
  char header_crc[9];
  std::snprintf(header_crc, sizeof header_crc, "%08lx",
                crc32(0L, reinterpret_cast<const Bytef*>(described.data()), uInt(described.size())));
  want["__metadata__"]["ember.header_crc32"] = header_crc;
  CHECK(header == want);
  double d[2];
  int32_t i;
  std::memcpy(d, data.data(), 16);
  std::memcpy(&i, data.data() + 16, 4);
  CHECK(d[0] == 1.5);
  CHECK(d[1] == -2.0);
  CHECK(i == 7);

  // And a file written by hand by the same rules (unpadded header, whitespace, any key order) loads.
  float fl[3] = {1, 2, 3};
  uint16_t h = 0x3c00;  // f16 1.0
  std::string raw(reinterpret_cast<const char*>(fl), 12);
  raw += std::string(reinterpret_cast<const char*>(&h), 2);
  raw += std::string("\x01\x00", 2);
  write_bytes(path, st_bytes(R"( { "h": {"shape": [1], "data_offsets": [12, 14], "dtype": "F16"},
      "f": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
      "z": {"dtype": "BOOL", "shape": [2], "data_offsets": [14, 16]} } )", raw));
  SafetensorsFile f = load_safetensors(path);
  CHECK(values(f.tensors.at("f")) == std::vector<double>{1, 2, 3});
  CHECK(values(f.tensors.at("h")) == std::vector<double>{1});
  CHECK(values(f.tensors.at("z")) == std::vector<double>{1, 0});
  CHECK(f.tensors.at("z").dtype() == DType::boolean);
}

TEST_CASE("safetensors: corrupt headers raise FormatError naming the file and the problem") {
  TempDir tmp;
  const std::string path = (tmp / "bad.safetensors");
  const std::string data8(8, '\0');
  auto expect = [&](const std::string& what, const std::string& bytes, std::initializer_list<const char*> parts) {
    write_bytes(path, bytes);
    expect_error<FormatError>(what, [&] { load_safetensors(path); }, parts);
    CHECK(message_of<FormatError>([&] { load_safetensors(path); }).find(path) != std::string::npos);
  };
  auto entry = [](const std::string& body) { return "{\"t\": {" + body + "}}"; };

  for (size_t len = 0; len < 8; ++len) expect("short file", std::string(len, '\0'), {"shorter than the 8-byte"});
  expect("huge header length", st_bytes("{}", "", uint64_t{1} << 63), {"header length", "exceeds"});
  expect("header length one past the file", st_bytes("{}", "", 3), {"header length 3", "exceeds the 2 bytes"});
  expect("invalid JSON", st_bytes("{\"t\": ", ""), {"not valid JSON"});
  expect("invalid JSON names the byte", st_bytes("{\"t\": x}", ""), {"not valid JSON at byte 14 of the file"});
  // nlohmann's parser stops at a NUL byte: what follows would be ignored.
  expect("NUL then more", st_bytes(std::string("{}\0{\"t\": 3}", 11), ""), {"not valid JSON at byte 10"});
  expect("invalid UTF-8", st_bytes("{\"\xff\xfe\": 1}", ""), {"not valid JSON"});
  expect("header an array", st_bytes("[1, 2]", ""), {"not a JSON object"});
  expect("entry not object", st_bytes("{\"t\": 3}", ""), {"tensor 't'", "not an object"});
  expect("missing field", st_bytes(entry(R"("dtype": "F32", "shape": [2])"), data8), {"needs dtype, shape and data_offsets"});
  expect("unknown dtype", st_bytes(entry(R"("dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8])"), data8),
         {"unknown dtype \"F8_E4M3\""});
  expect("dtype not string", st_bytes(entry(R"("dtype": 1, "shape": [2], "data_offsets": [0, 8])"), data8),
         {"dtype is not a string"});
  expect("negative dim", st_bytes(entry(R"("dtype": "F32", "shape": [-2], "data_offsets": [0, 8])"), data8),
         {"negative dim"});
  expect("fractional dim", st_bytes(entry(R"("dtype": "F32", "shape": [2.5], "data_offsets": [0, 8])"), data8),
         {"not an integer"});
  expect("shape not array", st_bytes(entry(R"("dtype": "F32", "shape": 2, "data_offsets": [0, 8])"), data8),
         {"shape is not an array"});
  expect("rank 17", st_bytes(entry(R"("dtype": "U8", "shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,8], "data_offsets": [0, 8])"), data8),
         {"17 dims"});
  expect("huge dims", st_bytes(entry(R"("dtype": "F64", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8])"), data8),
         {"needs 2^64 or more"});
  // 2^62 elements fit a count, not their 2^64 bytes: the message says so (it said "needs 0").
  expect("huge bytes", st_bytes(entry(R"("dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 8])"), data8),
         {"needs 2^64 or more"});
  expect("one offset", st_bytes(entry(R"("dtype": "F32", "shape": [2], "data_offsets": [0])"), data8),
         {"not two non-negative integers"});
  expect("string offset", st_bytes(entry(R"("dtype": "F32", "shape": [2], "data_offsets": [0, "8"])"), data8),
         {"not two non-negative integers"});
  expect("float offset", st_bytes(entry(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8.0])"), data8),
         {"not two non-negative integers"});
  expect("negative offset", st_bytes(entry(R"("dtype": "F32", "shape": [2], "data_offsets": [-8, 0])"), data8),
         {"not two non-negative integers"});
  expect("begin > end", st_bytes(entry(R"("dtype": "F32", "shape": [0], "data_offsets": [8, 0])"), data8),
         {"begin 8 > end 0"});
  expect("offsets past the end", st_bytes(entry(R"("dtype": "F32", "shape": [4], "data_offsets": [0, 16])"), data8),
         {"end 16 is beyond the 8-byte data buffer"});
  expect("offsets far past the end",
         st_bytes(entry(R"("dtype": "U8", "shape": [1], "data_offsets": [18446744073709551614, 18446744073709551615])"), data8),
         {"beyond"});
  expect("length mismatch", st_bytes(entry(R"("dtype": "F64", "shape": [2], "data_offsets": [0, 8])"), data8),
         {"cover 8 bytes", "needs 16"});
  expect("overlap",
         st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", std::string(12, '\0')),
         {"'a' and 'b' overlap"});
  expect("same range twice",
         st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})", data8),
         {"overlap"});
  expect("empty tensor inside another",
         st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})", data8),
         {"overlap"});
  expect("gap", st_bytes(entry(R"("dtype": "F32", "shape": [1], "data_offsets": [4, 8])"), data8),
         {"bytes 0 to 4", "belong to no tensor"});
  expect("trailing bytes", st_bytes(entry(R"("dtype": "F32", "shape": [1], "data_offsets": [0, 4])"), data8),
         {"4 trailing bytes"});
  expect("duplicate name",
         st_bytes(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", data8),
         {"'t' appears twice"});
  expect("duplicate field of an entry",
         st_bytes(entry(R"("dtype": "F32", "shape": [2], "shape": [1], "data_offsets": [0, 8])"), data8),
         {"'shape' appears twice"});
  expect("duplicate metadata key", st_bytes(R"({"__metadata__": {"epoch": "1", "epoch": "2"}})", ""),
         {"'epoch' appears twice"});
  expect("metadata not object", st_bytes(R"({"__metadata__": [1]})", ""), {"__metadata__ is not an object"});
  expect("metadata value not string", st_bytes(R"({"__metadata__": {"epoch": 3}})", ""), {"'epoch' is not a string"});
  expect("bool byte 2", st_bytes(entry(R"("dtype": "BOOL", "shape": [2], "data_offsets": [0, 2])"), std::string("\x01\x02", 2)),
         {"BOOL byte 1 is 2"});

  // Nesting deeper than the format's is refused while parsing, however deep: a million brackets
  // would overflow the stack of any recursive walk of the parsed value.
  expect("deep nesting", st_bytes(std::string(1'000'000, '[') + std::string(1'000'000, ']'), ""), {"deeper than the format's 3 levels"});
  expect("deep nesting in an entry", st_bytes(entry(R"("dtype": "F32", "shape": [[[1]]], "data_offsets": [0, 4])"), data8),
         {"deeper than the format's 3 levels"});
  expect("deep metadata", st_bytes(R"({"__metadata__": {"k": {"a": [1]}}})", ""), {"deeper"});
  // Numbers that do not fit 64 bits become doubles in the parser and are refused as such.
  expect("20-digit dim", st_bytes(entry(R"("dtype": "U8", "shape": [99999999999999999999], "data_offsets": [0, 8])"), data8),
         {"not an integer"});
  expect("20-digit offset", st_bytes(entry(R"("dtype": "U8", "shape": [8], "data_offsets": [0, 99999999999999999999])"), data8),
         {"not two non-negative integers"});
  // A long value is cut in the message.
  expect("long shape", st_bytes(entry(R"("dtype": "U8", "shape": [")" + std::string(5000, 'x') + R"("], "data_offsets": [0, 8])"), data8),
         {"not an integer"});
  CHECK(message_of<FormatError>([&] { load_safetensors(path); }).size() < 400);

  expect_error<IOError>("missing file", [&] { load_safetensors((tmp / "absent.safetensors")); },
                        {"absent.safetensors", "No such file"});
  expect_error<IOError>("a device", [&] { load_safetensors("/dev/zero"); }, {"/dev/zero", "not a regular file"});
  expect_error<IOError>("a directory", [&] { load_safetensors(tmp.path.string()); }, {"not a regular file"});
}

TEST_CASE("safetensors: a header of 100,000 tensors loads in time linear in its size") {
  // nlohmann's parse with a callback rescanned the header's object at each entry: 20,000 tensors took
  // seconds, 200,000 over a minute. Linear, 100,000 take well under a second here.
  TempDir tmp;
  const std::string path = (tmp / "many.safetensors");
  std::map<std::string, Tensor> tensors;
  const Tensor one = zeros({1}, DType::u8);
  for (int i = 0; i < 100'000; ++i) tensors.emplace("t" + std::to_string(i), one);
  save_safetensors(path, tensors);
  const auto start = std::chrono::steady_clock::now();
  CHECK(load_safetensors(path).tensors.size() == 100'000);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 15.0);
}

TEST_CASE("safetensors: truncation at every length is an error") {
  TempDir tmp;
  const std::string good = (tmp / "good.safetensors");
  save_safetensors(good, {{"w", make_tensor(random_values(6, DType::f32, -1, 1, false, 9), {2, 3}, DType::f32)},
                          {"n", from_vector(std::vector<int64_t>{4}, {})},
                          {"m", make_tensor({1, 0, 1}, {3}, DType::boolean)}},
                   {{"epoch", "2"}});
  const std::string bytes = read_bytes(good);
  const std::string path = (tmp / "cut.safetensors");
  int errors = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    write_bytes(path, bytes.substr(0, len));
    try {
      load_safetensors(path);
      FAIL_CHECK("truncated to ", len, " of ", bytes.size(), " bytes, yet it loaded");
    } catch (const FormatError& e) {
      ++errors;
      CHECK(std::string(e.what()).find(path) != std::string::npos);
    }
  }
  CHECK(errors == static_cast<int>(bytes.size()));
  CHECK(load_or_error(good) == 1);
}

TEST_CASE("safetensors: random byte flips load valid data or raise ember::Error") {
  TempDir tmp;
  const std::string good = (tmp / "good.safetensors");
  save_safetensors(good, {{"w", make_tensor(random_values(12, DType::f16, -1, 1, false, 3), {3, 4}, DType::f16)},
                          {"b", make_tensor(random_values(4, DType::i64, -9, 9, false, 4), {4}, DType::i64)},
                          {"m", make_tensor({1, 0}, {2}, DType::boolean)},
                          {"s", make_tensor({2.5}, {}, DType::f64)}},
                   {{"format", "pt"}});
  const std::string bytes = read_bytes(good);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string path = (tmp / "flip.safetensors");
  std::mt19937_64 rng(2024);
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      // Mostly the length and header, where the parser lives; sometimes anywhere.
      const size_t limit = (iter % 4 == 0) ? b.size() : static_cast<size_t>(8 + n);
      const size_t pos = rng() % limit;
      const auto mask = static_cast<char>(1 + rng() % 255);
      b[pos] = static_cast<char>(b[pos] ^ mask);
    }
    write_bytes(path, b);
    if (load_or_error(path)) ++loaded; else ++rejected;
  }
  MESSAGE("flips: ", loaded, " loaded, ", rejected, " rejected");
  CHECK(rejected > 0);
  CHECK(loaded + rejected == 3000);
}

TEST_CASE("safetensors: save errors") {
  TempDir tmp;
  expect_error<ValueError>("undefined tensor", [&] { save_safetensors((tmp / "x"), {{"t", Tensor()}}); }, {"'t'", "undefined"});
  expect_error<ValueError>("reserved name", [&] { save_safetensors((tmp / "x"), {{"__metadata__", ones({1})}}); },
                           {"reserved"});
  expect_error<IOError>("missing directory", [&] { save_safetensors((tmp / "no/such/x.safetensors"), {{"t", ones({1})}}); },
                        {"no/such/x.safetensors", "No such file"});
  CHECK_FALSE(fs::exists((tmp / "x")));
  // open() would stop at the NUL and write (or read) another file.
  const std::string with_nul = tmp / std::string("x\0junk", 6);
  expect_error<IOError>("NUL in the path", [&] { save_safetensors(with_nul, {{"t", ones({1})}}); }, {"NUL byte"});
  CHECK_FALSE(fs::exists((tmp / "x")));
  save_safetensors((tmp / "x"), {{"t", ones({1})}});
  expect_error<IOError>("NUL in a read path", [&] { load_safetensors(with_nul); }, {"NUL byte"});
}

TEST_CASE("safetensors: a FIFO is refused at once, not waited on") {
  TempDir tmp;
  const std::string fifo = tmp / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO for reading blocks until a writer comes; the load must not.
  expect_error<IOError>("FIFO", [&] { load_safetensors(fifo); }, {"pipe", "not a regular file"});
}

TEST_CASE("atomic_file: replaces the target; a failure mid-write leaves the old file and no temp") {
  TempDir tmp;
  const std::string path = (tmp / "ckpt.bin");
  write_file_atomic(path, "old contents", 12);
  CHECK(read_bytes(path) == "old contents");

  const std::string big(1 << 20, 'n');
  auto half_then_throw = [&](AtomicWriter& w) {
    w.write(big.data(), big.size() / 2);
    throw std::runtime_error("simulated crash mid-write");
  };
  CHECK_THROWS_WITH_AS(write_file_atomic(path, half_then_throw), "simulated crash mid-write", std::runtime_error);
  CHECK(read_bytes(path) == "old contents");
  for (const auto& e : fs::directory_iterator(tmp.path))
    CHECK_MESSAGE(e.path().filename() == "ckpt.bin", "left behind: ", e.path().string());

  // A save_safetensors that fails while copying (here: an undefined tensor) leaves the old file too.
  const std::string st = (tmp / "model.safetensors");
  save_safetensors(st, {{"w", ones({3})}});
  const std::string before = read_bytes(st);
  CHECK_THROWS_AS(save_safetensors(st, {{"w", zeros({3})}, {"x", Tensor()}}), ValueError);
  CHECK(read_bytes(st) == before);

  write_file_atomic(path, big.data(), big.size());
  CHECK(read_bytes(path) == big);
  CHECK(std::distance(fs::directory_iterator(tmp.path), fs::directory_iterator()) == 2);

  expect_error<IOError>("missing directory", [&] { write_file_atomic((tmp / "nope/f"), "x", 1); },
                        {"nope/f.tmp.", "No such file"});
}

}  // TEST_SUITE
