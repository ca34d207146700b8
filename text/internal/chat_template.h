// A model's chat template: the Jinja `chat_template` of its Hugging Face directory, rendered as
// transformers' apply_chat_template(messages, tools=..., add_generation_prompt=False) renders it, by
// llama.cpp's Jinja engine (common/jinja/, built from llama-cpp-python's sdist on PyPI by
// cmake/FindLlamaCppJinja.cmake; a build without it has no engine, see engine_available()).
//
// Where the template comes from, as transformers reads it: DIR/chat_template.jinja when present,
// else tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} of
// which "default" is used). The template sees `messages`, `tools` (when the row has them),
// `add_generation_prompt` = false, and the special tokens of tokenizer_config.json as strings
// (bos_token, eos_token, unk_token, pad_token); with the engine's defaults of HF's environment
// (trim_blocks, lstrip_blocks, raise_exception, strftime_now).
//
// Which text is the assistant's: the engine tracks, through the string operations of the template
// (concatenation, trim, strip, slicing ...), which output characters came from an input string and
// which from the template itself. Only the assistant messages' "content" (a string, or the "text"
// of its {"type": "text"} parts) and "reasoning_content" are marked as input, so the marked output
// is the assistant's text as the template placed it, whatever the template adds around it or drops
// from earlier turns (Qwen3 renders earlier turns without their reasoning, so rendering growing
// prefixes of the conversation would not find the turns in the full text). One exception, in
// llama.cpp's engine (0.3.36): split() marks only its last piece, so text a template cuts out of
// the content with split() before the last piece is not marked (Qwen3 cuts the reasoning out of a
// content holding "<think>...</think>": give it as "reasoning_content" instead and it is marked).
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
  // [first, last) byte ranges of `text` that are assistant content, in order, not overlapping.
  std::vector<std::pair<size_t, size_t>> assistant_spans;
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
  // with add_generation_prompt false (training rows), or true (a prompt the model is to answer:
  // the template adds the assistant turn's header); objects keep their key order (`tools | tojson` shows it). kInvalidArgument with
  // the template's own message when it raises (raise_exception) or fails on these messages. Thread-safe.
  virtual Result<RenderedChat> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                      bool add_generation_prompt = false) const = 0;

  // Where the template was read from, for messages.
  const std::string& origin() const { return origin_; }

 protected:
  explicit ChatTemplate(std::string origin) : origin_(std::move(origin)) {}

 private:
  std::string origin_;
};

// Why chat rows cannot be read with the model directory `dir` (the build has no engine, or `dir`
// has no chat template) and what to do about it.
std::string chat_rows_unavailable(const std::string& dir);

}  // namespace tierzero::text
