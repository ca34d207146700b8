// generate() (generate.h): the inputs checked, the prompt built, then the decoding loop.
#include "engine/generate/generate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "engine/generate/internal/decoding_model.h"
#include "engine/generate/internal/sampling.h"
#include "engine/generate/internal/stop_tokens.h"
#include "text/text.h"

namespace tierzero::engine {
namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // what decode() makes of a partial character

Result<at::Device> pick_device(const std::string& name) {
  if (name.empty()) return at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  if (name == "cpu") return at::Device(at::kCPU);
  if (name == "cuda") {
    if (!at::hasCUDA())
      return invalid_argument(
          "--device cuda: this machine (or this build's LibTorch) has no CUDA device; use --device cpu");
    return at::Device(at::kCUDA, 0);
  }
  return invalid_argument(fmt::format("--device: must be cuda or cpu, got \"{}\"", name));
}

// --dtype, or the model's torch_dtype when empty.
Result<std::pair<at::ScalarType, std::string>> pick_dtype(const std::string& flag, const ModelConfig& config) {
  const std::string name = !flag.empty()                      ? flag
                           : config.torch_dtype == "bfloat16" ? "bf16"
                           : config.torch_dtype == "float16"  ? "fp16"
                                                              : "fp32";
  if (name == "fp32") return std::pair{at::kFloat, name};
  if (name == "bf16") return std::pair{at::kBFloat16, name};
  if (name == "fp16") return std::pair{at::kHalf, name};
  return invalid_argument(fmt::format("--dtype: must be fp32, bf16 or fp16, got \"{}\"", name));
}

// The prompt's ids (generate.h, GenerateArgs::prompt / messages).
Result<std::vector<uint32_t>> prompt_ids(const GenerateArgs& args, const text::Tokenizer& tokenizer) {
  if (args.prompt.has_value() == args.messages.has_value())
    return invalid_argument(
        "give the prompt as text (--prompt, --prompt-file) or as chat messages (--messages), one of them");
  if (args.prompt) return tokenizer.encode(*args.prompt, /*add_special_tokens=*/true);
  const nlohmann::ordered_json& given = *args.messages;
  const nlohmann::ordered_json messages = given.is_object() && given.contains("messages") ? given["messages"] : given;
  const nlohmann::ordered_json tools =
      given.is_object() && given.contains("tools") ? given["tools"] : nlohmann::ordered_json();
  const bool well_formed = messages.is_array() && !messages.empty() &&
                           std::all_of(messages.begin(), messages.end(), [](const nlohmann::ordered_json& m) {
                             return m.is_object() && m.contains("role") && m["role"].is_string();
                           });
  if (!well_formed)
    return invalid_argument(
        "--messages: must be a non-empty JSON array of {\"role\": ..., \"content\": ...} objects (or an object with "
        "\"messages\" and optionally \"tools\"), e.g. [{\"role\": \"user\", \"content\": \"Hello\"}]");
  const text::ChatRowFormat format = text::ChatRowFormat::load(args.model_dir);
  if (!format.chat_template) return invalid_argument("--messages: " + format.unavailable);
  TZ_ASSIGN_OR_RETURN(const text::RenderedChat rendered,
                      format.chat_template->render(messages, tools, /*add_generation_prompt=*/true));
  return tokenizer.encode(rendered.text, /*add_special_tokens=*/false);
}

// Everything generate() checks before it loads the weights.
Status check_prompt(const std::vector<uint32_t>& ids, const GenerateArgs& args, const ModelConfig& config) {
  if (ids.empty()) return invalid_argument("the prompt encodes to no tokens; give some text");
  for (const uint32_t id : ids)
    if (id >= config.vocab_size)
      return invalid_argument(fmt::format(
          "the tokenizer of {} gives the prompt token id {}, outside the model's vocab_size {}: the tokenizer is not "
          "this model's",
          args.model_dir, id, config.vocab_size));
  const int64_t total = static_cast<int64_t>(ids.size()) + args.max_new_tokens;
  if (total > config.max_position_embeddings)
    return invalid_argument(fmt::format(
        "the prompt ({} tokens) and --max-new-tokens {} make {} positions, past the model's max_position_embeddings "
        "{}; lower --max-new-tokens to {} or shorten the prompt",
        ids.size(), args.max_new_tokens, total, config.max_position_embeddings,
        std::max<int64_t>(0, config.max_position_embeddings - static_cast<int64_t>(ids.size()))));
  return {};
}

// Streams the decoded text as it grows: the part of decode(ids) after what was passed on, held back
// while it ends in an incomplete character or does not extend what was passed on.
class TextStream {
 public:
  TextStream(const text::Tokenizer& tokenizer, const std::function<void(std::string_view)>& on_text)
      : tokenizer_(tokenizer), on_text_(on_text) {}

