// Chat templates compiled and rendered by llama.cpp's Jinja engine (text/internal/chat_template.h):
// {% generation %} blocks turned into markers whose places in the output are the generation spans,
// and `+` checked as jinja2 checks it.
#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"
#include "json.h"
#include "text/internal/chat_template.h"

namespace tierzero::text {
namespace {

using namespace std::string_view_literals;

// What {% generation %} and {% endgeneration %} become: string literals the template writes where
// the blocks open and close, found and removed after rendering. The NULs keep them out of real text
// (a row holding them is refused).
constexpr std::string_view kGenerationBegin = "\0tierzero:generation\0"sv;
constexpr std::string_view kGenerationEnd = "\0tierzero:endgeneration\0"sv;
constexpr std::string_view kMarkerInJson = "\\u0000tierzero:";

// Replaces the tokens of each {% generation %} / {% endgeneration %} with those of {{ "marker" }}.
// The lexer has already applied the tags' whitespace control, so the output around them is as
// jinja2 writes it. Returns whether there was any.
bool mark_generation_blocks(jinja::lexer_result& lexed) {
  std::vector<jinja::token>& tokens = lexed.tokens;
  bool any = false;
  for (size_t i = 0; i + 2 < tokens.size(); ++i) {
    if (tokens[i].t != jinja::token::open_statement || tokens[i + 1].t != jinja::token::identifier ||
        tokens[i + 2].t != jinja::token::close_statement)
      continue;
    const std::string& name = tokens[i + 1].value;
    if (name != "generation" && name != "endgeneration") continue;
    tokens[i].t = jinja::token::open_expression;
    tokens[i + 1].t = jinja::token::string_literal;
    tokens[i + 1].value = std::string(name == "generation" ? kGenerationBegin : kGenerationEnd);
    tokens[i + 2].t = jinja::token::close_expression;
    any = true;
  }
  return any;
}

// The left operands of the `+` being evaluated on this thread, innermost last.
std::vector<jinja::value>& pending_left_operands() {
  thread_local std::vector<jinja::value> stack;
  return stack;
}

// The left operand of a `+`: evaluated as before, then kept for the check of the right one.
struct PlusLeftOperand final : jinja::expression {
  explicit PlusLeftOperand(jinja::statement_ptr operand) : inner(std::move(operand)) { pos = inner->pos; }
  jinja::value execute_impl(jinja::context& ctx) const override {
    jinja::value v = inner->execute(ctx);
    pending_left_operands().push_back(v);
    return v;
  }
  jinja::statement_ptr inner;
};

// Python's name of a value's type, for an error that reads like jinja2's.
std::string python_type(const jinja::value& v) {
  if (jinja::is_val<jinja::value_string>(v)) return "str";
  if (jinja::is_val<jinja::value_tuple>(v)) return "tuple";
  if (jinja::is_val<jinja::value_array>(v)) return "list";
  if (jinja::is_val<jinja::value_object>(v)) return "dict";
  if (jinja::is_val<jinja::value_none>(v)) return "NoneType";
  if (jinja::is_val<jinja::value_bool>(v)) return "bool";
  if (jinja::is_val<jinja::value_int>(v)) return "int";
  if (jinja::is_val<jinja::value_float>(v)) return "float";
  return v->type();
}

bool is_number(const jinja::value& v) {
  return jinja::is_val<jinja::value_int>(v) || jinja::is_val<jinja::value_float>(v) ||
         jinja::is_val<jinja::value_bool>(v);
}

// Why Python's `left + right` raises, as jinja2 reports it; empty when it does not.
std::string python_addition_error(const jinja::value& left, const jinja::value& right) {
  const std::string l = python_type(left), r = python_type(right);
  if ((l == "str" && r == "str") || (is_number(left) && is_number(right)) ||
      (jinja::is_val<jinja::value_array>(left) && jinja::is_val<jinja::value_array>(right)))
    return "";
  for (const jinja::value& v : {left, right}) {
    if (v->is_undefined()) {
      return "`+` of an undefined value (" + v->type() +
             "): transformers' jinja2 raises UndefinedError here (a message key the template needs, such as "
             "\"content\", is missing)";
    }
  }
  const std::string python = l == "str" ? "can only concatenate str (not \"" + r + "\") to str"
                                        : "unsupported operand type(s) for +: '" + l + "' and '" + r + "'";
  const std::string hint =
      l == "list" || r == "list" ? "; this template takes \"content\" as a string, not a list of content parts" : "";
  return "`+` of " + l + " and " + r + ": transformers' jinja2 raises TypeError here (" + python + ")" + hint;
}

// The right operand of a `+`: evaluated, then the pair refused where Python's + raises (the
// engine would join a string with anything, as its text or as "").
struct PlusRightOperand final : jinja::expression {
  explicit PlusRightOperand(jinja::statement_ptr operand) : inner(std::move(operand)) { pos = inner->pos; }
  jinja::value execute_impl(jinja::context& ctx) const override {
    std::vector<jinja::value>& lefts = pending_left_operands();
    if (lefts.empty()) throw std::logic_error("`+` right operand without its left one");
    const jinja::value left = std::move(lefts.back());
    lefts.pop_back();
    jinja::value right = inner->execute(ctx);
    const std::string error = python_addition_error(left, right);
    if (!error.empty()) throw std::runtime_error(error);
    return right;
  }
  jinja::statement_ptr inner;
};

// Wraps the operands of every `+` of `program` (in the nodes the engine's visit() reaches) in the
// checks above.
void install_addition_checks(jinja::program& program) {
  jinja::context ctx;
  ctx.visitor = [&ctx](bool /*is_leaf*/, const jinja::statement* node, std::vector<jinja::visitor_pair> children) {
    if (const auto* sum = dynamic_cast<const jinja::binary_expression*>(node); sum != nullptr && sum->op.value == "+") {
      // The program's nodes are not const (the parser made them); visit() hands them out as const.
      auto* mutable_sum = const_cast<jinja::binary_expression*>(sum);
      mutable_sum->left = std::make_unique<PlusLeftOperand>(std::move(mutable_sum->left));
      mutable_sum->right = std::make_unique<PlusRightOperand>(std::move(mutable_sum->right));
    }
    for (const auto& [label, nodes] : children) {
      for (const jinja::statement* child : nodes) {
        if (child != nullptr) child->visit(ctx);
      }
    }
  };
  for (const jinja::statement_ptr& statement : program.body) statement->visit(ctx);
}

// transformers 5's _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r} for
// the first non-null r of reasoning_content, thinking, reasoning.
nlohmann::ordered_json alias_reasoning(const nlohmann::ordered_json& messages) {
  if (!messages.is_array()) return messages;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const nlohmann::ordered_json& message : messages) {
    const nlohmann::ordered_json* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      if (reasoning == nullptr && message.is_object() && message.contains(key) && !message.at(key).is_null())
        reasoning = &message.at(key);
    }
    if (reasoning == nullptr) {
      out.push_back(message);
      continue;
    }
    nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
    aliased["thinking"] = *reasoning;
    for (const auto& [key, value] : message.items()) aliased[key] = value;
    aliased["reasoning_content"] = *reasoning;
    out.push_back(std::move(aliased));
  }
  return out;
}

