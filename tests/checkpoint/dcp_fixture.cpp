#include "tests/checkpoint/dcp_fixture.h"

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "tests/checkpoint/test_util.h"

namespace tierzero::checkpoint::testing {

DcpFixture dcp_fixture(int world) {
  namespace fs = std::filesystem;
  const std::string script = source_file("dcp/make_dcp_checkpoint.py");
  const auto text = read_file(script);
  const size_t hash = std::hash<std::string>{}(std::string(text.begin(), text.end()) + python());
  const fs::path dir =
      fs::temp_directory_path() / ("tierzero-dcp-" + std::to_string(hash) + "-w" + std::to_string(world));
  if (fs::exists(dir / "ref.safetensors")) return {dir.string(), "", ""};
  const fs::path work = dir.string() + ".partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(work, ec);
  const std::string log = work.string() + ".log";
  const test_support::PythonRun run = run_python(script, {work.string(), std::to_string(world)}, log);
  fs::remove(log, ec);
  if (run.exit_code == 3) return {"", "torch is not importable by " + python() + ": " + run.output, ""};
  if (run.exit_code != 0) {
    return {"", "", "make_dcp_checkpoint.py failed (" + std::to_string(run.exit_code) + "):\n" + run.output};
  }
  fs::rename(work, dir, ec);  // another process may have won the race: use its copy
  fs::remove_all(work, ec);
  return {dir.string(), "", ""};
}

}  // namespace tierzero::checkpoint::testing