  Result<std::string> update(const std::vector<uint32_t>& ids, bool last) {
    TZ_ASSIGN_OR_RETURN(std::string text, tokenizer_.decode(ids, /*skip_special_tokens=*/true));
    const bool complete = last || !text.ends_with(kReplacementCharacter);
    if (complete && text.size() > sent_.size() && text.starts_with(sent_)) {
      if (on_text_) on_text_(std::string_view(text).substr(sent_.size()));
      sent_ = text;
    }
    return text;
  }

 private:
  const text::Tokenizer& tokenizer_;
  const std::function<void(std::string_view)>& on_text_;
  std::string sent_;  // the text passed on so far
};

}  // namespace

Result<Generation> generate(const GenerateArgs& args, const std::function<void(std::string_view)>& on_text) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(args.model_dir)) return not_found(fmt::format("--model {}: no such directory", args.model_dir));
  if (!fs::exists(fs::path(args.model_dir) / "config.json"))
    return not_found(fmt::format(
        "--model {}: no config.json; --model takes a Hugging Face model directory or one `tierzero train --export` "
        "wrote (an engine checkpoint becomes one with `tierzero convert`)",
        args.model_dir));
  if (!args.adapter_dir.empty() && !fs::is_directory(args.adapter_dir))
    return not_found(fmt::format("--adapter {}: no such directory", args.adapter_dir));
  if (args.max_new_tokens < 1)
    return invalid_argument(fmt::format("--max-new-tokens: must be at least 1, got {}", args.max_new_tokens));
  TZ_RETURN_IF_ERROR(check_sampling(args.sampling));
  TZ_ASSIGN_OR_RETURN(const ModelConfig config, load_model_config(args.model_dir));
  TZ_ASSIGN_OR_RETURN(const at::Device device, pick_device(args.device));
  TZ_ASSIGN_OR_RETURN(const auto dtype, pick_dtype(args.dtype, config));
  auto tokenizer = text::Tokenizer::load(args.model_dir);
  if (!tokenizer.ok())
    return Status(tokenizer.status().code(),
                  "generate encodes the prompt and decodes the output with the model's own tokenizer: " +
                      tokenizer.status().message());
  if (!args.adapter_dir.empty()) TZ_RETURN_IF_ERROR(read_adapter_spec(args.adapter_dir).status());

  Generation out;
  TZ_ASSIGN_OR_RETURN(out.prompt_ids, prompt_ids(args, **tokenizer));
  TZ_RETURN_IF_ERROR(check_prompt(out.prompt_ids, args, config));
  TZ_ASSIGN_OR_RETURN(const std::vector<uint32_t> stop_ids, stop_token_ids(args.model_dir, **tokenizer));
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<DecodingModel> model,
                      DecodingModel::load(args.model_dir, args.adapter_dir, dtype.first, device));
  out.device = device.str();
  out.dtype = dtype.second;

  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(args.sampling.seed);
  TextStream stream(**tokenizer, on_text);
  std::vector<int64_t> sequence(out.prompt_ids.begin(), out.prompt_ids.end());
  out.stop_reason = "max_new_tokens";
  while (static_cast<int64_t>(out.ids.size()) < args.max_new_tokens) {
    const int64_t token = choose_token(model->next_logits(sequence), args.sampling, generator);
    out.ids.push_back(static_cast<uint32_t>(token));
    const bool stop = !args.ignore_eos && std::binary_search(stop_ids.begin(), stop_ids.end(), out.ids.back());
    const bool last = stop || static_cast<int64_t>(out.ids.size()) == args.max_new_tokens;
    TZ_ASSIGN_OR_RETURN(out.text, stream.update(out.ids, last));
    if (stop) {
      out.stop_reason = "eos";
      break;
    }
    sequence.push_back(token);
  }
  return out;
}

}  // namespace tierzero::engine
