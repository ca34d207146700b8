// Post-processors, as tokenizers' processors/{template,byte_level,sequence}.rs treat one sequence.
#include "text/internal/post_processor.h"

namespace tierzero::text::internal {
namespace {

Status add(const nlohmann::json& spec, const std::string& path, PostProcessor& out) {
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& inner : spec.at("processors")) TZ_RETURN_IF_ERROR(add(inner, path, out));
    return {};
  }
  if (type == "ByteLevel") return {};  // trims offsets only
  if (type != "TemplateProcessing") {
    return unsupported(path + ": post_processor type \"" + type +
                       "\" is not supported (supported: TemplateProcessing, ByteLevel, Sequence)");
  }
  // This template wraps what the processors before it produced.
  std::vector<uint32_t> before, after;
  bool seen_sequence = false;
  for (const auto& piece : spec.at("single")) {
    if (piece.contains("Sequence")) {
      const auto id = piece.at("Sequence").at("id").get<std::string>();
      if (id != "A" || seen_sequence) {
        return unsupported(path + ": post_processor TemplateProcessing single template uses sequence \"" + id +
                           "\" (only one $A is supported)");
      }
      seen_sequence = true;
      continue;
    }
    const auto name = piece.at("SpecialToken").at("id").get<std::string>();
    const auto& specials = spec.at("special_tokens");
    if (!specials.contains(name)) {
      return corrupt(path + ": post_processor template names special token \"" + name +
                     "\" that its special_tokens do not define");
    }
    auto& target = seen_sequence ? after : before;
    for (const auto& id : specials.at(name).at("ids")) target.push_back(id.get<uint32_t>());
  }
  before.insert(before.end(), out.prefix.begin(), out.prefix.end());
  out.prefix = std::move(before);
  out.suffix.insert(out.suffix.end(), after.begin(), after.end());
  return {};
}

}  // namespace

Result<PostProcessor> PostProcessor::parse(const nlohmann::json& spec, const std::string& path) {
  PostProcessor processor;
  if (!spec.is_null()) TZ_RETURN_IF_ERROR(add(spec, path, processor));
  return processor;
}

}  // namespace tierzero::text::internal
