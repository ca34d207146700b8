// A build without llama.cpp's Jinja engine (cmake/FindLlamaCppJinja.cmake found no sdist): chat
// templates cannot be compiled, and chat rows are refused with chat_rows_unavailable().
#include "text/internal/chat_template.h"

namespace tierzero::text {

bool ChatTemplate::engine_available() { return false; }

Result<std::shared_ptr<const ChatTemplate>> ChatTemplate::compile(const std::string& /*source*/,
                                                                  const nlohmann::json& /*special_tokens*/,
                                                                  const std::string& origin) {
  return unsupported("cannot compile the chat template " + origin + ": " + chat_rows_unavailable(""));
}

}  // namespace tierzero::text
