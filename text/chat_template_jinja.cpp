// Chat templates compiled and rendered by llama.cpp's Jinja engine (text/internal/chat_template.h),
// assistant content marked as input so that its place in the output is known.
#include <exception>

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"
#include "json.h"
#include "text/internal/chat_template.h"

namespace tierzero::text {
namespace {

// The value of `key` in a Jinja object, or nullptr.
jinja::value member(const jinja::value& object, const std::string& key) {
  if (!jinja::is_val<jinja::value_object>(object)) return nullptr;
  for (const auto& [k, v] : object->val_obj) {
    if (jinja::is_val<jinja::value_string>(k) && k->val_str.str() == key) return v;
  }
  return nullptr;
}

void mark_if_string(const jinja::value& v) {
  if (jinja::is_val<jinja::value_string>(v)) v->val_str.mark_input();
}

// Marks the content of every assistant message (a string, or the "text" of its parts) and its
// reasoning_content.
void mark_assistant_content(const jinja::value& messages) {
  if (!jinja::is_val<jinja::value_array>(messages)) return;
  for (const jinja::value& message : messages->val_arr) {
    const jinja::value role = member(message, "role");
    if (!role || !jinja::is_val<jinja::value_string>(role) || role->val_str.str() != "assistant") continue;
    const jinja::value content = member(message, "content");
    mark_if_string(content);
    mark_if_string(member(message, "reasoning_content"));
    if (jinja::is_val<jinja::value_array>(content)) {
      for (const jinja::value& part : content->val_arr) mark_if_string(member(part, "text"));
    }
  }
}

class JinjaChatTemplate final : public ChatTemplate {
 public:
  JinjaChatTemplate(std::string source, jinja::program program, nlohmann::json special_tokens, std::string origin)
      : ChatTemplate(std::move(origin)),
        source_(std::move(source)),
        program_(std::move(program)),
        special_tokens_(std::move(special_tokens)) {}

  Result<RenderedChat> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                              bool add_generation_prompt) const override {
    nlohmann::ordered_json variables = special_tokens_;
    variables["messages"] = messages;
    if (!tools.is_null()) variables["tools"] = tools;
    variables["add_generation_prompt"] = add_generation_prompt;
    try {
      jinja::context context(source_);
      jinja::global_from_json(context, common_json::parse(variables.dump()), /*mark_input=*/false);
      mark_assistant_content(context.get_val("messages"));
      jinja::runtime runtime(context);
      const jinja::value_string output = jinja::runtime::gather_string_parts(runtime.execute(program_));
      RenderedChat rendered;
      for (const jinja::string_part& part : output->val_str.parts) {
        if (part.is_input && !part.val.empty())
          rendered.assistant_spans.emplace_back(rendered.text.size(), rendered.text.size() + part.val.size());
        rendered.text += part.val;
      }
      return rendered;
    } catch (const std::exception& e) {
      return invalid_argument("the chat template " + origin() + " fails on these messages: " + e.what());
    }
  }

 private:
  std::string source_;
  jinja::program program_;
  nlohmann::json special_tokens_;
};

}  // namespace

bool ChatTemplate::engine_available() { return true; }

Result<std::shared_ptr<const ChatTemplate>> ChatTemplate::compile(const std::string& source,
                                                                  const nlohmann::json& special_tokens,
                                                                  const std::string& origin) {
  try {
    jinja::lexer lexer;
    jinja::program program = jinja::parse_from_tokens(lexer.tokenize(source));
    return std::shared_ptr<const ChatTemplate>(
        std::make_shared<JinjaChatTemplate>(source, std::move(program), special_tokens, origin));
  } catch (const std::exception& e) {
    return invalid_argument("the chat template " + origin + " is not valid Jinja: " + e.what());
  }
}

}  // namespace tierzero::text
