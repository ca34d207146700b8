#include "fuzz/value_walk.h"

namespace tierzero::fuzz {
namespace {

constexpr int kMaxValues = 4096;
constexpr int kMaxDepth = 32;

void walk(const checkpoint::PyValue* v, int depth, int& budget,
          const std::function<void(const checkpoint::PyValue&)>& visit) {
  if (v == nullptr || depth > kMaxDepth || budget <= 0) return;
  --budget;
  visit(*v);
  for (const checkpoint::PyValue* item : v->items) walk(item, depth + 1, budget, visit);
  for (const auto& [key, value] : v->entries) {
    walk(key, depth + 1, budget, visit);
    walk(value, depth + 1, budget, visit);
  }
  walk(v->callable, depth + 1, budget, visit);
  walk(v->args, depth + 1, budget, visit);
  walk(v->state, depth + 1, budget, visit);
}

}  // namespace

void walk_values(const checkpoint::PyValue& root, const std::function<void(const checkpoint::PyValue&)>& visit) {
  int budget = kMaxValues;
  walk(&root, 0, budget, visit);
}

}  // namespace tierzero::fuzz
