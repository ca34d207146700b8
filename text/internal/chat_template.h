// A model's chat template: the Jinja `chat_template` of its Hugging Face directory, rendered as
// transformers' apply_chat_template(messages, tools=..., add_generation_prompt=...) renders it, by
// llama.cpp's Jinja engine (common/jinja/, built from llama-cpp-python's sdist on PyPI by
// cmake/FindLlamaCppJinja.cmake; a build without it has no engine, see engine_available()).
//
// Where the template comes from, as transformers reads it: DIR/chat_template.jinja when present,
// else tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} of
// which "default" is used). The template sees `messages`, `tools` (when the row has them),
// `add_generation_prompt`, and the special tokens of tokenizer_config.json as strings
// (bos_token, eos_token, unk_token, pad_token); with the engine's defaults of HF's environment
// (trim_blocks, lstrip_blocks, raise_exception, strftime_now).
//
// transformers 5's aliasing of reasoning is applied first: a message with a non-null
// "reasoning_content", "thinking" or "reasoning" (the first of them) gets that text as "thinking"
// and "reasoning_content" too, so templates reading either name see it.
//
// Where transformers' Jinja (jinja2) raises and llama.cpp's engine would not, rendering fails as in
// transformers: `+` of a string and anything but a string (a list of content parts, a missing
// "content", null), as Python's str + list raises TypeError and jinja2's Undefined raises
// UndefinedError; the error names the template line. Other uses of such values (`~`, filters,
// `{{ }}`) render as the engine renders them, where jinja2 renders them too (Llama 3's
// `content | trim` of content parts is Python's repr of the list in both).
//
// {% generation %} ... {% endgeneration %} (transformers' AssistantTracker, which
// apply_chat_template(return_assistant_tokens_mask=True) and TRL's assistant_only_loss read): the
// byte ranges of the output those blocks wrote are returned beside the text.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::text {

// A rendered conversation.
struct RenderedChat {
  std::string text;
  // [first, last) byte ranges of `text` written inside {% generation %} blocks, in order (empty
  // ranges included, as transformers records them); none when the template has no such block.
  std::vector<std::pair<size_t, size_t>> generation_spans;
};

class ChatTemplate {
 public:
  // Whether this build has the Jinja engine (false when the llama-cpp-python sdist was absent at
  // configure time: scripts/setup.sh downloads it).
  static bool engine_available();

  // DIR's chat template (above), compiled; nullptr when DIR has none or this build has no engine
  // (chat rows then fail with chat_rows_unavailable(DIR)). kCorrupt naming the file when
  // tokenizer_config.json is not JSON or its chat_template has the wrong type, kInvalidArgument
  // naming the file and position when the template does not parse.
  static Result<std::shared_ptr<const ChatTemplate>> load(const std::string& dir);

  // Compiles Jinja `source`; `special_tokens` is an object of the strings the template sees
  // beside the messages (bos_token ...); `origin` names the template in errors. kInvalidArgument
  // when it does not parse, kUnsupported when this build has no engine.
  static Result<std::shared_ptr<const ChatTemplate>> compile(const std::string& source,
                                                             const nlohmann::json& special_tokens,
                                                             const std::string& origin);

  virtual ~ChatTemplate() = default;

  // Renders `messages` (an array of {"role", "content", ...} objects) and `tools` (null for none)
  // with `add_generation_prompt` false (training rows) or true (a prompt the model is to answer: the
  // template adds the assistant turn's header); objects keep their key order (`tools | tojson` shows it).
  // kInvalidArgument with the template's own message when it raises (raise_exception) or fails on
  // these messages, or where jinja2 would raise (above). Thread-safe.
  virtual Result<RenderedChat> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                      bool add_generation_prompt = false) const = 0;

  // Whether the template has {% generation %} blocks (then they say which tokens are the assistant's).
  bool has_generation_blocks() const { return has_generation_blocks_; }

  // Where the template was read from, for messages.
  const std::string& origin() const { return origin_; }

 protected:
  ChatTemplate(std::string origin, bool has_generation_blocks)
      : origin_(std::move(origin)), has_generation_blocks_(has_generation_blocks) {}

 private:
  std::string origin_;
  bool has_generation_blocks_;
};

// Why chat rows cannot be read with the model directory `dir` (the build has no engine, or `dir`
// has no chat template) and what to do about it.
std::string chat_rows_unavailable(const std::string& dir);

}  // namespace tierzero::text
