// The support library itself: the status checks print the error, ScratchDir cleans up, Python
// scripts run with their output kept and their fixtures made once, and SpawnedRanks launches again
// only the launches that failed as asked.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/support/python.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/spawned_ranks.h"
#include "tests/support/status_matchers.h"

namespace tierzero {
namespace {

Result<int> seven() { return 7; }
Result<int> missing() { return not_found("no such shard 'w'"); }

TEST(StatusMatchers, PassOnOk) {
  EXPECT_OK(Status());
  ASSERT_OK(seven());
  ASSERT_OK_AND_ASSIGN(const int v, seven());
  EXPECT_EQ(v, 7);
  EXPECT_ERROR(missing(), ErrorCode::kNotFound, "shard 'w'");
}

TEST(StatusMatchers, FailuresNameTheExpressionAndTheError) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(missing()), "missing() is not OK: ");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(missing()), "no such shard 'w'");
  EXPECT_FATAL_FAILURE(ASSERT_OK(io_error("disk gone")), "disk gone");
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(seven(), ErrorCode::kCorrupt, "x"), "seven() is OK; expected");
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(missing(), ErrorCode::kCorrupt, "shard"), "expected corrupt");
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(missing(), ErrorCode::kNotFound, "tensor"), "with \"tensor\"");
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(ScratchDir, IsFreshAndRemovedWithItsContents) {
  std::string path;
  {
    test_support::ScratchDir a("support-test"), b("support-test");
    ASSERT_NE(a.path(), b.path());
    path = a.path();
    EXPECT_EQ(a.file("x/y"), path + "/x/y");
    ASSERT_EQ(::mkdir(a.file("sub").c_str(), 0700), 0);
    std::ofstream(a.file("sub/f")) << "bytes";
    EXPECT_TRUE(exists(a.file("sub/f")));
  }
  EXPECT_FALSE(exists(path));
  EXPECT_TRUE(test_support::remove_tree(path)) << "a missing path is fine";
}

TEST(ScratchDir, UnwritableRootThrowsNamingThePath) {
  EXPECT_THROW(test_support::ScratchDir("x", "/nonexistent-tierzero-root"), std::runtime_error);
}

// Writes `source` as the Python script `name` in `dir`; returns its path.
std::string write_script(const test_support::ScratchDir& dir, const std::string& name, const std::string& source) {
  std::ofstream(dir.file(name)) << source;
  return dir.file(name);
}

