#include "tools/flag_suggestions.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

#include "common/common.h"

namespace tierzero::tools {
namespace {

// A flag of another tool (the DeepSpeed launcher, the Hugging Face Trainer's TrainingArguments,
// torchrun) and the tierzero flags that do its job: the first of `ours` the command has, or every
// one it has when `every`; none for a flag whose job tierzero does without one.
struct ForeignFlag {
  std::vector<std::string_view> names;  // underscored, as the other tool spells them
  std::vector<std::string_view> ours;
  std::string_view what;  // "--NAME is ..." completes the sentence
  bool every = false;
};

const std::vector<ForeignFlag>& foreign_flags() {
  static const std::vector<ForeignFlag> kFlags = {
      {{"deepspeed", "deepspeed_config", "ds_config"}, {"config"}, "the DeepSpeed launcher's ds_config JSON"},
      {{"max_steps", "train_iters", "total_num_steps"}, {"steps"}, "the Hugging Face Trainer's optimizer step count"},
      {{"num_train_epochs"}, {"epochs", "steps"}, "the Hugging Face Trainer's epoch count"},
      {{"learning_rate"}, {"lr"}, "the Hugging Face Trainer's learning rate"},
      {{"per_device_train_batch_size", "train_micro_batch_size_per_gpu", "micro_batch_size", "batch_size"},
       {"micro-batch"},
       "the samples per micro-batch per GPU"},
      {{"gradient_accumulation_steps"}, {"grad-accum"}, "the Hugging Face Trainer's micro-batches per step"},
      {{"output_dir"},
       {"save", "export"},
       "the Hugging Face Trainer's output directory: --save DIR writes engine checkpoints, --export DIR the "
       "trained model as a Hugging Face directory",
       true},
      {{"model_name_or_path", "pretrained_model_name_or_path", "model_path", "model_dir", "tokenizer_name",
        "tokenizer_name_or_path", "tokenizer_path"},
       {"model"},
       "the Hugging Face model directory"},
      {{"config_name"}, {"model-config"}, "the Hugging Face config.json of a randomly initialised model"},
      {{"train_file", "dataset", "dataset_name", "data_path", "train_data", "data_file"},
       {"data"},
       "the training data"},
      {{"validation_file", "eval_file", "eval_dataset", "eval_data_path", "validation_data"},
       {"eval-data"},
       "the held-out evaluation data"},
      {{"eval_steps"}, {"eval-every"}, "the Hugging Face Trainer's steps between evaluations"},
      {{"save_steps"}, {"save-every"}, "the Hugging Face Trainer's steps between checkpoints"},
      {{"save_total_limit"}, {"keep-last"}, "the Hugging Face Trainer's count of checkpoints kept"},
      {{"resume_from_checkpoint", "load_checkpoint", "load_dir"}, {"resume"}, "the checkpoint to continue from"},
      {{"logging_dir", "report_to", "tensorboard_dir"}, {"tensorboard"}, "where the Hugging Face Trainer logs"},
      {{"max_seq_length", "max_length", "model_max_length", "block_size", "seq_length", "cutoff_len"},
       {"seq-len"},
       "the tokens of a training sample"},
      {{"num_gpus", "nproc_per_node", "world_size"}, {"gpus", "world-size"}, "the number of ranks"},
      {{"warmup_num_steps"}, {"warmup-steps"}, "the warm-up length"},
      {{"local_rank"},
       {},
       "the rank the DeepSpeed launcher passes; tierzero reads RANK, LOCAL_RANK and WORLD_SIZE from the "
       "environment instead: launch with torchrun --no-python --nproc_per_node N build/tools/tierzero ..."},
  };
  return kFlags;
}

// "max_steps" for "--max-steps", "--Max_Steps=3" or "-max_steps".
std::string underscored(std::string_view given) {
  given.remove_prefix(std::min(given.find_first_not_of('-'), given.size()));
  given = given.substr(0, given.find('='));
  std::string name(given);
  for (char& c : name) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// The command's long flag names ("steps", "micro-batch").
std::vector<std::string> long_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options())
    for (const std::string& name : option->get_lnames()) names.push_back(name);
  return names;
}

bool has(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string with_dashes(std::string_view name) { return "--" + std::string(name); }

// "--save or --export" of the names the command has.
std::string alternatives(const std::vector<std::string_view>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + with_dashes(names[i]);
  return text;
}

// "tierzero train" for the command `command` (its parents' names before its own).
std::string command_path(const CLI::App* command) {
  std::vector<std::string> names;
  for (; command != nullptr && command->get_parent() != nullptr; command = command->get_parent())
    names.push_back(command->get_name());
  std::string path = "tierzero";
  for (auto name = names.rbegin(); name != names.rend(); ++name) path += " " + *name;
  return path;
}

// The command `app` ran and every subcommand below it that was given, outermost first.
std::vector<const CLI::App*> parsed_chain(const CLI::App& app) {
  std::vector<const CLI::App*> chain = {&app};
  while (!chain.back()->get_subcommands().empty()) chain.push_back(chain.back()->get_subcommands().front());
  return chain;
}

bool looks_like_flag(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

}  // namespace

std::string suggest_flag(const CLI::App& command, std::string_view given) {
  const std::vector<std::string> names = long_names(command);
  const std::string wanted = underscored(given);
  std::string hyphenated = wanted;
  std::replace(hyphenated.begin(), hyphenated.end(), '_', '-');
  const std::string shown(given.substr(0, given.find('=')));
  if (has(names, hyphenated) && shown != with_dashes(hyphenated))
    return "did you mean " + with_dashes(hyphenated) + "? (tierzero's flags are lower case, words joined by hyphens)";
  for (const ForeignFlag& foreign : foreign_flags()) {
    if (std::find(foreign.names.begin(), foreign.names.end(), wanted) == foreign.names.end()) continue;
    std::vector<std::string_view> ours;
    for (std::string_view name : foreign.ours)
      if (has(names, name)) ours.push_back(name);
    if (foreign.ours.empty()) return "no flag takes it (" + shown + " is " + std::string(foreign.what) + ")";
    if (ours.empty()) break;
    if (!foreign.every) ours.resize(1);
    return "did you mean " + alternatives(ours) + "? (" + shown + " is " + std::string(foreign.what) + ")";
  }
  if (const std::optional<std::string> near = nearest_name(hyphenated, names)) return "did you mean --" + *near + "?";
  return {};
}

std::string unknown_flags_message(const CLI::App& app) {
  std::string message;
  for (const CLI::App* command : parsed_chain(app)) {
    const std::vector<std::string> left = command->remaining();
    for (size_t i = 0; i < left.size(); ++i) {
      if (!looks_like_flag(left[i])) continue;
      const std::string suggestion = suggest_flag(*command, left[i]);
      const std::string path = command_path(command);
      message +=
          path + ": unknown flag " + left[i].substr(0, left[i].find('=')) + ": " +
          (suggestion.empty() ? "no flag of this command is near (`" + path + " --help` lists them)" : suggestion) +
          "\n";
      if (left[i].find('=') == std::string::npos && i + 1 < left.size() && !looks_like_flag(left[i + 1])) ++i;
    }
  }
  return message;
}

}  // namespace tierzero::tools
