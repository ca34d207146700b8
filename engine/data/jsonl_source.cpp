// JSONL samples (format in token_data.h), read whole into memory with targets precomputed.
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data/token_data.h"

namespace tierzero::engine {
namespace {

class JsonlSource final : public SampleSource {
 public:
  explicit JsonlSource(int64_t seq_len) : seq_len_(seq_len) {}
  int64_t size() const override { return rows_; }
  int64_t seq_len() const override { return seq_len_; }
  Status read(int64_t index, int64_t* input_ids, int64_t* targets) const override {
    if (index < 0 || index >= rows_) {
      return invalid_argument("sample " + std::to_string(index) + " is outside [0, " + std::to_string(rows_) + ")");
    }
    const auto first = static_cast<size_t>(index * seq_len_);
    std::copy_n(inputs_.begin() + static_cast<std::ptrdiff_t>(first), seq_len_, input_ids);
    std::copy_n(targets_.begin() + static_cast<std::ptrdiff_t>(first), seq_len_, targets);
    return {};
  }

  // Appends one row; the error says what is wrong with it (the caller adds file and line).
  Status add_row(const nlohmann::json& row) {
    if (!row.is_object() || !row.contains("input_ids"))
      return invalid_argument("expected an object with \"input_ids\"");
    TZ_ASSIGN_OR_RETURN(std::vector<int64_t> ids, int_array(row, "input_ids", 0));
    const auto n = static_cast<int64_t>(ids.size());
    if (n < 2) return invalid_argument("\"input_ids\" needs at least 2 tokens, got " + std::to_string(n));
    if (n > seq_len_ + 1) {
      return invalid_argument("\"input_ids\" has " + std::to_string(n) + " tokens, more than seq_len + 1 = " +
                              std::to_string(seq_len_ + 1) + ": raise tierzero.data.seq_len or split the row");
    }
    const bool has_labels = row.contains("labels"), has_mask = row.contains("loss_mask");
    if (has_labels && has_mask) return invalid_argument("give \"labels\" or \"loss_mask\", not both");
    std::vector<int64_t> labels = ids;  // labels[t]: the target of position t - 1
    if (has_labels) {
      TZ_ASSIGN_OR_RETURN(labels, int_array(row, "labels", kIgnoreIndex));
      if (labels.size() != ids.size()) return length_mismatch("labels", labels.size(), ids.size());
    } else if (has_mask) {
      TZ_ASSIGN_OR_RETURN(std::vector<int64_t> mask, int_array(row, "loss_mask", 0));
      if (mask.size() != ids.size()) return length_mismatch("loss_mask", mask.size(), ids.size());
      for (size_t t = 0; t < mask.size(); ++t) {
        if (mask[t] > 1) return invalid_argument("\"loss_mask\" values must be 0 or 1, got " + std::to_string(mask[t]));
        if (mask[t] == 0) labels[t] = kIgnoreIndex;
      }
    }
    for (int64_t t = 0; t < seq_len_; ++t) {
      inputs_.push_back(t < n ? ids[static_cast<size_t>(t)] : 0);
      targets_.push_back(t + 1 < n ? labels[static_cast<size_t>(t + 1)] : kIgnoreIndex);
    }
    ++rows_;
    return {};
  }

 private:
  static Status length_mismatch(const char* key, size_t got, size_t expected) {
    return invalid_argument(std::string("\"") + key + "\" has " + std::to_string(got) +
                            " entries but \"input_ids\" has " + std::to_string(expected));
  }

  // The integer array under `key`, every value >= min (labels may also be kIgnoreIndex).
  static Result<std::vector<int64_t>> int_array(const nlohmann::json& row, const char* key, int64_t min) {
    const nlohmann::json& a = row.at(key);
    if (!a.is_array()) return invalid_argument(std::string("\"") + key + "\" must be an array of integers");
    std::vector<int64_t> out;
    out.reserve(a.size());
    for (const auto& v : a) {
      if (v.is_boolean() && std::string_view(key) == "loss_mask") {
        out.push_back(v.get<bool>() ? 1 : 0);
        continue;
      }
      if (!v.is_number_integer() || v.get<int64_t>() < min ||
          (min == kIgnoreIndex && v.get<int64_t>() < 0 && v.get<int64_t>() != kIgnoreIndex)) {
        return invalid_argument(std::string("\"") + key + "\" holds " + v.dump() +
                                (min == kIgnoreIndex ? ", not a token id or -100" : ", not a non-negative integer"));
      }
      out.push_back(v.get<int64_t>());
    }
    return out;
  }

  int64_t seq_len_;
  int64_t rows_ = 0;
  std::vector<int64_t> inputs_;
  std::vector<int64_t> targets_;
};

}  // namespace

Result<std::shared_ptr<const SampleSource>> open_jsonl(const std::string& path, int64_t seq_len) {
  if (seq_len < 1) return invalid_argument("seq_len must be >= 1, got " + std::to_string(seq_len));
  std::ifstream in(path);
  if (!in) return not_found("cannot open JSONL file " + path + ": check the path");
  auto source = std::make_shared<JsonlSource>(seq_len);
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    Status s = row.is_discarded() ? invalid_argument("not valid JSON") : source->add_row(row);
    if (!s.ok()) return s.with_context(path + " line " + std::to_string(line_no));
  }
  if (source->size() == 0) return invalid_argument(path + " holds no samples");
  return std::shared_ptr<const SampleSource>(source);
}

}  // namespace tierzero::engine
