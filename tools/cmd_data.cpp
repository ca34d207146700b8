// `tierzero data prepare --model DIR IN.jsonl OUT`: JSONL rows ("text", "prompt" + "completion",
// or chat "messages" rendered with the model's chat template) tokenized with the model's own
// tokenizer on every core into a token file that `train` reads (text/internal/dataset.h has the
// formats). `tierzero data show --model DIR IN.jsonl`: the first rows as tokenized, the text
// that carries loss marked. `--tokenizer DIR` is the older spelling of `--model DIR`.
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "text/text.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

struct PrepareFlags {
  std::string tokenizer;
  std::string input;
  std::string output;
  int threads = 0;  // 0 (not given): every core
  std::string json;
  bool no_progress = false;
};

std::string token_name(const text::Tokenizer& tok, std::optional<uint32_t> id) {
  return id ? *tok.id_to_token(*id) + "=" + std::to_string(*id) : "-";
}

void run_prepare(const PrepareFlags& flags) {
  const int threads = flags.threads > 0 ? flags.threads : tbb::info::default_concurrency();
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
  const auto tokenizer = value_or_throw(text::Tokenizer::load(flags.tokenizer));
  const text::ChatRowFormat chat = text::ChatRowFormat::load(flags.tokenizer);
  const uint64_t input_bytes = std::filesystem::file_size(flags.input);
  std::fprintf(stderr, "data prepare: %s (%s) with %s: %s, %u ids, BOS %s, EOS %s, %d threads\n", flags.input.c_str(),
               format_bytes(input_bytes).c_str(), flags.tokenizer.c_str(), tokenizer->family().c_str(),
               tokenizer->vocab_size(), token_name(*tokenizer, tokenizer->bos_id()).c_str(),
               token_name(*tokenizer, tokenizer->eos_id()).c_str(), threads);

  std::optional<ProgressBar> progress;
  if (!flags.no_progress) progress.emplace("tokenize", input_bytes, "B");
  const auto start = std::chrono::steady_clock::now();
  const text::TokenStream stream =
      value_or_throw(text::tokenize_jsonl_file(flags.input, *tokenizer, progress ? &*progress : nullptr, &chat));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress) progress->finish();
  throw_if_error(text::write_token_stream(flags.output, stream));

  const double tokens_per_second = static_cast<double>(stream.tokens.size()) / seconds;
  std::printf(
      "data prepare: %llu rows, %zu tokens, %llu carry loss (%.1f%%) in %.3f s: %.0f tokens/s, %.1f MB/s of JSONL\n",
      static_cast<unsigned long long>(stream.rows), stream.tokens.size(),
      static_cast<unsigned long long>(stream.target_tokens),
      100.0 * static_cast<double>(stream.target_tokens) / static_cast<double>(stream.tokens.size()), seconds,
      tokens_per_second, static_cast<double>(input_bytes) / seconds / 1e6);
  std::printf("data prepare: wrote %s (%s, %s)\n", flags.output.c_str(),
              stream.loss_mask.empty() ? "TZTOKENS v1" : "TZTOKENS v2 with the loss mask",
              format_bytes(std::filesystem::file_size(flags.output)).c_str());
  if (!flags.json.empty()) {
    const nlohmann::json report = {{"input", flags.input},
                                   {"input_bytes", input_bytes},
                                   {"tokenizer", flags.tokenizer},
                                   {"threads", threads},
                                   {"rows", stream.rows},
                                   {"tokens", stream.tokens.size()},
                                   {"target_tokens", stream.target_tokens},
                                   {"tokenize_seconds", seconds},
                                   {"tokens_per_second", tokens_per_second},
                                   {"output", flags.output}};
    std::ofstream(flags.json) << report.dump(2) << "\n";
  }
}

struct ShowFlags {
  std::string tokenizer;
  std::string input;
  int rows = 2;
};

// Prints the first `rows` rows of the input as tokenized, the trained text in [[...]].
void run_show(const ShowFlags& flags) {
  const auto tokenizer = value_or_throw(text::Tokenizer::load(flags.tokenizer));
  const text::ChatRowFormat chat = text::ChatRowFormat::load(flags.tokenizer);
  if (chat.chat_template) std::printf("data show: chat template %s\n", chat.chat_template->origin().c_str());
  std::ifstream in(flags.input);
  int shown = 0;
  std::string line;
  for (int line_no = 1; shown < flags.rows && std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = flags.input + " line " + std::to_string(line_no);
    // The row at its own line number, so that an error names the line once ("IN: line 3: ...").
    const text::TokenStream row = value_or_throw(
        text::tokenize_jsonl(std::string(line_no - 1, '\n') + line, *tokenizer, flags.input, nullptr, &chat));
    std::printf("--- %s: %zu tokens, %llu carry loss (in [[...]])\n%s\n", where.c_str(), row.tokens.size(),
                static_cast<unsigned long long>(row.target_tokens),
                value_or_throw(text::masked_text(row.tokens, row.loss_mask, *tokenizer)).c_str());
    ++shown;
  }
}

}  // namespace

void add_data_command(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Datasets: tokenize JSONL with the model's own tokenizer");
  data->require_subcommand(1);
  auto flags = std::make_shared<PrepareFlags>();
  CLI::App* prepare = data->add_subcommand("prepare",
                                           "JSONL rows ({\"text\"}, {\"prompt\", \"completion\"} as strings or "
                                           "messages, or chat {\"messages\"}) -> a token file for train, on every "
                                           "core");
  prepare->add_option("--model,--tokenizer", flags->tokenizer, "The Hugging Face model directory (tokenizer.json)")
      ->required();
  prepare->add_option("input", flags->input, "JSONL file, one row per line")->required()->check(CLI::ExistingFile);
  prepare->add_option("output", flags->output, "Token file to write (TZTOKENS)")->required();
  prepare->add_option("--threads", flags->threads, "Threads (default: every core)")->check(whole_number_in(1, 4096));
  prepare->add_option("--json", flags->json, "Also write the figures (rows, tokens, tokens/s) as JSON here");
  prepare->add_flag("--no-progress", flags->no_progress, "No progress bar");
  prepare->callback([flags] { run_prepare(*flags); });

  auto show_flags = std::make_shared<ShowFlags>();
  CLI::App* show = data->add_subcommand(
      "show", "The first rows as the model sees them: the rendered text, what carries loss in [[...]]");
  show->add_option("--model,--tokenizer", show_flags->tokenizer, "The Hugging Face model directory (tokenizer.json)")
      ->required();
  show->add_option("input", show_flags->input, "JSONL file, one row per line")->required()->check(CLI::ExistingFile);
  show->add_option("--rows", show_flags->rows, "How many rows (default 2)")->check(whole_number_in(1, 1'000'000));
  show->callback([show_flags] { run_show(*show_flags); });
}

}  // namespace tierzero::tools
