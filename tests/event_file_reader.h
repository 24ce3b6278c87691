// A reader of TensorBoard event files for the tests, written apart from train/tensorboard.cpp: it
// checks each record's framing and both masked CRC-32Cs (computed bit by bit here, not with the
// writer's table) and decodes the tensorflow.Event protobufs the writer makes (skipping fields it
// does not know, as protobuf readers do).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ember_test {

// CRC-32C from its definition: the reflected polynomial 0x82F63B78 shifted through one bit at a time.
inline uint32_t crc32c_bitwise(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    crc ^= bytes[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

// The inverse of TFRecord's mask (rotate right by 15, add 0xa282ead8).
inline uint32_t unmask_crc(uint32_t masked) {
  const uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

struct TensorBoardEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;  // Summary.Value: tag, simple_value
};

struct EventFileContents {
  std::vector<TensorBoardEvent> events;  // the records read, up to where reading stopped
  std::string error;                     // "": read to the end; else why and where it stopped
};

namespace event_file_detail {

// Protobuf wire format: a key varint (field << 3 | wire type), then the field's value.
struct ProtoReader {
  const uint8_t* p;
  const uint8_t* end;

  bool done() const { return p == end; }
  void need(size_t n) const {
    if (static_cast<size_t>(end - p) < n) throw std::runtime_error("protobuf field runs past its message");
  }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const uint8_t byte = *p++;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    throw std::runtime_error("protobuf varint longer than 10 bytes");
  }
  uint64_t little_endian(int bytes) {
    need(static_cast<size_t>(bytes));
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(*p++) << (8 * i);
    return value;
  }
  std::string bytes() {
    const uint64_t n = varint();
    need(n);
    std::string s(reinterpret_cast<const char*>(p), n);
    p += n;
    return s;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1: little_endian(8); break;
      case 2: bytes(); break;
      case 5: little_endian(4); break;
      default: throw std::runtime_error("protobuf wire type " + std::to_string(wire_type) + " is not one of 0, 1, 2, 5");
    }
  }
};

inline ProtoReader reader_of(const std::string& s) {
  const auto* data = reinterpret_cast<const uint8_t*>(s.data());
  return {data, data + s.size()};
}

// tensorflow/core/framework/summary.proto: Value { string tag = 1; float simple_value = 2; ... }
inline std::pair<std::string, float> decode_value(const std::string& message) {
  std::pair<std::string, float> value{"", 0.0f};
  for (ProtoReader r = reader_of(message); !r.done();) {
    const uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 2) {
      value.first = r.bytes();
    } else if (field == 2 && wire == 5) {
      const auto bits = static_cast<uint32_t>(r.little_endian(4));
      std::memcpy(&value.second, &bits, 4);
    } else {
      r.skip(wire);
    }
  }
  return value;
}

// Summary { repeated Value value = 1; }
inline std::vector<std::pair<std::string, float>> decode_summary(const std::string& message) {
  std::vector<std::pair<std::string, float>> values;
  for (ProtoReader r = reader_of(message); !r.done();) {
    const uint64_t key = r.varint();
    if (key == (1 << 3 | 2)) values.push_back(decode_value(r.bytes()));
    else r.skip(static_cast<int>(key & 7));
  }
  return values;
}

// tensorflow/core/util/event.proto: Event { double wall_time = 1; int64 step = 2;
// string file_version = 3; Summary summary = 5; ... }
inline TensorBoardEvent decode_event(const std::string& message) {
  TensorBoardEvent event;
  for (ProtoReader r = reader_of(message); !r.done();) {
    const uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 1) {
      const uint64_t bits = r.little_endian(8);
      std::memcpy(&event.wall_time, &bits, 8);
    } else if (field == 2 && wire == 0) {
      event.step = static_cast<int64_t>(r.varint());
    } else if (field == 3 && wire == 2) {
      event.file_version = r.bytes();
    } else if (field == 5 && wire == 2) {
      event.values = decode_summary(r.bytes());
    } else {
      r.skip(wire);
    }
  }
  return event;
}

inline uint64_t little_endian_at(const std::string& s, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  return value;
}

}  // namespace event_file_detail

// TFRecord framing (TensorFlow's core/lib/io/record_writer.cc): uint64 length, uint32 masked CRC of
// the length bytes, the data, uint32 masked CRC of the data, all little-endian.
inline EventFileContents parse_event_file(const std::string& file) {
  using namespace event_file_detail;
  EventFileContents out;
  for (size_t at = 0; at < file.size();) {
    const std::string where = "the record at byte " + std::to_string(at);
    if (file.size() - at < 12) {
      out.error = where + " is cut in its header";
      return out;
    }
    if (crc32c_bitwise(file.data() + at, 8) != unmask_crc(static_cast<uint32_t>(little_endian_at(file, at + 8, 4)))) {
      out.error = where + ": length CRC mismatch";
      return out;
    }
    const uint64_t length = little_endian_at(file, at, 8);
    if (file.size() - at - 12 < length || file.size() - at - 12 - length < 4) {
      out.error = where + " is cut in its data";
      return out;
    }
    const std::string data = file.substr(at + 12, length);
    if (crc32c_bitwise(data.data(), data.size()) !=
        unmask_crc(static_cast<uint32_t>(little_endian_at(file, at + 12 + length, 4)))) {
      out.error = where + ": data CRC mismatch";
      return out;
    }
    try {
      out.events.push_back(decode_event(data));
    } catch (const std::runtime_error& e) {
      out.error = where + ": " + e.what();
      return out;
    }
    at += 12 + length + 4;
  }
  return out;
}

inline std::string read_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline EventFileContents read_event_file(const std::string& path) { return parse_event_file(read_binary(path)); }

}  // namespace ember_test
