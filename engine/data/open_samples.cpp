// open_samples(): the reader a data file needs, chosen by its extension and, for JSONL, by what
// its first row holds (token ids, or text for the model's tokenizer).
#include <fstream>

#include "engine/data/token_data.h"

namespace tierzero::engine {
namespace {

// True when the first non-blank line of `path` is an object with "text", "prompt" or "messages"
// (a chat); false otherwise (ids, invalid JSON: open_jsonl() reports those with the line).
bool first_row_holds_text(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    return row.is_object() && (row.contains("text") || row.contains("prompt") || row.contains("messages"));
  }
  return false;
}

}  // namespace

Result<std::shared_ptr<const SampleSource>> open_samples(const std::string& path, int64_t seq_len,
                                                         std::optional<TokenDtype> dtype,
                                                         const std::string& tokenizer_dir) {
  if (!path.ends_with(".jsonl")) return open_token_file(path, seq_len, dtype);
  if (!first_row_holds_text(path)) return open_jsonl(path, seq_len);
  if (tokenizer_dir.empty()) {
    return invalid_argument(path +
                            " holds text rows (\"text\", \"prompt\" + \"completion\" or chat \"messages\"), which the "
                            "model's tokenizer (and chat template) turn into tokens: pass --model DIR (a Hugging Face "
                            "directory with tokenizer.json), or "
                            "tokenize first with `tierzero data prepare --model DIR " +
                            path + " OUT`");
  }
  return open_text_jsonl(path, seq_len, tokenizer_dir);
}

}  // namespace tierzero::engine
