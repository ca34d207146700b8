// `tierzero doctor`: what this machine offers and what tierzero will use, one table (after
// DeepSpeed's ds_report), each line OK / WARN / FAIL with the fix.
#include <fstream>

#include "common/common.h"
#include "tools/commands.h"
#include "tools/doctor_checks.h"

namespace tierzero::tools {

void add_doctor_command(CLI::App& app) {
  struct Flags {
    std::vector<std::string> nvme_paths;
    std::string pin_probe = "256MiB";
    std::string json;  // file for the JSON form; "-": stdout, instead of the table
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor", "Check this machine: I/O backends, NVMe paths, SIMD, memory and pinning, GPUs, build versions");
  cmd->add_option("--nvme", flags->nvme_paths, "Directory for swap files to check; repeat for several (default /tmp)");
  cmd->add_option("--pin-probe", flags->pin_probe, "Pinned host memory to try to allocate (default 256MiB)");
  cmd->add_option("--json", flags->json,
                  "Also write the checks as JSON to this file, as every --json does (\"-\": print the JSON instead "
                  "of the table)");
  cmd->callback([flags] {
    DoctorOptions options;
    options.nvme_paths = flags->nvme_paths.empty() ? std::vector<std::string>{"/tmp"} : flags->nvme_paths;
    options.pin_probe_bytes = value_or_throw(parse_bytes(flags->pin_probe));
    if (options.pin_probe_bytes < (1u << 20)) throw Error(invalid_argument("--pin-probe must be at least 1MiB"));
    if (flags->json == "-") {
      if (run_doctor(options, true, stdout) != 0) throw ExitCode{1};
      return;
    }
    const std::vector<DoctorLine> lines = run_doctor_checks(options);
    print_doctor_table(lines, stdout);
    if (!flags->json.empty()) {
      std::ofstream out(flags->json);
      out << doctor_json(lines) << "\n";
      if (!out) throw Error(io_error(flags->json + ": cannot write the checks' JSON (--json)"));
    }
    if (worst_verdict(lines) == Verdict::kFail) throw ExitCode{1};
  });
}

}  // namespace tierzero::tools