// Removes the generation markers from `output`, recording where each block's text lies.
Result<RenderedChat> split_generation_markers(const std::string& output, const std::string& origin) {
  RenderedChat rendered;
  std::optional<size_t> open;
  for (size_t at = 0; at < output.size();) {
    const size_t begin = output.find(kGenerationBegin, at), end = output.find(kGenerationEnd, at);
    const size_t next = std::min(begin, end);
    rendered.text.append(output, at, next == std::string::npos ? std::string::npos : next - at);
    if (next == std::string::npos) break;
    if (next == begin) {
      if (open) return invalid_argument("the chat template " + origin + " opens a {% generation %} block inside one");
      open = rendered.text.size();
      at = begin + kGenerationBegin.size();
    } else {
      if (!open)
        return invalid_argument("the chat template " + origin + " closes a {% generation %} block it did not open");
      rendered.generation_spans.emplace_back(*open, rendered.text.size());
      open.reset();
      at = end + kGenerationEnd.size();
    }
  }
  if (open) return invalid_argument("the chat template " + origin + " leaves a {% generation %} block open");
  return rendered;
}

class JinjaChatTemplate final : public ChatTemplate {
 public:
  JinjaChatTemplate(std::string source, jinja::program program, nlohmann::json special_tokens, std::string origin,
                    bool has_generation_blocks)
      : ChatTemplate(std::move(origin), has_generation_blocks),
        source_(std::move(source)),
        program_(std::move(program)),
        special_tokens_(std::move(special_tokens)) {}

  Result<RenderedChat> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                              bool add_generation_prompt) const override {
    nlohmann::ordered_json variables = special_tokens_;
    variables["messages"] = alias_reasoning(messages);
    if (!tools.is_null()) variables["tools"] = tools;
    variables["add_generation_prompt"] = add_generation_prompt;
    const std::string json = variables.dump();
    if (has_generation_blocks() && json.find(kMarkerInJson) != std::string::npos)
      return invalid_argument("the messages hold \"\\u0000tierzero:\", which marks {% generation %} blocks");
    std::string output;
    try {
      jinja::context context(source_);
      jinja::global_from_json(context, common_json::parse(json), /*mark_input=*/false);
      pending_left_operands().clear();
      jinja::runtime runtime(context);
      const jinja::value_string parts = jinja::runtime::gather_string_parts(runtime.execute(program_));
      for (const jinja::string_part& part : parts->val_str.parts) output += part.val;
    } catch (const std::exception& e) {
      return invalid_argument("the chat template " + origin() + " fails on these messages: " + e.what());
    }
    return split_generation_markers(output, origin());
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
    jinja::lexer_result lexed = lexer.tokenize(source);
    const bool has_generation_blocks = mark_generation_blocks(lexed);
    jinja::program program = jinja::parse_from_tokens(lexed);
    install_addition_checks(program);
    return std::shared_ptr<const ChatTemplate>(
        std::make_shared<JinjaChatTemplate>(source, std::move(program), special_tokens, origin, has_generation_blocks));
  } catch (const std::exception& e) {
    return invalid_argument("the chat template " + origin + " is not valid Jinja: " + e.what());
  }
}

}  // namespace tierzero::text
