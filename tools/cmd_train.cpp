// `tierzero train`: ZeRO training (stages 0-3, optional CPU optimizer) of a Llama-family model.
// With no arguments: the built-in tiny Llama on the bundled tiny corpus with configs/tiny.json,
// on CUDA when available, else the CPU. Under torchrun, every rank runs it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/common.h"
#include "engine/train/trainer.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

constexpr int64_t kMaxSteps = 1'000'000'000;

// The flags that stand for the Hugging Face Trainer's arguments: each fills the ds_config key the
// HF Trainer fills from it where that key is "auto" (configs/README.md, "auto"). Read into
// TrainArgs::trainer_flags when given.
struct HfTrainerFlags {
  int64_t micro_batch = 0, grad_accum = 0, warmup_steps = 0, seq_len = 0;
  double lr = 0, max_grad_norm = 0, adam_beta1 = 0, adam_beta2 = 0, adam_epsilon = 0, weight_decay = 0;
  std::vector<std::pair<CLI::Option*, std::function<void(engine::TrainerFlags&)>>> given;
};

template <typename T, typename Field>
void add_trainer_flag(CLI::App* train, HfTrainerFlags* flags, const char* name, T* value, Field field,
                      const std::string& help, const CLI::Validator& check) {
  CLI::Option* option = train->add_option(name, *value, help)->check(check);
  flags->given.emplace_back(option, [value, field](engine::TrainerFlags& out) { out.*field = *value; });
}

void add_trainer_flags(CLI::App* train, HfTrainerFlags* f) {
  using engine::TrainerFlags;
  const std::string fills = "; fills the ds_config's \"auto\" ";
  add_trainer_flag(train, f, "--micro-batch", &f->micro_batch, &TrainerFlags::micro_batch_size,
                   "samples per micro-batch per GPU (HF per_device_train_batch_size)" + fills +
                       "train_micro_batch_size_per_gpu",
                   whole_number_in(1, 1'000'000));
  add_trainer_flag(train, f, "--grad-accum", &f->grad_accum, &TrainerFlags::gradient_accumulation_steps,
                   "micro-batches per optimizer step (HF gradient_accumulation_steps)" + fills +
                       "gradient_accumulation_steps",
                   whole_number_in(1, 1'000'000));
  add_trainer_flag(train, f, "--lr", &f->lr, &TrainerFlags::lr,
                   "learning rate (HF learning_rate)" + fills +
                       "optimizer.params.lr and scheduler.params.warmup_max_lr; without an optimizer section, the HF "
                       "Trainer's AdamW and linear schedule (configs/README.md)",
                   number_in(0.0, 1e6));
  add_trainer_flag(train, f, "--warmup-steps", &f->warmup_steps, &TrainerFlags::warmup_steps,
                   "lr warm-up steps (HF warmup_steps; 0 is 1 in a DeepSpeed scheduler, as the HF Trainer fills it)" +
                       fills + "scheduler.params.warmup_num_steps",
                   whole_number_in(0, kMaxSteps));
  add_trainer_flag(train, f, "--max-grad-norm", &f->max_grad_norm, &TrainerFlags::max_grad_norm,
                   "gradient clipping norm, 0 = none (HF max_grad_norm)" + fills + "gradient_clipping",
                   number_in(0.0, 1e6));
  add_trainer_flag(train, f, "--adam-beta1", &f->adam_beta1, &TrainerFlags::adam_beta1,
                   "Adam beta1 (HF adam_beta1)" + fills + "optimizer.params.betas, with --adam-beta2",
                   number_in(0.0, 1.0, true));
  add_trainer_flag(train, f, "--adam-beta2", &f->adam_beta2, &TrainerFlags::adam_beta2,
                   "Adam beta2 (HF adam_beta2)" + fills + "optimizer.params.betas, with --adam-beta1",
                   number_in(0.0, 1.0, true));
  add_trainer_flag(train, f, "--adam-epsilon", &f->adam_epsilon, &TrainerFlags::adam_epsilon,
                   "Adam epsilon (HF adam_epsilon)" + fills + "optimizer.params.eps", number_in(1e-300, 1.0));
  add_trainer_flag(train, f, "--weight-decay", &f->weight_decay, &TrainerFlags::weight_decay,
                   "weight decay (HF weight_decay)" + fills + "optimizer.params.weight_decay", number_in(0.0, 1e6));
  add_trainer_flag(train, f, "--seq-len", &f->seq_len, &TrainerFlags::seq_len,
                   "tokens a sample predicts; overrides tierzero.data.seq_len (and fills its \"auto\"); at most the "
                   "model's max_position_embeddings",
                   whole_number_in(1, int64_t{1} << 24));
}

