// The tierzero CLI's subcommands. Each add_* function adds one subcommand (with its options and
// callback) under `parent`; the callback throws tierzero::Error on failure, which main() prints.
#pragma once

#include <CLI/CLI.hpp>

namespace tierzero::tools {

// A command's exit code when it ran but its result failed a check (e.g. a benchmark's data
// verification); main() exits with it.
struct ExitCode {
  int code;
};

// `tierzero bench io`: the nvme/ engine's sequential GB/s, latency and CPU; --sweep, --tune, --vs-fio.
void add_bench_io_command(CLI::App& bench);
// `tierzero bench save`: a periodic save's copy into its write-behind buffers, GB/s by threads.
void add_bench_save_command(CLI::App& bench);
// `tierzero bench adam`: cpu_adam Gparam/s and GB/s vs STREAM bandwidth and PyTorch fused AdamW.
void add_bench_adam_command(CLI::App& bench);
// `tierzero convert SRC OUT`: a tierzero or DeepSpeed checkpoint to Hugging Face safetensors.
void add_convert_command(CLI::App& app);
// `tierzero checkpoint verify|inspect DIR`: check or describe a tierzero checkpoint.
void add_checkpoint_command(CLI::App& app);
// `tierzero bench pcie`: training's host <-> GPU copies (DeviceCopies) vs cudaMemcpy (skips without a GPU); in
// tierzero-torch (LibTorch).
void add_bench_pcie_command(CLI::App& bench);
// `tierzero bench tiers`: NVMe <-> GPU streaming through training's offload stack (swap files, pinned
// staging, side-stream copies) vs min(NVMe, PCIe) bandwidth; in tierzero-torch (LibTorch).
void add_bench_tiers_command(CLI::App& bench);
// `tierzero data prepare --model DIR IN.jsonl OUT`: JSONL tokenized with the model's tokenizer.
void add_data_command(CLI::App& app);
// `tierzero report RUN... [--bench FILE...] -o FILE`: metrics and bench JSON as an HTML page.
void add_report_command(CLI::App& app);
// `tierzero doctor`: what this machine offers and what tierzero will use, OK / WARN / FAIL.
void add_doctor_command(CLI::App& app);
// `tierzero estimate --model DIR --config CFG`: bytes per tier and step time of a run (engine/plan),
// planned for this machine's memory and GPUs unless flags name another's.
void add_estimate_command(CLI::App& app);
// `tierzero train`: ZeRO training (engine/zero); no arguments: a tiny built-in model and corpus.
void add_train_command(CLI::App& app);
// `tierzero generate --model DIR --prompt TEXT`: text from a model (+ LoRA adapter), KV-cached (engine/generate).
void add_generate_command(CLI::App& app);

// The LibTorch-free `tierzero` hands `train`, `generate`, `bench adam` and `bench tiers` to tierzero-torch
// beside it: true when argv names one of those commands.
bool is_torch_command(int argc, char** argv);
// Replaces this process with tierzero-torch (same arguments); returns only when that fails, with
// the exit code to use after printing what to do.
int run_torch_program(char** argv);
// Lists `train`, `generate`, `bench adam` and `bench tiers` in the help of the program that hands them over.
void add_torch_command_stubs(CLI::App& app, CLI::App& bench);

}  // namespace tierzero::tools
