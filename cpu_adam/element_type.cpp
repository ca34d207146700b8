#include <string>

#include "cpu_adam/adam.h"

namespace tierzero::cpu_adam {

const char* element_type_name(ElementType type) {
  switch (type) {
    case ElementType::kF32: return "fp32";
    case ElementType::kBF16: return "bf16";
    case ElementType::kF16: return "fp16";
  }
  return "unknown";
}

size_t element_size(ElementType type) { return type == ElementType::kF32 ? 4 : 2; }

Result<ElementType> parse_element_type(std::string_view text) {
  if (text == "fp32" || text == "f32" || text == "float32") return ElementType::kF32;
  if (text == "bf16" || text == "bfloat16") return ElementType::kBF16;
  if (text == "fp16" || text == "f16" || text == "float16") return ElementType::kF16;
  return invalid_argument("unknown element type '" + std::string(text) + "': use fp32, bf16 or fp16");
}

}  // namespace tierzero::cpu_adam
