// doctor: the table and the JSON.
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "common/version.h"
#include "tools/doctor_checks.h"

namespace tierzero::tools {

namespace {

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kOk: return "OK";
    case Verdict::kWarn: return "WARN";
    default: return "FAIL";
  }
}

Verdict worst_verdict(const std::vector<DoctorLine>& lines) {
  Verdict worst = Verdict::kOk;
  for (const DoctorLine& l : lines) worst = std::max(worst, l.verdict);
  return worst;
}

void print_doctor_table(const std::vector<DoctorLine>& lines, std::FILE* out) {
  size_t check_width = 5;
  for (const DoctorLine& l : lines) check_width = std::max(check_width, l.check.size());
  std::fprintf(out, "# tierzero doctor — tierzero %s\n# host: %s, CPU: %s\n#\n", kTierzeroVersion, host_name().c_str(),
               describe_cpu().c_str());
  std::fprintf(out, "# %-6s %-6s %-*s  %s\n", "status", "area", static_cast<int>(check_width), "check", "found / used");
  int warnings = 0, failures = 0;
  for (const DoctorLine& l : lines) {
    std::fprintf(out, "  %-6s %-6s %-*s  %s\n", verdict_name(l.verdict), l.area.c_str(), static_cast<int>(check_width),
                 l.check.c_str(), l.value.c_str());
    if (!l.fix.empty()) {
      std::fprintf(out, "  %-6s %-6s %-*s  fix: %s\n", "", "", static_cast<int>(check_width), "", l.fix.c_str());
    }
    warnings += l.verdict == Verdict::kWarn;
    failures += l.verdict == Verdict::kFail;
  }
  std::fprintf(out, "#\n# Result: %s (%d WARN, %d FAIL)\n", verdict_name(worst_verdict(lines)), warnings, failures);
}

std::string doctor_json(const std::vector<DoctorLine>& lines) {
  nlohmann::json j;
  j["tierzero"] = kTierzeroVersion;
  j["host"] = host_name();
  j["cpu"] = describe_cpu();
  j["checks"] = nlohmann::json::array();
  for (const DoctorLine& l : lines) {
    j["checks"].push_back({{"area", l.area},
                           {"check", l.check},
                           {"value", l.value},
                           {"status", verdict_name(l.verdict)},
                           {"fix", l.fix}});
  }
  j["result"] = verdict_name(worst_verdict(lines));
  return j.dump(2);
}

std::vector<DoctorLine> run_doctor_checks(const DoctorOptions& options) {
  std::vector<DoctorLine> lines;
  for (auto part : {check_io_backends(), check_nvme_paths(options.nvme_paths), check_cpu(),
                    check_memory(options.pin_probe_bytes), check_gpus(), check_build()}) {
    lines.insert(lines.end(), part.begin(), part.end());
  }
  return lines;
}

int run_doctor(const DoctorOptions& options, bool json, std::FILE* out) {
  const std::vector<DoctorLine> lines = run_doctor_checks(options);
  if (json) {
    std::fprintf(out, "%s\n", doctor_json(lines).c_str());
  } else {
    print_doctor_table(lines, out);
  }
  return worst_verdict(lines) == Verdict::kFail ? 1 : 0;
}

}  // namespace tierzero::tools
