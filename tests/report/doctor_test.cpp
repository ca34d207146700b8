// `tierzero doctor` on this machine: every check has its line, nothing FAILs here, and a path
// that does not exist does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tools/doctor_checks.h"

namespace tierzero::tools {
namespace {

// Runs the doctor into a string; `code` gets its exit code.
std::string run(const DoctorOptions& options, bool json, int& code) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  code = run_doctor(options, json, out);
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

DoctorOptions small_options() {
  DoctorOptions o;
  o.nvme_paths = {std::filesystem::temp_directory_path().string()};
  o.pin_probe_bytes = 16ull << 20;
  return o;
}

// The table line of `check` ("  OK     io     io_uring  ..."), or "".
std::string line_of(const std::string& table, const std::string& area, const std::string& check) {
  size_t start = 0;
  while (start < table.size()) {
    size_t end = table.find('\n', start);
    if (end == std::string::npos) end = table.size();
    const std::string line = table.substr(start, end - start);
    char status[8] = {}, got_area[16] = {};
    if (std::sscanf(line.c_str(), " %7s %15s", status, got_area) == 2 && got_area == area &&
        line.find(" " + check + " ") != std::string::npos) {
      return line;
    }
    start = end + 1;
  }
  return {};
}

TEST(DoctorTest, TableHasEveryCheckAndPassesHere) {
  int code = -1;
  const DoctorOptions options = small_options();
  const std::string table = run(options, false, code);
  EXPECT_EQ(code, 0) << table;
  const std::pair<const char*, std::string> kExpected[] = {{"io", "io_uring"},         {"io", "libaio"},
                                                           {"io", "backend (auto)"},   {"nvme", options.nvme_paths[0]},
                                                           {"cpu", "SIMD target"},     {"cpu", "optimizer threads"},
                                                           {"memory", "RAM"},          {"memory", "RLIMIT_MEMLOCK"},
                                                           {"memory", "pinned probe"}, {"build", "CUDA toolkit"},
                                                           {"build", "LibTorch"},      {"build", "NCCL"}};
  for (const auto& [area, check] : kExpected) {
    const std::string line = line_of(table, area, check);
    ASSERT_FALSE(line.empty()) << "no line for " << area << " / " << check << " in\n" << table;
    EXPECT_TRUE(line.find("  OK ") == 0 || line.find("  WARN ") == 0) << line;
  }
  EXPECT_NE(table.find("  gpu "), std::string::npos) << table;  // "GPUs: none" or one line per GPU
  EXPECT_NE(table.find("# Result: "), std::string::npos);
  // Every WARN says what to do.
  size_t warn_lines = 0, fix_lines = 0;
  for (size_t at = table.find("\n  WARN"); at != std::string::npos; at = table.find("\n  WARN", at + 1)) ++warn_lines;
  for (size_t at = table.find(" fix: "); at != std::string::npos; at = table.find(" fix: ", at + 1)) ++fix_lines;
  EXPECT_EQ(warn_lines, fix_lines) << table;
}

TEST(DoctorTest, JsonHasTheSameChecks) {
  int code = -1;
  const std::string text = run(small_options(), true, code);
  EXPECT_EQ(code, 0);
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_TRUE(j["checks"].is_array());
  EXPECT_GE(j["checks"].size(), 13u);
  for (const auto& c : j["checks"]) {
    const std::string status = c["status"];
    EXPECT_TRUE(status == "OK" || status == "WARN" || status == "FAIL") << c.dump();
    EXPECT_EQ(status == "OK", c["fix"].get<std::string>().empty()) << c.dump();
  }
  EXPECT_NE(j["result"], "FAIL");
}

TEST(DoctorTest, AMissingNvmePathFails) {
  DoctorOptions options = small_options();
  options.nvme_paths = {"/no/such/dir-" + std::to_string(getpid())};
  int code = -1;
  const std::string table = run(options, false, code);
  EXPECT_EQ(code, 1);
  const std::string line = line_of(table, "nvme", options.nvme_paths[0]);
  EXPECT_EQ(line.find("  FAIL "), 0u) << table;
  EXPECT_NE(table.find("fix: create it"), std::string::npos) << table;
}

}  // namespace
}  // namespace tierzero::tools
