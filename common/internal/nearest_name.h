// The known name a misspelt one most likely meant, for "did you mean ...?" errors (ds_config keys,
// command-line flags).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tierzero {

// The Levenshtein distance (insertions, deletions, substitutions) between `a` and `b`, ignoring
// case.
size_t edit_distance(std::string_view a, std::string_view b);

// The name in `known` nearest to `given` by edit_distance(), when it is close enough to be a
// misspelling: at most a third of the longer name's length (at least 2, at most 4 edits). Ties go
// to the first in `known`; nothing when no name is that close.
std::optional<std::string> nearest_name(std::string_view given, const std::vector<std::string>& known);

}  // namespace tierzero
