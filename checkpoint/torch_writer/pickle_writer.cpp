#include <bit>
#include <cstring>
#include <limits>

#include "checkpoint/torch_writer/torch_writer.h"

namespace tierzero::checkpoint {

PickleWriter::PickleWriter() { out_ = "\x80\x02"; }

template <typename T>
void PickleWriter::little(T value) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out_.push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff));
}

void PickleWriter::none() { op('N'); }
void PickleWriter::boolean(bool value) { op(value ? '\x88' : '\x89'); }

void PickleWriter::integer(int64_t value) {
  if (value >= 0 && value < 256) {
    op('K');
    little(static_cast<uint8_t>(value));
  } else if (value >= 0 && value < 65536) {
    op('M');
    little(static_cast<uint16_t>(value));
  } else if (value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max()) {
    op('J');
    little(static_cast<uint32_t>(static_cast<int32_t>(value)));
  } else {  // LONG1: 8 bytes of two's complement, little-endian
    op('\x8a');
    out_.push_back(8);
    little(static_cast<uint64_t>(value));
  }
}

void PickleWriter::real(double value) {  // BINFLOAT: big-endian IEEE 754
  op('G');
  const auto bits = std::bit_cast<uint64_t>(value);
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void PickleWriter::string(std::string_view utf8) {
  op('X');
  little(static_cast<uint32_t>(utf8.size()));
  out_.append(utf8);
}

void PickleWriter::global(std::string_view module, std::string_view name) {
  op('c');
  out_.append(module);
  out_.push_back('\n');
  out_.append(name);
  out_.push_back('\n');
}

void PickleWriter::begin_dict() {
  op('}');
  op('(');
}
void PickleWriter::end_dict() { op('u'); }
void PickleWriter::begin_list() {
  op(']');
  op('(');
}
void PickleWriter::end_list() { op('e'); }
void PickleWriter::begin_tuple() { op('('); }
void PickleWriter::mark() { op('('); }
void PickleWriter::end_tuple() { op('t'); }
void PickleWriter::reduce() { op('R'); }
void PickleWriter::newobj() { op('\x81'); }
void PickleWriter::build() { op('b'); }
void PickleWriter::persistent_id() { op('Q'); }

void PickleWriter::json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return none();
    case nlohmann::json::value_t::boolean: return boolean(value.get<bool>());
    case nlohmann::json::value_t::number_integer: return integer(value.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return integer(static_cast<int64_t>(value.get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return real(value.get<double>());
    case nlohmann::json::value_t::string: return string(value.get_ref<const std::string&>());
    case nlohmann::json::value_t::array:
      begin_list();
      for (const auto& item : value) json(item);
      return end_list();
    case nlohmann::json::value_t::object:
      begin_dict();
      for (const auto& [k, item] : value.items()) {
        string(k);
        json(item);
      }
      return end_dict();
    default: return none();  // binary / discarded: not produced by parsing JSON text
  }
}

std::string PickleWriter::finish() {
  op('.');
  std::string bytes = std::move(out_);
  out_ = "\x80\x02";
  return bytes;
}

}  // namespace tierzero::checkpoint
