// check_duplicate_keys(): nlohmann::json keeps the last of two equal keys without a word; DeepSpeed
// loads a ds_config file with dict_raise_error_on_duplicate_keys and refuses it. A SAX pass over the
// text finds them, the line of each key from how far the parser has read when it reports the key.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine::detail {
namespace {

// A const char* into the text that records in *read_to how far the parser has read it.
class TrackedChar {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedChar(const char* at, const char** read_to) : at_(at), read_to_(read_to) {}
  reference operator*() const { return *at_; }
  TrackedChar& operator++() {
    *read_to_ = ++at_;
    return *this;
  }
  TrackedChar operator++(int) {
    TrackedChar before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedChar& other) const { return at_ == other.at_; }
  bool operator!=(const TrackedChar& other) const { return at_ != other.at_; }

 private:
  const char* at_;
  const char** read_to_;
};

// Collects "'PATH' at lines A and B" for every key an object repeats.
class DuplicateKeyFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  DuplicateKeyFinder(std::string_view text, const char* const* read_to) : text_(text), read_to_(read_to) {}

  const std::vector<std::string>& duplicates() const { return duplicates_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    value();
    frames_.emplace_back(/*object=*/true);
    return true;
  }
  bool start_array(std::size_t) override {
    value();
    frames_.emplace_back(/*object=*/false);
    return true;
  }
  bool end_object() override { return pop(); }
  bool end_array() override { return pop(); }
  bool key(string_t& key) override {
    // The parser has read through the key's closing quote.
    const size_t line = 1 + static_cast<size_t>(std::count(text_.data(), *read_to_, '\n'));
    Frame& frame = frames_.back();
    auto [first, inserted] = frame.key_lines.emplace(key, line);
    if (!inserted) duplicates_.push_back(fmt::format("'{}' at lines {} and {}", path_to(key), first->second, line));
    frame.key = key;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Frame {
    explicit Frame(bool is_object) : object(is_object) {}
    bool object;
    std::map<std::string, size_t> key_lines;  // object: each key and the line it is first given on
    std::string key;                          // object: the key whose value is being read
    int64_t index = -1;                       // array: the element being read
  };

  // A value starts: in an array, it is the next element.
  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool pop() {
    frames_.pop_back();
    return true;
  }
  // "zero_optimization.offload_param.device", "a[2].b": the path of `key` in the innermost object.
  std::string path_to(const std::string& key) const {
    std::string path;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& frame = frames_[i];
      if (frame.object) {
        path += (path.empty() ? "" : ".") + frame.key;
      } else {
        path += "[" + std::to_string(frame.index) + "]";
      }
    }
    return path + (path.empty() ? "" : ".") + key;
  }

  std::string_view text_;
  const char* const* read_to_;
  std::vector<Frame> frames_;
  std::vector<std::string> duplicates_;
};

}  // namespace

Status check_duplicate_keys(std::string_view text) {
  const char* read_to = text.data();
  DuplicateKeyFinder finder(text, &read_to);
  nlohmann::json::sax_parse(TrackedChar(text.data(), &read_to), TrackedChar(text.data() + text.size(), &read_to),
                            &finder);
  if (finder.duplicates().empty()) return {};
  return invalid_argument(fmt::format(
      "duplicate key {}: a key may be given once in an object (DeepSpeed refuses a ds_config file with duplicate "
      "keys; a JSON reader that takes them keeps one of the values without a word): remove all but one",
      fmt::join(finder.duplicates(), "; duplicate key ")));
}

}  // namespace tierzero::engine::detail