std::string read_all(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

TEST(Python, RunsAScriptWithQuotedArgumentsAndKeepsItsOutput) {
  test_support::ScratchDir dir("support-test");
  const std::string script = write_script(dir, "echo.py",
                                          "import sys\n"
                                          "print('args:', sys.argv[1:])\n"
                                          "sys.stderr.write('on stderr\\n')\n"
                                          "sys.exit(3)\n");
  const test_support::PythonRun run = test_support::run_python(script, {"it's", "a b"}, dir.file("echo.log"));
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_EQ(run.output, "args: [\"it's\", 'a b']\non stderr\n");
  EXPECT_EQ(read_all(dir.file("echo.log")), run.output);
}

// A fixture script that counts its runs in <out>.runs and makes <out>/done.
constexpr const char* kFixtureScript =
    "import os, sys\n"
    "out = sys.argv[sys.argv.index('--out') + 1]\n"
    "open(out + '.runs', 'a').write('run\\n')\n"
    "os.makedirs(out, exist_ok=True)\n"
    "open(os.path.join(out, 'done'), 'w').write('yes')\n";

TEST(Python, FixtureDirRunsTheScriptOncePerDirectory) {
  test_support::ScratchDir dir("support-test");
  const std::string script = write_script(dir, "fixture.py", kFixtureScript);
  std::string skip = "unset";
  EXPECT_EQ(test_support::python_fixture_dir(script, dir.file("out"), skip), dir.file("out"));
  EXPECT_EQ(skip, "");
  EXPECT_EQ(test_support::python_fixture_dir(script, dir.file("out"), skip), dir.file("out"));
  EXPECT_EQ(read_all(dir.file("out/done")), "yes");
  EXPECT_EQ(read_all(dir.file("out.runs")), "run\n") << "the second call reuses the first run";
}

TEST(Python, FixtureDirSkipsWhenAPackageOrThePythonIsMissing) {
  test_support::ScratchDir dir("support-test");
  const std::string lacking = write_script(dir, "lacking.py", "import sys\nprint('needs tokenizers')\nsys.exit(77)\n");
  std::string skip;
  EXPECT_EQ(test_support::python_fixture_dir(lacking, dir.file("lacking"), skip), "");
  EXPECT_EQ(skip, "needs tokenizers\n");

  const std::string script = write_script(dir, "fixture.py", kFixtureScript);
  const char* saved = std::getenv("TIERZERO_PYTHON");
  const std::string previous = saved != nullptr ? saved : "";
  ::setenv("TIERZERO_PYTHON", "/nonexistent/python3", 1);
  EXPECT_EQ(test_support::python_fixture_dir(script, dir.file("no_python"), skip), "");
  EXPECT_EQ(skip, "/nonexistent/python3 not found (set TIERZERO_PYTHON)");
  if (saved != nullptr) {
    ::setenv("TIERZERO_PYTHON", previous.c_str(), 1);
  } else {
    ::unsetenv("TIERZERO_PYTHON");
  }
}

TEST(Python, FailingFixtureScriptIsATestFailureOnce) {
  test_support::ScratchDir dir("support-test");
  const std::string broken = write_script(dir, "broken.py", "import sys\nprint('bad row 3')\nsys.exit(2)\n");
  std::string skip;
  EXPECT_NONFATAL_FAILURE(test_support::python_fixture_dir(broken, dir.file("broken"), skip),
                          "failed with status 2:\nbad row 3");
  EXPECT_EQ(skip, "fixture generation failed");
  EXPECT_EQ(test_support::python_fixture_dir(broken, dir.file("broken"), skip), "") << "no second failure";
}

// Two /bin/sh ranks whose launch `fail_in` fails: each rank says `say` on stderr and exits 3 there;
// in the other launches it prints its rank and attempt and exits 0.
test_support::RankLaunch sh_ranks(const test_support::ScratchDir& dir, int fail_in, const std::string& say) {
  const std::string script = "if [ \"$ATTEMPT\" = " + std::to_string(fail_in) + " ]; then echo '" + say +
                             "' >&2; exit 3; fi; echo rank $RANK attempt $ATTEMPT";
  return {.argv = {"/bin/sh", "-c", script},
          .world = 2,
          .env =
              [](int rank, int attempt) {
                return std::vector<std::string>{test_support::env_var("RANK", std::to_string(rank)),
                                                test_support::env_var("ATTEMPT", std::to_string(attempt))};
              },
          .log = [&dir](int rank) { return dir.file("rank" + std::to_string(rank) + ".log"); },
          .retry_when = "cannot form the process group"};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SpawnedRanks, ALaunchThatFailedAsAskedIsLaunchedAgain) {
  test_support::ScratchDir dir("support-test");
  test_support::SpawnedRanks ranks(sh_ranks(dir, 1, "rank 0: cannot form the process group"));
  EXPECT_EQ(ranks.wait(30), "");
  EXPECT_EQ(read_text(dir.file("rank0.log")), "rank 0 attempt 2\n");
  EXPECT_EQ(read_text(dir.file("rank1.log")), "rank 1 attempt 2\n");
}

TEST(SpawnedRanks, OtherFailuresAreReportedWithEachRanksLogAndNotLaunchedAgain) {
  test_support::ScratchDir dir("support-test");
  test_support::SpawnedRanks ranks(sh_ranks(dir, 1, "loss diverged"));
  const std::string failures = ranks.wait(30);
  EXPECT_NE(failures.find("rank 0 status 768:\nloss diverged"), std::string::npos) << failures;
  EXPECT_NE(failures.find("rank 1 status 768:\nloss diverged"), std::string::npos) << failures;
}

TEST(SpawnedRanks, GivesUpAfterTheLastAttempt) {
  test_support::ScratchDir dir("support-test");
  test_support::RankLaunch launch = sh_ranks(dir, 0, "cannot form the process group");
  launch.env = [](int rank, int) {
    return std::vector<std::string>{test_support::env_var("RANK", std::to_string(rank)), "ATTEMPT=0"};
  };
  test_support::SpawnedRanks ranks(std::move(launch));
  const std::string failures = ranks.wait(30);
  EXPECT_NE(failures.find("rank 0 status 768:\ncannot form the process group"), std::string::npos) << failures;
  EXPECT_EQ(failures.find("killed at the deadline"), std::string::npos) << failures;
}

TEST(SpawnedRanks, RanksStillRunningAtTheDeadlineAreKilledAndSaidSo) {
  test_support::ScratchDir dir("support-test");
  test_support::SpawnedRanks ranks({.argv = {"/bin/sh", "-c", "sleep 30"},
                                    .world = 2,
                                    .env = {},
                                    .log = [&dir](int rank) { return dir.file("r" + std::to_string(rank)); },
                                    .retry_when = ""});
  EXPECT_NE(ranks.wait(1).find("rank 1 (killed at the deadline) status 9"), std::string::npos);
}

}  // namespace
}  // namespace tierzero
