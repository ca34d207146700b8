// tierzero: offload and checkpoint I/O engine for training large language models.
#include <cstdio>
#include <string>

#include "common/common.h"
#include "common/version.h"
#include "tools/commands.h"
#include "tools/flag_suggestions.h"

int main(int argc, char** argv) {
#ifdef TIERZERO_TORCH_COMMANDS_ELSEWHERE
  if (tierzero::tools::is_torch_command(argc, argv)) return tierzero::tools::run_torch_program(argv);
#endif
  CLI::App app{"tierzero: train, convert and measure ZeRO offload on GPU, pinned host memory and NVMe"};
  app.set_version_flag("--version", std::string("tierzero ") + tierzero::kTierzeroVersion);
  app.require_subcommand(1);
  app.footer(
      "A flag a command does not have is refused with the flag meant: the nearest one, the hyphenated spelling "
      "(--warmup_steps: --warmup-steps), or tierzero's flag for a DeepSpeed / Hugging Face Trainer one "
      "(--deepspeed: --config, --max_steps: --steps, --learning_rate: --lr, --model_name_or_path: --model).");
  CLI::App* bench = app.add_subcommand("bench", "Measure this machine: io, save, adam, pcie, tiers");
  bench->require_subcommand(1);
  tierzero::tools::add_bench_io_command(*bench);
  tierzero::tools::add_bench_save_command(*bench);
#ifdef TIERZERO_HAVE_BENCH_TIERS
  tierzero::tools::add_bench_pcie_command(*bench);
  tierzero::tools::add_bench_tiers_command(*bench);
#endif
  tierzero::tools::add_convert_command(app);
  tierzero::tools::add_checkpoint_command(app);
  tierzero::tools::add_report_command(app);
  tierzero::tools::add_doctor_command(app);
  tierzero::tools::add_data_command(app);
#ifdef TIERZERO_HAVE_ESTIMATE
  tierzero::tools::add_estimate_command(app);
#endif
#ifdef TIERZERO_TORCH_COMMANDS_ELSEWHERE
  tierzero::tools::add_torch_command_stubs(app, *bench);
#else
  tierzero::tools::add_bench_adam_command(*bench);
#endif
#ifdef TIERZERO_HAVE_TRAIN
  tierzero::tools::add_train_command(app);
  tierzero::tools::add_generate_command(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An unknown flag is the first thing to fix: a required flag may look missing only because it
    // was spelt another tool's way.
    const std::string unknown = e.get_exit_code() != 0 ? tierzero::tools::unknown_flags_message(app) : "";
    if (unknown.empty()) return app.exit(e);
    std::fputs(unknown.c_str(), stderr);
    return static_cast<int>(CLI::ExitCodes::ExtrasError);
  } catch (const tierzero::tools::ExitCode& e) {
    return e.code;
  } catch (const tierzero::Error& e) {
    std::fprintf(stderr, "tierzero: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tierzero: unexpected error: %s\n", e.what());
    return 2;
  }
  return 0;
}
