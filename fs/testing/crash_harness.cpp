#include "fs/testing/crash_harness.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "fs/testing/default_override.h"
#include "fs/testing/fault_injection_fs.h"

namespace tierzero::fs::testing {
namespace {

void empty_dir(FileSystem& real, const std::string& root) {
  const std::vector<std::string> names = real.list_dir(root).value();
  for (const std::string& name : names) throw_if_error(real.remove_tree(root + "/" + name));
}

void collect(const std::string& dir, const std::string& prefix, std::map<std::string, std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      collect(path, prefix + name + "/", out);
    } else {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      out[prefix + name] = bytes.str();
    }
  }
  ::closedir(d);
}

std::string scratch_parent() {
  if (const char* dir = std::getenv("TIERZERO_CRASH_DIR"); dir != nullptr && *dir != '\0') return dir;
  return ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : ".";
}

}  // namespace

ScratchRoot::ScratchRoot() {
  static std::atomic<int> counter{0};
  path_ = fmt::format("{}/tierzero_crash_{}_{}", scratch_parent(), ::getpid(), counter++);
  FileSystem& real = default_file_system();
  throw_if_error(real.remove_tree(path_));
  throw_if_error(real.make_dir(path_).status());
}

ScratchRoot::~ScratchRoot() { (void)default_file_system().remove_tree(path_); }

std::map<std::string, std::string> files_under(const std::string& dir) {
  std::map<std::string, std::string> out;
  collect(dir, "", out);
  return out;
}

CrashReport crash_at_every_step(const CrashScenario& scenario) {
  FileSystem& real = default_file_system();
  CrashReport report;
  empty_dir(real, scenario.root);
  scenario.prepare();
  std::vector<FsStep> steps;
  {
    FaultInjectionFs probe(real, scenario.root);
    ScopedDefaultFileSystem use(probe);
    const Status clean = scenario.operation();
    if (!clean.ok()) report.problems.push_back("the clean run failed: " + clean.to_string());
    steps = probe.steps();
  }
  report.steps = steps.size();
  report.crash_points = steps.size() + 1;
  for (size_t k = 0; k <= steps.size(); ++k) {
    empty_dir(real, scenario.root);
    scenario.prepare();
    FaultInjectionFs crashing(real, scenario.root);
    crashing.crash_at(k);
    Status status;
    {
      ScopedDefaultFileSystem use(crashing);
      status = scenario.operation();
    }
    const std::string where = k < steps.size()
                                  ? fmt::format("power lost before step {} ({} {})", k, steps[k].op, steps[k].path)
                                  : fmt::format("power lost after the last step ({})", k);
    for (size_t i = 0; i < crashing.image_count(); ++i) {
      ++report.images;
      const Status restored = crashing.restore_image(i);
      std::vector<std::string> problems;
      if (!restored.ok())
        problems.push_back(restored.to_string());
      else
        scenario.check(status.ok(), problems);
      for (const std::string& p : problems) report.problems.push_back(fmt::format("{}, image {}: {}", where, i, p));
    }
  }
  return report;
}

}  // namespace tierzero::fs::testing
