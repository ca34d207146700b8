#include "tests/checkpoint/deepspeed_fixtures.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "tests/support/python.h"

namespace tierzero::checkpoint::testing {
namespace fs = std::filesystem;
namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

fs::path script(const std::string& name) {
  const char* src = std::getenv("TIERZERO_SOURCE_DIR");
  return fs::path(src != nullptr ? src : ".") / "tests" / "checkpoint" / name;
}

// Runs `command` with output to `log`; returns the exit status (or -1).
int run(const std::string& command, const fs::path& log) {
  const int rc = std::system((command + " > " + quote(log.string()) + " 2>&1").c_str());
  return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

// Generates everything into `out`; notes go into marker files read back by load().
void generate(const fs::path& out) {
  const std::string py = quote(test_support::python());
  if (run(py + " " + quote(script("make_deepspeed_fixture.py").string()) + " " + quote(out.string()),
          out / "generate.log") != 0) {
    const bool torch = run(py + " -c 'import torch'", out / "torch_check.log") == 0;
    write_text(out / (torch ? "error.txt" : "skip.txt"),
               torch ? "make_deepspeed_fixture.py failed:\n" + read_text(out / "generate.log")
                     : "torch is not importable by " + test_support::python() +
                           " (set TIERZERO_PYTHON to a python with torch)");
    return;
  }
  std::string dirs;
  for (const std::string& f : kGoodFixtures) dirs += " " + quote((out / f).string());
  const int rc = run(py + " " + quote(script("deepspeed_reference.py").string()) + dirs, out / "reference.log");
  if (rc == 3) {
    write_text(out / "reference_skip.txt", "deepspeed is not importable by " + test_support::python() +
                                               " (pip install deepspeed; scripts/setup.sh does)");
  } else if (rc != 0) {
    write_text(out / "reference_error.txt", "deepspeed_reference.py failed:\n" + read_text(out / "reference.log"));
  }
}

DeepSpeedFixtures load(const fs::path& dir) {
  DeepSpeedFixtures f;
  if (fs::exists(dir / "skip.txt")) {
    f.skip_reason = read_text(dir / "skip.txt");
  } else if (fs::exists(dir / "error.txt")) {
    f.error = read_text(dir / "error.txt");
  } else {
    f.dir = dir.string();
  }
  if (fs::exists(dir / "reference_skip.txt")) f.reference_skip = read_text(dir / "reference_skip.txt");
  if (fs::exists(dir / "reference_error.txt")) f.reference_error = read_text(dir / "reference_error.txt");
  return f;
}

DeepSpeedFixtures make_fixtures() {
  const std::string key = read_text(script("make_deepspeed_fixture.py")) + read_text(script("deepspeed_reference.py")) +
                          test_support::python();
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(key));
  const fs::path cache = fs::temp_directory_path() / (std::string("tierzero-deepspeed-fixtures-") + hash);
  if (!fs::exists(cache)) {
    std::string tmp = (cache.string() + ".tmp.XXXXXX");
    if (::mkdtemp(tmp.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmp);
    generate(tmp);
    std::error_code ec;
    fs::rename(tmp, cache, ec);  // fails when another process won the race: use theirs
    if (ec) fs::remove_all(tmp, ec);
  }
  return load(cache);
}

}  // namespace

const DeepSpeedFixtures& deepspeed_fixtures() {
  static const DeepSpeedFixtures fixtures = make_fixtures();
  return fixtures;
}

StateDump read_state_dump(const std::string& dir, const std::string& stem) {
  const nlohmann::json meta = nlohmann::json::parse(read_text(fs::path(dir) / (stem + ".json")));
  const std::string bin = read_text(fs::path(dir) / (stem + ".bin"));
  StateDump dump;
  for (const auto& t : meta.at("tensors")) {
    DumpedTensor d{t.at("name").get<std::string>(), t.at("shape").get<std::vector<int64_t>>(), {}};
    uint64_t numel = 1;
    for (int64_t s : d.shape) numel *= static_cast<uint64_t>(s);
    const auto offset = t.at("offset").get<uint64_t>();
    if ((offset + numel) * sizeof(float) > bin.size()) throw std::runtime_error(dir + "/" + stem + ".bin is short");
    d.values.resize(numel);
    if (numel > 0) std::memcpy(d.values.data(), bin.data() + offset * sizeof(float), numel * sizeof(float));
    dump.tensors.push_back(std::move(d));
  }
  for (const auto& a : meta.at("aliases"))
    dump.aliases.emplace_back(a.at(0).get<std::string>(), a.at(1).get<std::string>());
  return dump;
}

void copy_tree(const std::string& from, const std::string& to) { fs::copy(from, to, fs::copy_options::recursive); }

}  // namespace tierzero::checkpoint::testing
