// JSONL rows to one token stream: whole-line chunks tokenized in parallel (oneTBB), joined in
// file order, so the output does not depend on the thread count.
#include <tbb/parallel_for.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "text/internal/chat_rows.h"
#include "text/internal/dataset.h"

namespace tierzero::text {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 18;

struct Chunk {
  std::string_view text;
  uint64_t first_line = 0;  // 1-based line number of its first line
  TokenStream out;
  bool any_masked = false;
  Status status;
};

// One row's tokens appended to `out`; the error says what is wrong with the row.
Status tokenize_row(const nlohmann::ordered_json& row, const Tokenizer& tokenizer, uint32_t eos,
                    const ChatRowFormat& chat, Chunk& chunk) {
  if (!row.is_object()) return invalid_argument("a row must be a JSON object");
  std::vector<uint32_t>& tokens = chunk.out.tokens;
  std::vector<uint8_t>& mask = chunk.out.loss_mask;
  const size_t first = tokens.size();
  if (is_chat_row(row)) {
    TZ_RETURN_IF_ERROR(tokenize_chat_row(row, chat, tokenizer, tokens, mask));
    chunk.any_masked = true;
    ++chunk.out.rows;
    return {};
  }
  const auto string_field = [&](const char* key) -> Result<std::string_view> {
    const auto& v = row.at(key);
    if (!v.is_string()) return invalid_argument(std::string("\"") + key + "\" must be a string, got " + v.type_name());
    return std::string_view(v.get_ref<const std::string&>());
  };
  const bool has_text = row.contains("text"), has_prompt = row.contains("prompt");
  if (has_text && (has_prompt || row.contains("completion")))
    return invalid_argument("give \"text\" or \"prompt\" + \"completion\", not both");
  if (has_text) {
    TZ_ASSIGN_OR_RETURN(const std::string_view text, string_field("text"));
    TZ_RETURN_IF_ERROR(tokenizer.encode(text, true, tokens));
    mask.resize(tokens.size(), 1);
  } else if (has_prompt && row.contains("completion")) {
    TZ_ASSIGN_OR_RETURN(const std::string_view prompt, string_field("prompt"));
    TZ_ASSIGN_OR_RETURN(const std::string_view completion, string_field("completion"));
    TZ_RETURN_IF_ERROR(tokenizer.encode(prompt, true, tokens));
    mask.resize(tokens.size(), 0);
    chunk.any_masked = chunk.any_masked || tokens.size() > first;
    TZ_RETURN_IF_ERROR(tokenizer.encode(completion, false, tokens));
    mask.resize(tokens.size(), 1);
  } else {
    return invalid_argument(
        "expected \"text\" (causal LM), \"prompt\" + \"completion\" (strings, or message lists: loss on the "
        "completion) or \"messages\" (a chat, loss on the assistant turns)");
  }
  if (tokens.size() == first || tokens.back() != eos) {
    tokens.push_back(eos);
    mask.push_back(1);
  }
  ++chunk.out.rows;
  return {};
}

void tokenize_chunk(Chunk& chunk, const Tokenizer& tokenizer, uint32_t eos, const ChatRowFormat& chat) {
  std::string_view rest = chunk.text;
  for (uint64_t line_no = chunk.first_line; !rest.empty(); ++line_no) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    // Ordered: a chat row's keys reach its template in the row's order.
    const auto row = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    Status s = row.is_discarded() ? invalid_argument("not valid JSON") : tokenize_row(row, tokenizer, eos, chat, chunk);
    if (!s.ok()) {
      chunk.status = s.with_context("line " + std::to_string(line_no));
      return;
    }
  }
}

// Whole-line chunks of about kChunkBytes, with their first line numbers.
std::vector<Chunk> split_chunks(std::string_view data) {
  std::vector<Chunk> chunks;
  uint64_t line = 1;
  while (!data.empty()) {
    size_t end = std::min(kChunkBytes, data.size());
    if (end < data.size()) {
      const size_t newline = data.find('\n', end - 1);
      end = newline == std::string_view::npos ? data.size() : newline + 1;
    }
    Chunk chunk;
    chunk.text = data.substr(0, end);
    chunk.first_line = line;
    line += static_cast<uint64_t>(std::count(chunk.text.begin(), chunk.text.end(), '\n'));
    chunks.push_back(std::move(chunk));
    data.remove_prefix(end);
  }
  return chunks;
}

