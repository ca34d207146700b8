#include "crash_scenarios.h"

#include <fmt/format.h>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint_fixture.h"
#include "fs/file_system.h"

namespace tierzero::checkpoint::testing {
namespace {

CheckpointManifest manifest_at(int64_t step) {
  CheckpointManifest m = tiny_llama_manifest(2, 2);
  m.step = step;
  return m;
}

bool exists(const std::string& path) { return fs::default_file_system().stat(path).ok(); }

// What is wrong with checkpoint `tag` (empty: latest) of `dir`, or "" when it verifies and holds
// `want`'s step and rank 0 master partition `master` (decoded, for a compact checkpoint).
std::string checkpoint_problem(const std::string& dir, const std::string& tag, const CheckpointManifest& want,
                               const std::vector<float>& master) {
  const auto verified = verify_checkpoint(dir, tag);
  if (!verified.ok()) return "verify: " + verified.status().to_string();
  auto reader = CheckpointReader::open(dir, tag);
  if (!reader.ok()) return "open: " + reader.status().to_string();
  const CheckpointManifest& m = (*reader)->manifest();
  if (m.step != want.step) return fmt::format("step {} where {} was expected", m.step, want.step);
  std::vector<float> out(partition_numel(m.groups[0], m.zero_stage, m.world_size, m.alignment));
  const Status read = (*reader)->read_partition(0, 0, m.world_size, 0, std::as_writable_bytes(std::span(out)));
  if (!read.ok()) return "read: " + read.to_string();
  if (out != master) return "rank 0's master weights differ";
  return "";
}

std::string checkpoint_problem(const std::string& dir, const std::string& tag, const CheckpointManifest& want,
                               const FixtureData& data) {
  return checkpoint_problem(dir, tag, want, data.partition(0, 0, want.world_size, 0));
}

void note(std::vector<std::string>& problems, const std::string& what, const std::string& problem) {
  if (!problem.empty()) problems.push_back(what + ": " + problem);
}

}  // namespace

fs::testing::CrashReport crash_saving_over_a_checkpoint(const std::string& root) {
  static const CheckpointManifest first = manifest_at(100), second = manifest_at(200);
  static const FixtureData first_data(first), second_data(second);
  const std::string dir = root + "/ckpt";
  fs::testing::CrashScenario scenario;
  scenario.root = root;
  scenario.prepare = [&] { throw_if_error(save_checkpoint(dir, "step100", first, first_data.ranks())); };
  scenario.operation = [&] { return save_checkpoint(dir, "step200", second, second_data.ranks()); };
  scenario.check = [&](bool finished, std::vector<std::string>& problems) {
    note(problems, "the previous checkpoint step100", checkpoint_problem(dir, "step100", first, first_data));
    const std::string as_first = checkpoint_problem(dir, "", first, first_data);
    const std::string as_second = checkpoint_problem(dir, "", second, second_data);
    if (finished)
      note(problems, "latest after the save returned", as_second);
    else if (!as_first.empty() && !as_second.empty())
      note(problems, "latest", as_first + " / " + as_second);
  };
  return fs::testing::crash_at_every_step(scenario);
}

fs::testing::CrashReport crash_saving_compact_over_a_checkpoint(const std::string& root) {
  static const CheckpointManifest first = manifest_at(100);
  static const FixtureData first_data(first);
  static const CompactFixtureData second_data(manifest_at(200));
  static const CheckpointManifest& second = second_data.manifest();
  static const std::vector<float> second_master = second_data.values(0, 0, second.world_size, 0);
  const std::string dir = root + "/ckpt";
  fs::testing::CrashScenario scenario;
  scenario.root = root;
  scenario.prepare = [&] { throw_if_error(save_checkpoint(dir, "step100", first, first_data.ranks())); };
  scenario.operation = [&] {
    std::vector<RankData> ranks = second_data.ranks();
    for (RankData& rank : ranks) rank.piece_elements = 256;  // record by record, as an optimizer saves
    return save_checkpoint(dir, "step200", second, ranks);
  };
  scenario.check = [&](bool finished, std::vector<std::string>& problems) {
    note(problems, "the previous checkpoint step100", checkpoint_problem(dir, "step100", first, first_data));
    const std::string as_first = checkpoint_problem(dir, "", first, first_data);
    const std::string as_second = checkpoint_problem(dir, "", second, second_master);
    if (finished)
      note(problems, "latest after the compact save returned", as_second);
    else if (!as_first.empty() && !as_second.empty())
      note(problems, "latest", as_first + " / " + as_second);
  };
  return fs::testing::crash_at_every_step(scenario);
}

fs::testing::CrashReport crash_first_save(const std::string& root) {
  static const CheckpointManifest first = manifest_at(100);
  static const FixtureData first_data(first);
  const std::string dir = root + "/ckpt";
  fs::testing::CrashScenario scenario;
  scenario.root = root;
  scenario.prepare = [] {};
  scenario.operation = [&] { return save_checkpoint(dir, "step100", first, first_data.ranks()); };
  scenario.check = [&](bool finished, std::vector<std::string>& problems) {
    if (!finished && !exists(dir + "/latest") && !exists(dir + "/latest.xxh3")) return;
    note(problems, "latest", checkpoint_problem(dir, "", first, first_data));
  };
  return fs::testing::crash_at_every_step(scenario);
}

fs::testing::CrashReport crash_converting(const std::string& root) {
  static const CheckpointManifest first = manifest_at(100);
  static const FixtureData first_data(first);
  const std::string dir = root + "/ckpt", out = root + "/out";
  ConvertOptions options;
  options.progress = false;
  options.max_shard_bytes = 300;  // the tiny model in several shards and an index
  const auto convert = [=] {
    auto source = open_engine_checkpoint_source(dir);
    if (!source.ok()) return source.status();
    return consolidate_to_safetensors(**source, out, options).status();
  };
  // The files of a clean conversion.
  std::map<std::string, std::string> reference;
  {
    throw_if_error(fs::default_file_system().remove_tree(root + "/ckpt"));
    throw_if_error(save_checkpoint(dir, "step100", first, first_data.ranks()));
    throw_if_error(convert());
    reference = fs::testing::files_under(out);
    throw_if_error(fs::default_file_system().remove_tree(out));
  }
  fs::testing::CrashScenario scenario;
  scenario.root = root;
  scenario.prepare = [&] { throw_if_error(save_checkpoint(dir, "step100", first, first_data.ranks())); };
  scenario.operation = convert;
  scenario.check = [&](bool finished, std::vector<std::string>& problems) {
    note(problems, "the source checkpoint", checkpoint_problem(dir, "", first, first_data));
    if (!finished && !exists(out)) return;
    const std::map<std::string, std::string> got = fs::testing::files_under(out);
    if (got != reference) {
      problems.push_back(fmt::format("{} {}: {} files, not the {} files of a clean conversion (or their bytes differ)",
                                     out, finished ? "after convert returned" : "exists", got.size(),
                                     reference.size()));
    }
  };
  fs::testing::CrashReport report = fs::testing::crash_at_every_step(scenario);
  if (reference.size() < 4) report.problems.push_back("the clean conversion wrote fewer than 3 shards and an index");
  return report;
}

}  // namespace tierzero::checkpoint::testing