// TrainArgs::trainer_flags from the flags given.
void read_trainer_flags(const HfTrainerFlags& f, engine::TrainerFlags& out) {
  for (const auto& [option, set] : f.given)
    if (option->count() > 0) set(out);
}

// Accepts a finite number above `min` and at most `max` (max_open: below it).
CLI::Validator number_above(double min, double max, bool max_open) {
  return CLI::Validator(
      [min, max, max_open](std::string& text) -> std::string {
        char* stop = nullptr;
        const double value = std::strtod(text.c_str(), &stop);
        const bool whole_text = !text.empty() && stop == text.c_str() + text.size();
        if (whole_text && std::isfinite(value) && value > min && (max_open ? value < max : value <= max)) return {};
        return fmt::format("must be a number above {} and {} {}, got {}", min, max_open ? "below" : "at most", max,
                           text);
      },
      fmt::format("({}, {}{}", min, max, max_open ? ")" : "]"));
}

// --epochs and the held-out evaluation (engine/train/internal/epochs.h, evaluation.h).
void add_loop_flags(CLI::App* train, engine::TrainArgs* args) {
  train
      ->add_option("--epochs", args->epochs,
                   "passes over the training data (HF num_train_epochs; may be fractional): the steps are "
                   "ceil(epochs x micro-batches per rank and epoch / grad-accum), a step's micro-batches running on "
                   "into the next epoch where grad-accum does not divide an epoch; with --steps, both must agree")
      ->check(number_above(0.0, 1e6, false));
  train->add_option("--eval-data", args->eval_data_path,
                    "held-out data to evaluate (the formats and loss masks of --data): the mean loss over its target "
                    "tokens and the perplexity, after every --eval-every steps and at the end");
  train
      ->add_option("--eval-fraction", args->eval_fraction,
                   "hold out this share of --data's samples for evaluation instead (ceil(F x samples), chosen by "
                   "tierzero.data.seed, removed from training)")
      ->check(number_above(0.0, 1.0, true));
  train
      ->add_option("--eval-every", args->eval_every,
                   "evaluate every N steps as well as at the end (default: at the end only); needs --eval-data or "
                   "--eval-fraction")
      ->check(whole_number_in(1, kMaxSteps));
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<engine::TrainArgs>();
  CLI::App* train = app.add_subcommand(
      "train", "Train with ZeRO (no arguments: a tiny built-in Llama on a bundled corpus, about a minute on a CPU)");
  train->add_option("--config", args->config_path, "DeepSpeed ds_config JSON (default configs/tiny.json)");
  auto* model =
      train->add_option("--model", args->model_dir, "Hugging Face model directory (config.json + safetensors)");
  train->add_option("--model-config", args->model_config_path, "Hugging Face config.json: a randomly initialised model")
      ->excludes(model);
  train->add_option("--data", args->data_path,
                    "token file (TZTOKENS, .u16, .u32; `tierzero data prepare` writes one), JSONL of input_ids, or "
                    "JSONL text: {\"text\"}, {\"prompt\", \"completion\"} (strings or messages) or chat "
                    "{\"messages\"} rows, tokenized with the --model directory's tokenizer and chat template "
                    "(default: tierzero.data.path)");
  train
      ->add_option("--steps", args->steps,
                   "optimizer steps (default: the scheduler's total_num_steps, else 100); fills the ds_config's "
                   "\"auto\" (or absent) scheduler.params.total_num_steps, so the schedule ends with the run")
      ->check(whole_number_in(1, kMaxSteps));
  add_loop_flags(train, args.get());
  CLI::Option* save = train->add_option("--save", args->save_dir, "write an engine checkpoint here at the end");
  train->add_option("--export", args->export_dir,
                    "write the trained model here at the end: a Hugging Face directory of 16-bit safetensors "
                    "(the training's bf16/fp16; fp32 when training in fp32) + config.json, generation_config.json and "
                    "the --model directory's tokenizer files");
  train->add_option("--resume", args->resume_dir,
                    "continue from the latest checkpoint here: tierzero's, or a DeepSpeed ZeRO-1/2/3 one (same stage)");
  train
      ->add_option("--save-every", args->save_every,
                   "also save a checkpoint into --save every N steps (default: tierzero.checkpoint.save_every)")
      ->check(whole_number_in(1, kMaxSteps))
      ->needs(save);
  train
      ->add_option("--keep-last", args->keep_last,
                   "keep only the newest K checkpoints in --save, older ones removed once the new one is durable "
                   "(default: tierzero.checkpoint.keep_last; 0 = keep all)")
      ->check(whole_number_in(0, kMaxSteps))
      ->needs(save);
  train
      ->add_option_function<std::string>(
          "--on-save-error",
          [args](const std::string& policy) {
            args->on_save_error =
                policy == "stop" ? engine::SaveErrorPolicy::kStop : engine::SaveErrorPolicy::kContinue;
          },
          "a periodic save that fails (disk full, I/O error): `continue` (default) keeps training and the last "
          "good checkpoint, removes the failed save's partial files and tries again at the next save; "
          "`stop` ends the run. A failed final save always exits non-zero")
      ->check(CLI::IsMember({"continue", "stop"}))
      ->needs(save);
  train->add_option("--metrics", args->metrics_path,
                    "write one JSON line per step here (loss, lr, tokens/s, memory per tier, time breakdown; "
                    "format report/METRICS.md, drawn by `tierzero report`)");
  train->add_option("--tensorboard", args->tensorboard_dir,
                    "write the same per-step metrics as a TensorBoard event file in this directory (created when "
                    "missing; `tensorboard --logdir DIR`)");
  train
      ->add_option("--seed", args->init_seed,
                   "seed of the random initialisation (without --model), of LoRA's initial adapters and of its "
                   "dropout draws")
      ->check(whole_number_in(0, 4'294'967'295));
  train->add_flag("--full-determinism", args->full_determinism,
                  "the same bits run to run on a GPU (HF full_determinism): LibTorch's deterministic algorithms "
                  "(flash attention's backward without atomics), cuDNN deterministic, CUBLAS_WORKSPACE_CONFIG=:4096:8; "
                  "what a resumed run needs to match an unbroken one bit for bit (the CPU is deterministic anyway)");
  train->add_option("--profile", args->profile_path,
                    "write a Chrome trace of one step here (chrome://tracing, ui.perfetto.dev): LibTorch's profiler "
                    "(Kineto), the training thread's ATen ops and, on a GPU, every kernel and copy on every stream");
  train
      ->add_option("--profile-step", args->profile_step,
                   "the step --profile traces, as the step lines number it (default: the second step the run takes)")
      ->check(whole_number_in(1, kMaxSteps));
  auto hf = std::make_shared<HfTrainerFlags>();
  add_trainer_flags(train, hf.get());
  CLI::Option* bf16 = train->add_flag("--bf16", args->trainer_flags.bf16,
                                      "train in bf16 (HF bf16); fills the ds_config's \"auto\" bf16.enabled / fp16.enabled");
  train->add_flag("--fp16", args->trainer_flags.fp16,
                  "train in fp16 (HF fp16); fills the ds_config's \"auto\" fp16.enabled / bf16.enabled")
      ->excludes(bf16);
  train->callback([args, hf] {
    read_trainer_flags(*hf, args->trainer_flags);
    value_or_throw(engine::train(*args, stdout));
  });
}

}  // namespace tierzero::tools
