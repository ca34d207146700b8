// TensorBoard's event file format, hand-encoded (no protobuf dependency): TFRecord framing with
// masked CRC-32C (tensorboard/summary/writer/record_writer.py) around serialized Event protos
// (tensorboard/compat/proto/event.proto, summary.proto) that carry scalar Summary values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tierzero::report::internal {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `bytes`: crc32c("123456789") = 0xE3069283.
uint32_t crc32c(std::string_view bytes);

// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);

// One TFRecord: uint64 length, uint32 masked_crc32c(length bytes), the data, uint32
// masked_crc32c(data); integers little-endian.
std::string tfrecord(std::string_view data);

// Event{wall_time, file_version: "brain.Event:2"}: the first record of every event file.
std::string file_version_event(double wall_time);

// Event{wall_time, step, summary: one Summary.Value{tag, simple_value} per scalar (a float32 each)}.
std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

}  // namespace tierzero::report::internal
