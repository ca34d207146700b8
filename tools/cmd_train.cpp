// `tierzero train`: ZeRO training (stages 0-3, optional CPU optimizer) of a Llama-family model.
// With no arguments: the built-in tiny Llama on the bundled tiny corpus with configs/tiny.json,
// on CUDA when available, else the CPU. Under torchrun, every rank runs it.
#include <cstdio>

#include "common/common.h"
#include "engine/train/trainer.h"
#include "tools/commands.h"

namespace tierzero::tools {

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
                    "JSONL text: {\"text\"} or {\"prompt\", \"completion\"} rows, tokenized with the --model "
                    "directory's tokenizer (default: tierzero.data.path)");
  train->add_option("--steps", args->steps, "optimizer steps (default: the scheduler's total_num_steps, else 100)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--save", args->save_dir, "write an engine checkpoint here at the end");
  train->add_option("--export", args->export_dir,
                    "write the trained model here at the end: a Hugging Face directory of 16-bit safetensors "
                    "(the training's bf16/fp16; fp32 when training in fp32) + config.json");
  train->add_option("--resume", args->resume_dir,
                    "continue from the latest checkpoint here: tierzero's, or a DeepSpeed ZeRO-1/2/3 one (same stage)");
  train
      ->add_option("--save-every", args->save_every,
                   "also save a checkpoint into --save every N steps (default: tierzero.checkpoint.save_every)")
      ->check(CLI::PositiveNumber);
  train
      ->add_option("--keep-last", args->keep_last,
                   "keep only the newest K checkpoints in --save, older ones removed once the new one is durable "
                   "(default: tierzero.checkpoint.keep_last; 0 = all)")
      ->check(CLI::PositiveNumber);
  train->add_option("--metrics", args->metrics_path,
                    "write one JSON line per step here (loss, lr, tokens/s, memory per tier, time breakdown; "
                    "format report/METRICS.md, drawn by `tierzero report`)");
  train->add_option("--tensorboard", args->tensorboard_dir,
                    "write the same per-step metrics as a TensorBoard event file in this directory (created when "
                    "missing; `tensorboard --logdir DIR`)");
  train->add_option("--seed", args->init_seed, "random initialisation seed (without --model)");
  train->callback([args] { value_or_throw(engine::train(*args, stdout)); });
}

}  // namespace tierzero::tools
