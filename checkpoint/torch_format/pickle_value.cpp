#include "checkpoint/torch_format/internal/pickle_value.h"

namespace tierzero::checkpoint {

bool PyValue::is_global(std::string_view module, std::string_view qualname) const {
  const PyValue* g = kind == PyKind::kObject ? callable : this;  // one level: no recursion on hostile chains
  return g != nullptr && g->kind == PyKind::kGlobal && g->text == module && g->name == qualname;
}

const PyValue* PyValue::get(std::string_view key) const {
  if (kind != PyKind::kDict) return nullptr;
  for (const auto& [k, v] : entries) {
    if (k->kind == PyKind::kString && k->text == key) return v;
  }
  return nullptr;
}

const PyValue* PyValue::attribute(std::string_view name) const {
  if (state == nullptr || (kind != PyKind::kDict && kind != PyKind::kObject)) return nullptr;
  if (const PyValue* v = state->get(name)) return v;
  if (state->kind == PyKind::kTuple && state->items.size() == 2) {  // (dict, slots)
    for (const PyValue* part : state->items) {
      if (const PyValue* v = part->get(name)) return v;
    }
  }
  return nullptr;
}

std::string PyValue::describe() const {
  constexpr size_t kMaxText = 40;
  auto clip = [](const std::string& s) { return s.size() <= kMaxText ? s : s.substr(0, kMaxText) + "..."; };
  switch (kind) {
    case PyKind::kNone: return "None";
    case PyKind::kBool: return boolean ? "True" : "False";
    case PyKind::kInt: return "int " + std::to_string(integer);
    case PyKind::kFloat: return "float " + std::to_string(real);
    case PyKind::kString: return "str '" + clip(text) + "'";
    case PyKind::kBytes: return "bytes of " + std::to_string(text.size());
    case PyKind::kTuple: return "tuple of " + std::to_string(items.size());
    case PyKind::kList: return "list of " + std::to_string(items.size());
    case PyKind::kSet: return "set of " + std::to_string(items.size());
    case PyKind::kDict: return "dict of " + std::to_string(entries.size());
    case PyKind::kGlobal: return "global " + text + "." + name;
    case PyKind::kObject:
      return "object " +
             (callable && callable->kind == PyKind::kGlobal ? callable->text + "." + callable->name
                                                            : std::string("?")) +
             "(...)";
    case PyKind::kPersistentId: return "persistent id";
  }
  return "?";
}

PyValue* PickleDocument::make(PyKind kind, uint64_t offset) {
  arena_.push_back(std::make_unique<PyValue>());
  PyValue* v = arena_.back().get();
  v->kind = kind;
  v->offset = offset;
  return v;
}

}  // namespace tierzero::checkpoint
