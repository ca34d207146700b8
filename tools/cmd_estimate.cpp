// `tierzero estimate`: the planner (engine/plan/plan.h) on a model config.json and a ds_config —
// bytes per tier, the checks against the budgets, the predicted step time — and a non-zero exit
// when a budget cannot be met. The budgets are this machine's (host memory available, its GPUs'
// count and memory) unless flags name another machine's.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/common.h"
#include "engine/plan/plan.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"
#include "tools/machine_facts.h"

namespace tierzero::tools {
namespace {

using engine::Machine;

struct EstimateFlags {
  std::string model_config, config, gpu_memory, host_memory, gpu, json;
  std::vector<std::string> nvme, bench_json;
  int gpus = 0;  // 0 (not given): this machine's GPUs, at least 1
  double gpu_tflops = 0, gpu_efficiency = 0;
  int64_t seq_len = 0;
  std::string nvme_space;                   // the NVMe budget instead of the paths' free space
  double nvme_read = 0, nvme_write = 0;     // GB/s instead of the bench files' or the defaults
  bool suggest = false;                     // pick the layout (engine::suggest_layout)
  std::string write_config;                 // --suggest: write the chosen layout's ds_config here
};

// A size flag's bytes: more than 0, an error naming the flag otherwise.
uint64_t size_flag(const std::string& text, const char* flag) {
  const Result<uint64_t> bytes = parse_bytes(text);
  if (!bytes.ok()) throw Error(invalid_argument(std::string(flag) + ": " + bytes.status().message()));
  if (*bytes == 0) throw Error(invalid_argument(std::string(flag) + " 0: give the budget in bytes (e.g. 64GiB)"));
  return *bytes;
}

// Refuses flag combinations and values before any work: sizes that do not read, --write-config
// without --suggest or into a directory that does not exist.
void check_flags(const EstimateFlags& flags) {
  for (const auto& [text, flag] : {std::pair{flags.gpu_memory, "--gpu-memory"}, std::pair{flags.host_memory, "--host-memory"},
                                   std::pair{flags.nvme_space, "--nvme-space"}})
    if (!text.empty()) size_flag(text, flag);
  if (flags.write_config.empty()) return;
  if (!flags.suggest)
    throw Error(invalid_argument("--write-config writes the layout --suggest chooses: add --suggest"));
  const std::filesystem::path parent = std::filesystem::path(flags.write_config).parent_path();
  std::error_code error;
  if (!parent.empty() && !std::filesystem::is_directory(parent, error))
    throw Error(invalid_argument("--write-config " + flags.write_config + ": directory " + parent.string() +
                                 " does not exist; create it or name another file"));
}

// This machine's budgets where no flag names them, each with a header line saying where it came
// from: --host-memory else MemAvailable; --gpu-memory else the smallest GPU's memory; --gpus else
// the GPU count; the GPU's name (for the TFLOPS table) when neither --gpu nor a bench file names one.
struct LocalBudgets {
  int gpus = 1;
  uint64_t gpu_memory_bytes = 0;  // 0: not checked
  uint64_t host_memory_bytes = 0;
  std::string gpu_memory_source = "--gpu-memory", host_memory_source = "--host-memory";
  std::string gpu_name;  // empty: the reference GPU's
  std::vector<std::string> header;
};

LocalBudgets local_budgets(const EstimateFlags& flags) {
  LocalBudgets b;
  const HostMemory memory = host_memory();
  if (!flags.host_memory.empty()) {
    b.host_memory_bytes = size_flag(flags.host_memory, "--host-memory");
    b.header.push_back("host memory: " + format_bytes(b.host_memory_bytes) + " (--host-memory)");
  } else {
    b.host_memory_bytes = memory.available;
    b.host_memory_source = "this machine's MemAvailable";
    b.header.push_back("host memory: " + format_bytes(memory.available) + " available of " +
                       format_bytes(memory.total) + " (this machine; --host-memory to plan for another)");
  }
  const LocalGpus local = local_gpus();
  b.gpus = flags.gpus > 0 ? flags.gpus : std::max<int>(1, static_cast<int>(local.gpus.size()));
  if (flags.gpus == 0)
    b.header.push_back("ranks: " + std::to_string(b.gpus) +
                       (local.gpus.empty() ? " (no GPU found here; --gpus N to plan for N)"
                                           : " (this machine's GPUs; --gpus to plan for another count)"));
  const LocalGpu* smallest = local.gpus.empty() ? nullptr : &local.gpus[0];
  for (const LocalGpu& gpu : local.gpus)
    if (gpu.total_bytes < smallest->total_bytes) smallest = &gpu;
  if (smallest != nullptr) b.gpu_name = smallest->name;
  if (!flags.gpu_memory.empty()) {
    b.gpu_memory_bytes = size_flag(flags.gpu_memory, "--gpu-memory");
    b.header.push_back("gpu memory: " + format_bytes(b.gpu_memory_bytes) + " a GPU (--gpu-memory)");
  } else if (smallest != nullptr) {
    b.gpu_memory_bytes = smallest->total_bytes;
    b.gpu_memory_source = "this machine's " + smallest->name;
    b.header.push_back("gpu memory: " + format_bytes(b.gpu_memory_bytes) + " (this machine's " + smallest->name +
                       "; --gpu-memory to plan for another)");
  } else {
    b.header.push_back("gpu memory: not checked: no GPU found here (" + local.why_none +
                       "); the time terms assume the reference H200 unless --gpu NAME or --gpu-tflops says "
                       "otherwise; pass --gpu-memory (e.g. 24GB) to check a GPU's memory");
  }
  return b;
}

Machine machine_from(const EstimateFlags& flags, const LocalBudgets& local, const engine::DsConfig& config,
                     std::vector<std::string>& header) {
  Machine m = engine::default_machine();
  const std::string default_gpu = m.gpu_name;
  for (const std::string& file : flags.bench_json) throw_if_error(engine::apply_bench_file(file, m));
  if (!flags.gpu.empty()) {
    m.gpu_name = flags.gpu;
  } else if (m.gpu_name == default_gpu && !local.gpu_name.empty() && flags.gpu_tflops <= 0) {
    if (engine::gpu_tflops_for(local.gpu_name).ok()) {
      m.gpu_name = local.gpu_name;
    } else {
      header.push_back("gpu: this machine's " + local.gpu_name + " is not in the TFLOPS table: its compute is " +
                       "taken as the " + default_gpu + "'s (--gpu-tflops N to give it)");
    }
  }
  if (flags.gpu_tflops > 0) {
    m.gpu_tflops = {flags.gpu_tflops, "--gpu-tflops"};
  } else if (m.gpu_name != default_gpu) {
    m.gpu_tflops = {value_or_throw(engine::gpu_tflops_for(m.gpu_name)), "table: " + m.gpu_name};
  }
  if (flags.gpu_efficiency > 0) m.compute_efficiency = flags.gpu_efficiency;
  if (flags.nvme_read > 0) m.nvme_read_gbps = {flags.nvme_read, "--nvme-read"};
  if (flags.nvme_write > 0) m.nvme_write_gbps = {flags.nvme_write, "--nvme-write"};
  m.gpu_memory_bytes = local.gpu_memory_bytes;
  m.gpu_memory_source = local.gpu_memory_source;
  m.host_memory_bytes = local.host_memory_bytes;
  m.host_memory_source = local.host_memory_source;
  const std::vector<std::string> paths = flags.nvme.empty() ? engine::config_nvme_paths(config) : flags.nvme;
  if (!flags.nvme_space.empty()) {
    m.nvme_bytes = size_flag(flags.nvme_space, "--nvme-space");
    m.nvme_source = "--nvme-space";
  } else if (!paths.empty())
    m.nvme_bytes = value_or_throw(
        engine::nvme_free_bytes(paths, flags.nvme.empty() ? "the config's nvme_path" : std::string("--nvme")));
  return m;
}

// Whether `path` is a model directory with safetensors files, which train streams the weights from.
bool holds_safetensors(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) return false;
  for (const auto& entry : std::filesystem::directory_iterator(path, error))
    if (entry.path().extension() == ".safetensors") return true;
  return false;
}

std::string figure_text(const engine::MachineFigure& f, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %s", f.value, unit);
  return std::string(text) + " (" + f.source + ")";
}

constexpr int64_t kScheduleStepsForPlan = 1'000'000'000;

// --suggest's lines: every layout planned with its step and the budgets it is over, the one chosen.
std::vector<std::string> suggestion_lines(const engine::Suggestion& s, const EstimateFlags& flags) {
  std::vector<std::string> out = {"suggest: " + std::to_string(s.tried.size()) +
                                  " layouts planned (stage 3 from --config's batch and optimizer; the host budget "
                                  "spent on the weights first, then the optimizer's records):"};
  for (size_t i = 0; i < s.tried.size(); ++i) {
    char step[32];
    std::snprintf(step, sizeof step, "%9.3f s", s.tried[i].step_seconds);
    out.push_back(std::string(i == s.chosen ? "  * " : "    ") + step + "  " + s.tried[i].layout +
                  (s.tried[i].over.empty() ? "" : "  (over: " + s.tried[i].over + ")"));
  }
  for (const std::string& note : s.notes) out.push_back("suggest: " + note);
  out.push_back("suggested (*): " + s.tried[s.chosen].layout +
                (flags.write_config.empty() ? "; --write-config FILE writes it as a ds_config"
                                            : "; written to " + flags.write_config));
  return out;
}

void run(const EstimateFlags& flags) {
  check_flags(flags);
  const LocalBudgets local = local_budgets(flags);
  const engine::ModelDims model = value_or_throw(engine::load_model_dims(flags.model_config));
  engine::ResolveHints hints;
  hints.world_size = local.gpus;
  hints.model.hidden_size = model.hidden_size;
  // The plan does not depend on the schedule's length: a total_num_steps left to `train --steps`
  // ("auto") resolves to a count past any warm-up.
  hints.total_steps = kScheduleStepsForPlan;
  const engine::DsConfig config = value_or_throw(engine::load_ds_config(flags.config, hints));
  // What the engine refuses, `train` refuses before anything is read: so does the estimate.
  throw_if_error(engine::check_engine_settings(engine::engine_settings(config)));
  std::vector<std::string> gpu_notes;
  const Machine machine = machine_from(flags, local, config, gpu_notes);
  const bool from_checkpoint = holds_safetensors(flags.model_config);
  engine::PlanOptions options{.seq_len = flags.seq_len, .weights_from_checkpoint = from_checkpoint};
  std::vector<std::string> suggested;
  engine::Plan plan;
  if (flags.suggest) {
    const engine::Suggestion s = value_or_throw(engine::suggest_layout(model, config, machine, options, flags.nvme));
    plan = s.plan;
    suggested = suggestion_lines(s, flags);
    if (!flags.write_config.empty()) {
      std::ofstream out(flags.write_config);
      out << engine::to_json(s.config).dump(2) << "\n";
      if (!out) throw Error(io_error(flags.write_config + ": cannot write the ds_config (--write-config)"));
    }
  } else {
    plan = value_or_throw(engine::plan_training(model, config, machine, options));
  }

  std::vector<std::string> header = {
      "model: " + flags.model_config + ", config: " + flags.config + (flags.suggest ? " (the layout: --suggest's)" : ""),
      "gpu: " + machine.gpu_name + ", " + figure_text(machine.gpu_tflops, "TFLOPS") + " x efficiency " +
          std::to_string(machine.compute_efficiency).substr(0, 4),
      "pcie pinned: h2d " + figure_text(machine.h2d_gbps, "GB/s") + ", d2h " + figure_text(machine.d2h_gbps, "GB/s"),
      "nvme: read " + figure_text(machine.nvme_read_gbps, "GB/s") + ", write " +
          figure_text(machine.nvme_write_gbps, "GB/s") +
          (flags.nvme_space.empty() ? "" : "; space " + format_bytes(machine.nvme_bytes) + " (--nvme-space)"),
      "cpu adam: " + figure_text(machine.adam_gbps, "GB/s") + " of host memory",
      from_checkpoint ? "weights: read from " + flags.model_config + "'s safetensors a piece at a time (train --model)"
                      : "weights: random init, redrawn a parameter at a time (train --model-config)",
  };
  header.insert(header.end(), local.header.begin(), local.header.end());
  header.insert(header.end(), gpu_notes.begin(), gpu_notes.end());
  for (const std::string& warning : config.warnings) header.push_back("config warning: " + warning);
  header.insert(header.end(), suggested.begin(), suggested.end());
  std::fputs(engine::format_plan(plan, header).c_str(), stdout);
  if (!flags.json.empty()) {
    std::ofstream out(flags.json);
    out << engine::plan_to_json(plan).dump(2) << "\n";
    if (!out) throw Error(io_error(flags.json + ": cannot write the plan JSON (--json)"));
  }
  if (!plan.feasible()) throw ExitCode{1};
}

}  // namespace

