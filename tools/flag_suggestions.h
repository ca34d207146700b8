// What to type instead of a flag a command does not have: the command's flag spelt with hyphens
// for one spelt with underscores, tierzero's flag for the DeepSpeed launcher / Hugging Face Trainer
// flag a user carries over (--deepspeed -> --config, --max_steps -> --steps, --learning_rate -> --lr
// ...), else the command's nearest flag (nearest_name). main() applies it to every subcommand when
// CLI11 refuses a command line, so a new subcommand gets it without a line of its own.
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace tierzero::tools {

// The suggestion for `given` ("--max_steps", "--max_steps=10") among `command`'s flags, e.g.
// "did you mean --steps? (--max_steps is the Hugging Face Trainer's optimizer step count)"; empty
// when no flag of `command` is near.
std::string suggest_flag(const CLI::App& command, std::string_view given);

// After `app`.parse() threw: one line per flag a parsed (sub)command was given but does not have,
// "tierzero train: unknown flag --deepspeed: did you mean --config? (...)", or "... (`tierzero
// train --help` lists its flags)" when none is near; the value after such a flag is taken as its
// value and not reported again. Empty when every flag was known (the error is another one, which
// CLI11's own message says).
std::string unknown_flags_message(const CLI::App& app);

}  // namespace tierzero::tools
