// Protobuf wire format (varint keys: field << 3 | wire type; 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32) for the few Event and Summary fields TensorBoard's scalar charts read.
#include "report/internal/tensorboard_event.h"

#include <array>
#include <bit>
#include <cstring>

namespace tierzero::report::internal {
namespace {

constexpr std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
    table[i] = crc;
  }
  return table;
}

// Field numbers of event.proto's Event and summary.proto's Summary / Summary.Value.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

template <typename T>
void put_little_endian(std::string& out, T value) {
  static_assert(std::endian::native == std::endian::little, "the encoding below assumes a little-endian host");
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_key(std::string& out, uint32_t field, uint32_t wire_type) { put_varint(out, field << 3 | wire_type); }

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event's wall_time and step, the fields every event starts with.
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_key(event, kEventWallTime, kFixed64);
  put_little_endian(event, wall_time);
  if (step != 0) {  // proto3 leaves a zero out
    put_key(event, kEventStep, kVarint);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  static constexpr std::array<uint32_t, 256> kTable = crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (char c : bytes) crc = kTable[(crc ^ static_cast<uint8_t>(c)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string length;
  put_little_endian<uint64_t>(length, data.size());
  std::string record = length;
  put_little_endian(record, masked_crc32c(length));
  record.append(data);
  put_little_endian(record, masked_crc32c(data));
  return record;
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string summary_value;
    put_bytes(summary_value, kValueTag, tag);
    put_key(summary_value, kValueSimpleValue, kFixed32);
    put_little_endian(summary_value, static_cast<float>(value));
    put_bytes(summary, kSummaryValue, summary_value);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

}  // namespace tierzero::report::internal
