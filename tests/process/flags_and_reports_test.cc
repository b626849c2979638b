// Hostile and mistaken input at the command line, as the keel binary meets
// it: flags refused before anything starts, every exception ending in one
// line that names the command, and a worker's error that quotes binary junk
// still reaching the scheduler.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;
using testing::ProcessesMentioning;

// `keel launch` of a valid job but for `flag`, with --check_flags.
testing::Exit CheckLaunch(const std::string& flag) {
  return testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=linear_learner",
                       "--train=/data", flag, "--check_flags"},
                      10);
}

TEST(LaunchCheckFlags, RefusesEveryRangeAndCrossFlagError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--replication=5", "--replication 5 is not in [0, 1]"},
      {"--heartbeat_timeout=0", "--heartbeat_timeout must be positive and at most 1e+07, not 0"},
      {"--request_timeout_ms=0",
       "--request_timeout_ms must be positive and at most 1000000000, not 0"},
      {"--request_min_timeout_ms=-1",
       "--request_min_timeout_ms must be positive and at most 1000000000, not -1"},
      {"--request_min_timeout_ms=20000",
       "--request_min_timeout_ms 20000 is not in [1, 16000]: not above --request_max_timeout_ms"},
      {"--drop_rate=2", "--drop_rate 2 is not in [0, 1]"},
      {"--checkpoint_every=-5", "--checkpoint_every -5 is not in [0, "},
      {"--port=99999", "--port 99999 is not in [0, 65535]"},
      {"--workers=100000", "--workers 100000 is not in [1, 4096]"},
      {"--workers=300", "a local cluster has at most 256 servers and workers"},
      {"--faults=kill:server:7@1s", "server:7"},
  };
  for (const auto& [flag, message] : cases) {
    const auto exit = CheckLaunch(flag);
    EXPECT_TRUE(exit.finished && exit.code == 1) << flag << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, message)) << flag << ": " << exit.output;
    EXPECT_FALSE(Contains(exit.output, "flags ok")) << flag << ": " << exit.output;
  }
}

TEST(LaunchCheckFlags, AcceptsTheSameFlagsInRange) {
  for (const std::string flag :
       {"--replication=1", "--drop_rate=0.5", "--checkpoint_every=0", "--request_timeout_ms=50",
        "--request_min_timeout_ms=5", "--port=65535"}) {
    const auto exit = CheckLaunch(flag);
    EXPECT_TRUE(exit.finished && exit.code == 0) << flag << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, "flags ok")) << flag << ": " << exit.output;
  }
}

TEST(WorkerCheckFlags, RefusesABadRequestTimeout) {
  const auto exit = testing::Run({KeelBinary(), "worker", "--scheduler=h:1", "--job=linear_learner",
                                  "--train=/d", "--request_timeout_ms=0", "--check_flags"},
                                 10);
  EXPECT_TRUE(exit.finished && exit.code == 1) << exit.output;
  EXPECT_TRUE(
      Contains(exit.output, "--request_timeout_ms must be positive and at most 1000000000, not 0"))
      << exit.output;
}

TEST(WorkerCheckFlags, RefusesAMinimumTimeoutAboveTheMaximum) {
  const auto exit =
      testing::Run({KeelBinary(), "worker", "--scheduler=h:1", "--job=linear_learner", "--train=/d",
                    "--request_timeout_ms=100", "--request_min_timeout_ms=300",
                    "--request_max_timeout_ms=200", "--check_flags"},
                   10);
  EXPECT_TRUE(exit.finished && exit.code == 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output,
                       "--request_min_timeout_ms 300 is not in [1, 200]: not above "
                       "--request_max_timeout_ms"))
      << exit.output;
}

TEST(SchedulerCheckFlags, RefusesANegativeCheckpointInterval) {
  const auto exit = testing::Run(
      {KeelBinary(), "scheduler", "--port=9000", "--checkpoint_every=-5", "--check_flags"}, 10);
  EXPECT_TRUE(exit.finished && exit.code == 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--checkpoint_every -5")) << exit.output;
}

TEST(Launch, RefusesABadFlagBeforeStartingAnyProcess) {
  // A path that marks this test's processes (it is in their flags).
  const testing::TempFolder folder("marker");
  const std::string marker = folder.path() + "/train";
  const auto exit = testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2",
                                  "--job=linear_learner", "--train=" + marker, "--replication=5"},
                                 30);
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "keel launch: error: --replication 5")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "[scheduler]")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "[server")) << exit.output;
  EXPECT_TRUE(ProcessesMentioning(marker).empty());
}

TEST(Main, ReportsAStandardExceptionInOneLineNamingTheCommand) {
  // 2^62 features: the planted model's vector cannot be sized (std::length_error).
  const testing::TempFolder folder("datagen");
  const auto exit = testing::Run(
      {KeelBinary(), "datagen", "--model=linear", "--rows=100", "--features=4611686018427387904",
       "--nnz=2", "--out=" + folder.path() + "/data"},
      30);
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 1) << exit.output;  // not abort's 134
  EXPECT_TRUE(Contains(exit.output, "keel datagen: error: ")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "terminate called")) << exit.output;
}

TEST(FailureReport, AWorkersErrorQuotingBinaryJunkReachesTheScheduler) {
  const testing::TempFolder folder("junk");
  // Line 2 starts with bytes that are not UTF-8: the libsvm reader's error
  // quotes them.
  const std::string train = folder.path() + "/train.libsvm";
  testing::WriteFile(train, "1 3:1\n\xFF\xFE:\x80\x81 2:1\n");
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=linear_learner",
       "--train=" + train, "--epochs=1", "--model_dir=" + folder.path() + "/model",
       "--verbose"},  // the scheduler's "worker 0 done" line
      120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 1) << exit.output;
  // The scheduler logs the worker's report, the offending bytes escaped.
  EXPECT_TRUE(Contains(exit.output, "worker 0 done: ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, train + ":2:")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "\\xFF\\xFE:\\x80\\x81")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "is not a Meta")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "no shutdown from the scheduler")) << exit.output;
  EXPECT_TRUE(ProcessesMentioning(train).empty());
}

}  // namespace
}  // namespace keel