void add_estimate_command(CLI::App& app) {
  auto flags = std::make_shared<EstimateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "estimate", "Plan a training run: bytes per tier (GPU, pinned, pageable, NVMe), checks, predicted step time");
  cmd->add_option("--model,--model-config", flags->model_config,
                  "Hugging Face model directory (with safetensors: weights streamed, as train --model reads them), "
                  "or a config.json (random init, as train --model-config); --model-config is the older name")
      ->required();
  cmd->add_option("--config", flags->config, "DeepSpeed ds_config JSON")->required();
  cmd->add_option("--gpu-memory", flags->gpu_memory,
                  "a GPU's memory, CUDA context included (e.g. 24GB; default: this machine's smallest GPU's, "
                  "unchecked without a GPU)");
  cmd->add_option("--host-memory", flags->host_memory,
                  "host memory for all ranks, pinned + pageable (e.g. 128GB; default: this machine's MemAvailable)");
  cmd->add_option("--nvme", flags->nvme, "NVMe directories (their free space is the NVMe budget)");
  cmd->add_option("--gpus", flags->gpus, "data-parallel ranks on this host (default: this machine's GPUs, else 1)")
      ->check(whole_number_in(1, 65536));
  cmd->add_option("--bench-json", flags->bench_json, "tierzero bench pcie|io|adam|tiers --json files of this machine");
  CLI::Option* gpu =
      cmd->add_option("--gpu", flags->gpu, "GPU name for the TFLOPS table (default: bench pcie's device, else H200)");
  cmd->add_option("--gpu-tflops", flags->gpu_tflops, "dense 16-bit matmul TFLOPS (overrides the table)")
      ->check(number_in(0.001, 1e6))
      ->excludes(gpu);
  cmd->add_option("--gpu-efficiency", flags->gpu_efficiency,
                  "fraction of those TFLOPS a step sustains (default " +
                      std::to_string(Machine{}.compute_efficiency).substr(0, 4) + ")")
      ->check(number_in(0.001, 1.0));
  cmd->add_option("--seq-len", flags->seq_len, "tokens per sample (default: tierzero.data.seq_len)")
      ->check(whole_number_in(1, int64_t{1} << 24));
  cmd->add_option("--json", flags->json, "write the plan as JSON to this file");
  cmd->add_flag("--suggest", flags->suggest,
                "choose the layout: the offload devices, state dtypes and records in memory with the smallest "
                "predicted step that fits --gpu-memory, --host-memory and the NVMe space (--config gives the batch, "
                "optimizer and nvme_path)");
  cmd->add_option("--write-config", flags->write_config, "with --suggest: write the chosen layout as a ds_config JSON");
  cmd->add_option("--nvme-space", flags->nvme_space,
                  "the NVMe budget for all ranks (e.g. 55GiB; default: the free space on the NVMe paths)");
  cmd->add_option("--nvme-read", flags->nvme_read, "NVMe read GB/s (default: --bench-json's, else the reference box's)")
      ->check(number_in(0.001, 1000));
  cmd->add_option("--nvme-write", flags->nvme_write, "NVMe write GB/s (default: --bench-json's, else the reference box's)")
      ->check(number_in(0.001, 1000));
  cmd->callback([flags] { run(*flags); });
}

}  // namespace tierzero::tools
