// Finding a DeepSpeed checkpoint's files the way zero_to_fp32.py does: DIR/latest names the tag,
// DIR/TAG/ holds `*_model_states.pt` and `*_optim_states.pt`, found by glob and natural-sorted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/common.h"

namespace tierzero::checkpoint {

// Human ("natural") order, as zero_to_fp32's natural_keys: runs of ASCII digits compare as
// numbers ("rank_2" < "rank_10"), everything else byte by byte.
bool natural_less(std::string_view a, std::string_view b);

// The tag in DIR/FILE (DeepSpeed's `latest`, or `latest_universal` beside a universal checkpoint),
// whitespace-trimmed. kNotFound when the file is missing, kCorrupt when it is empty, over 4 KiB, or
// names a path outside DIR ('/' or '..').
Result<std::string> read_latest_tag(const std::string& dir, const std::string& file = "latest");

// Paths of the regular files in `dir` whose names end with `suffix` (glob "*SUFFIX": names
// starting with '.' excluded), natural-sorted. kNotFound naming `dir` and the pattern when none.
Result<std::vector<std::string>> find_files_with_suffix(const std::string& dir, std::string_view suffix);

// The model's config.json text beside a DeepSpeed checkpoint: DIR/config.json (Hugging Face
// Trainer's layout), else TAG_DIR/config.json, else empty.
std::string read_model_config(const std::string& dir, const std::string& tag_dir);

}  // namespace tierzero::checkpoint
