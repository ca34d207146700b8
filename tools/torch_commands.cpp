// `train`, `generate`, `bench adam`, `bench pcie` and `bench tiers` in the LibTorch-free `tierzero`: listed in its
// help, run by the tierzero-torch program installed beside it (exec, same arguments and environment).
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/commands.h"

namespace tierzero::tools {
namespace {

std::string torch_program_path() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "tierzero-torch";
  const std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "tierzero-torch";
}

}  // namespace

bool is_torch_command(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "train") == 0 || std::strcmp(argv[1], "generate") == 0)) return true;
  return argc > 2 && std::strcmp(argv[1], "bench") == 0 &&
         (std::strcmp(argv[2], "adam") == 0 || std::strcmp(argv[2], "pcie") == 0 || std::strcmp(argv[2], "tiers") == 0);
}

int run_torch_program(char** argv) {
  const std::string program = torch_program_path();
  ::execv(program.c_str(), argv);
  const int err = errno;
  std::fprintf(stderr,
               "tierzero: this command runs in %s, which could not be started (%s); build it "
               "(cmake --build BUILD --target tierzero-torch) or run it directly\n",
               program.c_str(), std::strerror(err));
  return 127;
}

void add_torch_command_stubs(CLI::App& app, CLI::App& bench) {
  bench.add_subcommand("adam", "cpu_adam Gparam/s vs STREAM bandwidth and PyTorch fused AdamW (tierzero-torch)")
      ->allow_extras();
  bench
      .add_subcommand("pcie",
                      "Host <-> GPU copies: training's copy path vs cudaMemcpy, per chunk size (tierzero-torch)")
      ->allow_extras();
  bench
      .add_subcommand("tiers",
                      "NVMe <-> GPU streaming through training's offload stack vs min(NVMe, PCIe) (tierzero-torch)")
      ->allow_extras();
  app.add_subcommand("train", "ZeRO training; no arguments: a tiny built-in model and corpus (tierzero-torch)")
      ->allow_extras();
  app.add_subcommand("generate",
                     "Continue a prompt with a model (+ LoRA adapter): greedy or sampled, KV-cached (tierzero-torch)")
      ->allow_extras();
}

}  // namespace tierzero::tools
