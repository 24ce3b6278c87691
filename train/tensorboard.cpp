#include "train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "tensor/atomic_file.h"
#include "tensor/printable.h"
#include "train/append_whole.h"

namespace ember::train {

namespace {

// Byte-at-a-time table of the reflected CRC-32C: entry i is the CRC register after shifting byte i
// through it (RFC 3720, appendix B.4, defines the polynomial and its bit order).
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf's wire format (protobuf.dev/programming-guides/encoding): each field is a key varint
// (field number << 3 | wire type) and its value: a varint (type 0), 8 little-endian bytes (1), a
// varint length and the bytes (2), or 4 little-endian bytes (5). Varints hold 7 bits per byte, low
// bits first, the top bit set on every byte but the last; an int64 goes as its two's complement.
class ProtoEncoder {
 public:
  void varint_field(int field, uint64_t value) {
    key(field, 0);
    varint(value);
  }
  void double_field(int field, double value) {
    key(field, 1);
    little_endian(std::bit_cast<uint64_t>(value), 8);
  }
  void bytes_field(int field, std::string_view bytes) {
    key(field, 2);
    varint(bytes.size());
    out_.append(bytes);
  }
  void float_field(int field, float value) {
    key(field, 5);
    little_endian(std::bit_cast<uint32_t>(value), 4);
  }
  const std::string& bytes() const { return out_; }

 private:
  void key(int field, int wire_type) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type)); }
  void varint(uint64_t value) {
    for (; value >= 0x80; value >>= 7) out_ += static_cast<char>((value & 0x7f) | 0x80);
    out_ += static_cast<char>(value);
  }
  void little_endian(uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>(value >> (8 * i));
  }
  std::string out_;
};

// Field numbers of TensorFlow's tensorflow/core/util/event.proto (Event) and
// tensorflow/core/framework/summary.proto (Summary, Summary.Value).
constexpr int kEventWallTime = 1;     // double, seconds since the Unix epoch
constexpr int kEventStep = 2;         // int64
constexpr int kEventFileVersion = 3;  // string
constexpr int kEventSummary = 5;      // Summary
constexpr int kSummaryValue = 1;      // repeated Summary.Value
constexpr int kValueTag = 1;          // string
constexpr int kValueSimpleValue = 2;  // float

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::atomic<int> g_files_made{0};  // the <n> of this process's file names

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint32_t crc = ~0u;
  for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  // TensorFlow's tsl/lib/hash/crc32c.h, Mask(): kMaskDelta = 0xa282ead8.
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw IOError("cannot make the TensorBoard directory " + printable_path(dir) + ": " +
                  (ec ? ec.message() : std::string("it exists and is not a directory")));
  // tensorboard/summary/writer/event_file_writer.py names its files so: "events.out.tfevents.%010d.%s.%s.%s"
  // % (time, hostname, pid, a per-process counter); TensorBoard reads every file whose name holds "tfevents".
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%010lld", static_cast<long long>(wall_time()));
  const std::string prefix = (std::filesystem::path(dir) / "events.out.tfevents.").string() + seconds + "." +
                             host_name() + "." + std::to_string(::getpid()) + ".";
  do {
    path_ = prefix + std::to_string(g_files_made++);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  } while (fd_ < 0 && errno == EEXIST);  // never an earlier file, whose records stay as they are
  if (fd_ < 0) throw IOError("cannot create the TensorBoard event file " + printable_path(path_) + ": " + std::strerror(errno));
  // The first event of every file names the format's version (TensorFlow's core/util/events_writer.cc);
  // with version 2, TensorBoard keeps events whose steps go back (validation at epochs, training at
  // iterations) instead of purging them as the remains of a crash.
  ProtoEncoder event;
  event.double_field(kEventWallTime, wall_time());
  event.bytes_field(kEventFileVersion, "brain.Event:2");
  try {
    write_record(event.bytes());
  } catch (const IOError&) {
    ::close(fd_);
    ::unlink(path_.c_str());
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::add_scalars(const std::vector<std::pair<std::string, double>>& scalars, int64_t step) {
  ProtoEncoder summary;
  for (const auto& [tag, value] : scalars) {
    ProtoEncoder v;
    v.bytes_field(kValueTag, tag);
    v.float_field(kValueSimpleValue, static_cast<float>(value));
    summary.bytes_field(kSummaryValue, v.bytes());
  }
  ProtoEncoder event;
  event.double_field(kEventWallTime, wall_time());
  event.varint_field(kEventStep, static_cast<uint64_t>(step));
  event.bytes_field(kEventSummary, summary.bytes());
  write_record(event.bytes());
}

void TensorBoardWriter::write_record(const std::string& event) {
  // TensorFlow's core/lib/io/record_writer.cc: uint64 length, uint32 masked CRC-32C of the length's 8
  // bytes, the data, uint32 masked CRC-32C of the data; all little-endian.
  std::string record;
  const auto append_le = [&record](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) record += static_cast<char>(value >> (8 * i));
  };
  append_le(event.size(), 8);
  append_le(masked_crc32c(record.data(), 8), 4);
  record += event;
  append_le(masked_crc32c(event.data(), event.size()), 4);
  append_whole(fd_, record, size_, "TensorBoard event file", path_);
}

}  // namespace ember::train
