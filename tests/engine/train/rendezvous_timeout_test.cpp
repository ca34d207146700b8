// The rendezvous of a multi-process run (engine/comm/rendezvous.cpp): a peer that never arrives
// makes train() fail within TIERZERO_RENDEZVOUS_TIMEOUT, naming the missing rank, the launch
// variables and what to check — instead of hanging. Here the timeout is 1.5 s: the one process
// started of a 2-rank run (as rank 0, which hosts the store, and as rank 1, whose rank 0 never
// comes); and 3 s for Comm::from_env alone, timed. A group Gloo cannot form says what to check.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>

#include "engine/comm/comm.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

constexpr double kTimeoutSeconds = 1.5;
constexpr double kSlackSeconds = 20;  // start-up before the rendezvous, a loaded machine

struct LoneRank {
  Status status;
  double seconds = 0.0;
};

// train() as rank `rank` of WORLD_SIZE=2 with no other process, on MASTER_PORT `port`. The lone
// process is the first of its host (LOCAL_RANK 0), as if each rank had a machine of its own: a
// one-GPU box has no cuda:1 for a LOCAL_RANK 1 to take.
LoneRank train_alone_as(int rank, int port) {
  ScopedEnv world("WORLD_SIZE", "2"), me("RANK", std::to_string(rank)), local("LOCAL_RANK", "0"),
      addr("MASTER_ADDR", "127.0.0.1"), master_port("MASTER_PORT", std::to_string(port)),
      timeout("TIERZERO_RENDEZVOUS_TIMEOUT", "1.5");
  ScratchDir dir;
  const auto start = std::chrono::steady_clock::now();
  LoneRank lone{.status = run_train(train_args(write_config(dir, small_config()), 2)).summary.status()};
  lone.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return lone;
}

TEST(Rendezvous, MissingPeerTimesOutNamingItAndTheLaunchVariables) {
  const int port = free_port();
  const LoneRank lone = train_alone_as(0, port);
  EXPECT_GE(lone.seconds, kTimeoutSeconds);
  EXPECT_LT(lone.seconds, kTimeoutSeconds + kSlackSeconds) << "did not give up after its timeout";
  ASSERT_EQ(lone.status.code(), ErrorCode::kIo) << lone.status.to_string();
  const std::string& message = lone.status.message();
  for (const std::string& part :
       std::vector<std::string>{"rank 0: rank 1 of WORLD_SIZE=2 never arrived at the rendezvous",
                                "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 RANK=0",
                                "check that rank 1 was launched with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE",
                                "waited 1.5 s", "TIERZERO_RENDEZVOUS_TIMEOUT=SECONDS"})
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
}

TEST(Rendezvous, RankWhoseRankZeroNeverComesTimesOutNamingIt) {
  const int port = free_port();
  const LoneRank lone = train_alone_as(1, port);
  EXPECT_LT(lone.seconds, kTimeoutSeconds + kSlackSeconds) << "did not give up after its timeout";
  ASSERT_EQ(lone.status.code(), ErrorCode::kIo) << lone.status.to_string();
  const std::string& message = lone.status.message();
  for (const std::string& part :
       std::vector<std::string>{"rank 1: rank 0 never opened the rendezvous store at 127.0.0.1:" + std::to_string(port),
                                "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 RANK=1",
                                "check that rank 0 was launched", "TIERZERO_RENDEZVOUS_TIMEOUT"})
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
  EXPECT_EQ(message.find("Exception raised from"), std::string::npos) << "c10d's stack trace kept: " << message;
}

// Comm::from_env as rank 1 of WORLD_SIZE=2 whose rank 0 never starts: it gives up within the
// timeout (c10d's own client retried for the timeout twice over), with one message and no LibTorch
// stack frames on stderr or in the message.
TEST(Rendezvous, RankWithoutRankZeroGivesUpWithinTheTimeoutWithoutStackFrames) {
  constexpr double kTimeout = 3.0;
  const int port = free_port();
  ScopedEnv world("WORLD_SIZE", "2"), me("RANK", "1"), local("LOCAL_RANK", "1"), addr("MASTER_ADDR", "127.0.0.1"),
      master_port("MASTER_PORT", std::to_string(port)), timeout("TIERZERO_RENDEZVOUS_TIMEOUT", "3");
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  const Result<std::unique_ptr<Comm>> comm = Comm::from_env(at::kCPU);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string stderr_text = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(seconds, kTimeout * 0.95);
  EXPECT_LE(seconds, kTimeout * 1.2) << "waited past TIERZERO_RENDEZVOUS_TIMEOUT";
  const Status status = comm.status();
  ASSERT_EQ(status.code(), ErrorCode::kIo) << status.to_string();
  const std::string message = status.message();
  for (const std::string& part :
       std::vector<std::string>{"rank 1: rank 0 never opened the rendezvous store at 127.0.0.1:" + std::to_string(port),
                                "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 RANK=1",
                                "Connection refused", "waited 3 s", "TIERZERO_RENDEZVOUS_TIMEOUT=SECONDS"})
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
  for (const std::string& text : {message, stderr_text}) {
    EXPECT_EQ(text.find("frame #"), std::string::npos) << "LibTorch stack frames: " << text;
    EXPECT_EQ(text.find("Exception raised from"), std::string::npos) << "c10's stack trace: " << text;
  }
}

// A group Gloo cannot form (here: GLOO_SOCKET_IFNAME names no interface) is kIo naming the rank,
// Gloo's own first line and what to check, without LibTorch's stack.
TEST(Rendezvous, GroupThatCannotFormSaysWhatToCheckWithoutStackFrames) {
  ScopedEnv interface("GLOO_SOCKET_IFNAME", "tierzero-no-such-if");
  const Result<std::unique_ptr<Comm>> comm = Comm::create(c10::make_intrusive<c10d::HashStore>(), 0, 1, at::kCPU);
  const Status status = comm.status();
  ASSERT_EQ(status.code(), ErrorCode::kIo) << status.to_string();
  const std::string message = status.message();
  for (const char* part : {"rank 0 of 1: cannot form the process group: ", "tierzero-no-such-if",
                           "set GLOO_SOCKET_IFNAME to one every rank reaches"})
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
  EXPECT_EQ(message.find("frame #"), std::string::npos) << "LibTorch stack frames: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "more than one line: " << message;
}

TEST(Rendezvous, TimeoutComesFromTheEnvironmentOrIs300Seconds) {
  {
    ScopedEnv unset("TIERZERO_RENDEZVOUS_TIMEOUT", "");
    ASSERT_OK_AND_ASSIGN(const std::chrono::milliseconds timeout, rendezvous_timeout());
    EXPECT_EQ(timeout, std::chrono::seconds(300));
  }
  {
    ScopedEnv set("TIERZERO_RENDEZVOUS_TIMEOUT", "2.5");
    ASSERT_OK_AND_ASSIGN(const std::chrono::milliseconds timeout, rendezvous_timeout());
    EXPECT_EQ(timeout, std::chrono::milliseconds(2500));
  }
  for (const char* bad : {"0", "-3", "ten", "5s"}) {
    ScopedEnv set("TIERZERO_RENDEZVOUS_TIMEOUT", bad);
    EXPECT_ERROR(rendezvous_timeout(), ErrorCode::kInvalidArgument,
                 std::string("TIERZERO_RENDEZVOUS_TIMEOUT='") + bad + "' is not a number of seconds above 0");
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