template <typename T>
void store_le(std::vector<char>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

Result<TokenStream> tokenize_jsonl(std::string_view data, const Tokenizer& tokenizer, const std::string& source,
                                   ProgressBar* progress, const ChatRowFormat* chat) {
  const std::optional<uint32_t> eos = tokenizer.eos_id();
  if (!eos) {
    return invalid_argument("the tokenizer has no eos_token, which ends every row of " + source +
                            ": set eos_token in the model's tokenizer_config.json");
  }
  const ChatRowFormat no_chat{nullptr, chat_rows_unavailable("")};
  std::vector<Chunk> chunks = split_chunks(data);
  tbb::parallel_for(size_t{0}, chunks.size(), [&](size_t i) {
    tokenize_chunk(chunks[i], tokenizer, *eos, chat != nullptr ? *chat : no_chat);
    if (progress != nullptr) progress->advance(chunks[i].text.size());
  });
  TokenStream stream;
  bool any_masked = false;
  size_t total = 0;
  for (const Chunk& c : chunks) {
    if (!c.status.ok()) return c.status.with_context(source);
    total += c.out.tokens.size();
    any_masked = any_masked || c.any_masked;
  }
  stream.tokens.reserve(total);
  if (any_masked) stream.loss_mask.reserve(total);
  for (const Chunk& c : chunks) {
    stream.tokens.insert(stream.tokens.end(), c.out.tokens.begin(), c.out.tokens.end());
    if (any_masked) stream.loss_mask.insert(stream.loss_mask.end(), c.out.loss_mask.begin(), c.out.loss_mask.end());
    stream.rows += c.out.rows;
  }
  stream.target_tokens =
      any_masked ? static_cast<uint64_t>(std::count(stream.loss_mask.begin(), stream.loss_mask.end(), uint8_t{1}))
                 : stream.tokens.size();
  if (stream.rows == 0) return invalid_argument(source + " holds no rows: give one JSON object per line");
  return stream;
}

Result<TokenStream> tokenize_jsonl_file(const std::string& path, const Tokenizer& tokenizer, ProgressBar* progress,
                                        const ChatRowFormat* chat) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return not_found("cannot open JSONL file " + path + ": check the path");
  std::string text(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) return io_error("cannot read " + path);
  return tokenize_jsonl(text, tokenizer, path, progress, chat);
}

Status write_token_stream(const std::string& path, const TokenStream& stream) {
  const bool wide = std::any_of(stream.tokens.begin(), stream.tokens.end(), [](uint32_t t) { return t > 0xFFFF; });
  const bool masked = !stream.loss_mask.empty();
  std::vector<char> bytes;
  bytes.reserve(32 + stream.tokens.size() * (wide ? 4 : 2) + stream.loss_mask.size() / 8 + 1);
  bytes.insert(bytes.end(), {'T', 'Z', 'T', 'O', 'K', 'E', 'N', 'S'});
  store_le<uint32_t>(bytes, masked ? 2 : 1);
  store_le<uint32_t>(bytes, wide ? 4 : 2);
  store_le<uint64_t>(bytes, stream.tokens.size());
  store_le<uint64_t>(bytes, masked ? 1 : 0);
  for (const uint32_t t : stream.tokens) {
    if (wide)
      store_le<uint32_t>(bytes, t);
    else
      store_le<uint16_t>(bytes, static_cast<uint16_t>(t));
  }
  if (masked) {
    for (size_t i = 0; i < stream.loss_mask.size(); i += 8) {
      uint8_t byte = 0;
      for (size_t b = 0; b < 8 && i + b < stream.loss_mask.size(); ++b) byte |= (stream.loss_mask[i + b] & 1) << b;
      bytes.push_back(static_cast<char>(byte));
    }
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return io_error("cannot write token file " + path + ": check the directory exists and is writable");
  return {};
}

}  // namespace tierzero::text
