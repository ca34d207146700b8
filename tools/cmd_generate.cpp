// `tierzero generate --model DIR (--prompt TEXT | --prompt-file F | --messages JSON)`: text from a
// model directory or a `train --export` directory (+ a LoRA adapter), greedy or sampled, with a KV
// cache, on the GPU when there is one (engine/generate/generate.h). The text streams to stdout;
// --json prints the ids and the text as one JSON object instead.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "engine/generate/generate.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

struct GenerateFlags {
  engine::GenerateArgs args;
  std::string prompt_file;
  std::string messages;  // inline JSON or a file
  bool greedy = false;
  bool json = false;
  std::vector<CLI::Option*> sampling_only;  // --top-p, --top-k, --seed: refused without --temperature > 0
};

std::string read_text_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(not_found(fmt::format("{} {}: cannot be read", flag, path)));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// --messages: JSON given inline (it starts with '[' or '{') or the path of a JSON file.
nlohmann::ordered_json read_messages(const std::string& given) {
  const size_t first = given.find_first_not_of(" \t\r\n");
  const bool inline_json = first != std::string::npos && (given[first] == '[' || given[first] == '{');
  const std::string text = inline_json ? given : read_text_file(given, "--messages");
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded())
    throw Error(invalid_argument(fmt::format("--messages {}: not valid JSON", inline_json ? "(inline)" : given)));
  return json;
}

void run_generate(GenerateFlags& flags) {
  engine::GenerateArgs& args = flags.args;
  if (!flags.prompt_file.empty()) args.prompt = read_text_file(flags.prompt_file, "--prompt-file");
  if (!flags.messages.empty()) args.messages = read_messages(flags.messages);
  if (!args.prompt && !args.messages)
    throw Error(invalid_argument("give a prompt: --prompt TEXT, --prompt-file FILE or --messages JSON"));
  if (flags.greedy) args.sampling.temperature = 0.0;
  for (const CLI::Option* option : flags.sampling_only)
    if (option->count() > 0 && args.sampling.temperature == 0.0)
      throw Error(invalid_argument(
          fmt::format("{} applies to sampling, and decoding is greedy; add --temperature T (T > 0, e.g. 0.7) to sample",
                      option->get_name())));

  const auto start = std::chrono::steady_clock::now();
  auto stream = [&flags](std::string_view piece) {
    if (flags.json) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  const engine::Generation out = value_or_throw(engine::generate(args, stream));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (flags.json) {
    const nlohmann::json result = {{"prompt_ids", out.prompt_ids},   {"ids", out.ids},       {"text", out.text},
                                   {"stop_reason", out.stop_reason}, {"device", out.device}, {"dtype", out.dtype}};
    std::printf("%s\n", result.dump().c_str());
  } else {
    std::printf("\n");
  }
  std::fprintf(stderr, "generate: %zu prompt + %zu new tokens on %s in %s, %.2f s (load included); stopped at %s\n",
               out.prompt_ids.size(), out.ids.size(), out.device.c_str(), out.dtype.c_str(), seconds,
               out.stop_reason == "eos" ? "an end-of-sequence token" : "--max-new-tokens");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  engine::GenerateArgs& args = flags->args;
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Continue a prompt with a model (a Hugging Face directory or a `train --export` one, + a LoRA adapter): greedy "
      "or sampled, with a KV cache, on the GPU when there is one");
  cmd->add_option("--model", args.model_dir,
                  "model directory: config.json, safetensors and the tokenizer (tokenizer.json); a Hugging Face "
                  "download or what `tierzero train --export` writes")
      ->required();
  cmd->add_option("--adapter", args.adapter_dir,
                  "a LoRA adapter directory over --model (PEFT's adapter_config.json + adapter_model.safetensors, as "
                  "`tierzero train` writes for a LoRA run), applied beside the base as PEFT does");
  CLI::Option* prompt = cmd->add_option("--prompt", args.prompt, "prompt text (encoded with the tokenizer's BOS)");
  CLI::Option* prompt_file =
      cmd->add_option("--prompt-file", flags->prompt_file, "read the prompt text from this file")->excludes(prompt);
  cmd->add_option("--messages", flags->messages,
                  "chat messages, as a JSON file or inline JSON: [{\"role\": \"user\", \"content\": \"...\"}, ...] "
                  "(or {\"messages\": [...], \"tools\": [...]}), rendered with the model's chat template and its "
                  "assistant prompt (add_generation_prompt=True)")
      ->excludes(prompt)
      ->excludes(prompt_file);
  cmd->add_option("--max-new-tokens", args.max_new_tokens, "tokens to generate at most (default 256)")
      ->check(whole_number_in(1, 1'000'000));
  CLI::Option* temperature =
      cmd->add_option("--temperature", args.sampling.temperature,
                      "sampling temperature; 0 (the default) is greedy decoding, transformers' do_sample=False")
          ->check(number_in(0.0, 1e6));
  cmd->add_flag("--greedy", flags->greedy, "greedy decoding (the default; --temperature 0)")->excludes(temperature);
  flags->sampling_only = {
      cmd->add_option("--top-p", args.sampling.top_p,
                      "sampling: keep the most likely tokens whose probabilities add up to P (default 1: all)")
          ->check(number_in(0.0, 1.0)),
      cmd->add_option("--top-k", args.sampling.top_k, "sampling: keep the K most likely tokens (default: all)")
          ->check(whole_number_in(1, int64_t{1} << 31)),
      cmd->add_option("--seed", args.sampling.seed,
                      "sampling's random seed (default 0): the same seed, model and prompt give the same text; on the "
                      "CPU, the tokens torch.manual_seed(seed) + transformers' generate(do_sample=True) draws")
          ->check(whole_number_in(0, int64_t{1} << 62))};
  cmd->add_flag("--ignore-eos", args.ignore_eos,
                "keep going past end-of-sequence tokens to --max-new-tokens (by default generation stops at "
                "generation_config.json's eos_token_id, or config.json's, and the tokenizer's eos_token)");
  cmd->add_option("--device", args.device, "cuda or cpu (default: cuda when there is a GPU)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--dtype", args.dtype, "fp32, bf16 or fp16 (default: the model's torch_dtype)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_flag("--json", flags->json,
                "print {\"prompt_ids\", \"ids\", \"text\", \"stop_reason\", \"device\", \"dtype\"} as one JSON line "
                "instead of streaming the text");
  cmd->callback([flags] { run_generate(*flags); });
}

}  // namespace tierzero::tools
