// `keel launch` and `keel bench`: whole local clusters started by the binary.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "test_util.h"

namespace keel {
namespace {

using testing::KeelBinary;
using testing::ProcessesMentioning;

using testing::Contains;

TEST(Version, SaysWhetherTheCudaBackendWasCompiled) {
  const auto exit = testing::Run({KeelBinary(), "version"}, 10);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
#ifdef KEEL_TESTS_CUDA_COMPILED
  EXPECT_TRUE(Contains(exit.output, "cuda: compiled")) << exit.output;
#else
  EXPECT_TRUE(Contains(exit.output, "cuda: not compiled")) << exit.output;
#endif
}

// The version is VERSION's first line, then (in a git clone) "+COUNT.gHASH"
// of the commit built; "commit:" names that commit in full.
TEST(Version, NamesTheReleaseFromVersionFileAndTheCommitBuilt) {
  const auto exit = testing::Run({KeelBinary(), "--version"}, 10);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const std::string release = testing::ReadFileOrEmpty(testing::SourceDir() + "/VERSION");
  const std::string first_line = release.substr(0, release.find('\n'));
  ASSERT_FALSE(first_line.empty());
  EXPECT_EQ(exit.output.rfind("keel " + first_line, 0), 0u) << exit.output;
  const auto head = testing::Run({"git", "-C", testing::SourceDir(), "rev-parse", "HEAD"}, 10);
  if (head.finished && head.code == 0 && head.output.size() >= 40) {
    const std::string commit = head.output.substr(0, 40);
    EXPECT_TRUE(Contains(exit.output, "\ncommit: " + commit + "\n")) << exit.output;
    EXPECT_TRUE(Contains(exit.output, ".g" + commit.substr(0, 7) + "\n")) << exit.output;
  }
}

TEST(Launch, RejectsAnUnknownFlag) {
  const auto exit =
      testing::Run({KeelBinary(), "launch", "--servers=1", "--workers=1", "--no_such_flag=3"}, 10);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "no_such_flag")) << exit.output;
}

TEST(Launch, FailsNamingTheSchedulerWhenItIsUnreachable) {
  // A path that marks this test's processes (it is in their flags).
  const testing::TempFolder folder("marker");
  const std::string marker = folder.path() + "/out";
  const std::string scheduler = "127.0.0.1:" + std::to_string(testing::UnusedPort());
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=1", "--workers=1", "--scheduler=" + scheduler,
       "--register_timeout=2", "--job=kv_bench", "--bench_out=" + marker},
      30);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "no answer from the scheduler at " + scheduler)) << exit.output;
  EXPECT_TRUE(ProcessesMentioning(marker).empty());
}

TEST(Launch, ChecksEveryRolesFlagsBeforeStartingAny) {
  // A path that marks this test's processes (it is in their flags).
  const testing::TempFolder folder("marker");
  const std::string marker = folder.path() + "/out";
  const auto exit = testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2",
                                  "--optimizer=bogus", "--job=kv_bench", "--bench_out=" + marker},
                                 30);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "unknown optimizer 'bogus'")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "[scheduler]")) << exit.output;
  EXPECT_TRUE(ProcessesMentioning(marker).empty());
}

TEST(Launch, StopsEveryRoleWhenOneFails) {
  // A path that marks this test's processes (it is in their flags).
  const testing::TempFolder folder("marker");
  const std::string marker = folder.path() + "/out";
  // The workers fail once they open their (missing) data, after joining.
  const auto exit =
      testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=linear_learner",
                    "--train=" + marker + "/missing", "--model_dir=" + marker + "/model"},
                   60);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, marker + "/missing")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "stopping the others")) << exit.output;
  EXPECT_TRUE(ProcessesMentioning(marker).empty());
}

TEST(CheckFlags, SaysFlagsOkForAValidRole) {
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"scheduler", "--port=9000", "--num_servers=2", "--num_workers=3"},
           {"server", "--scheduler=scheduler.example:9000", "--job=linear_learner",
            "--optimizer=ftrl"},
           {"worker", "--scheduler=scheduler.example:9000", "--job=factorization_machines",
            "--train=/data/train", "--num_factors=16"},
           {"launch", "--servers=2", "--workers=2", "--job=linear_learner", "--train=/data"}}) {
    std::vector<std::string> command = {KeelBinary()};
    command.insert(command.end(), argv.begin(), argv.end());
    command.push_back("--check_flags");
    const auto exit = testing::Run(command, 10);
    EXPECT_TRUE(exit.finished && exit.code == 0) << argv[0] << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, "flags ok")) << argv[0] << ": " << exit.output;
  }
}

TEST(CheckFlags, RefusesWhatTheRoleWouldRefuseAtStart) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"scheduler", "--num_servers=0", "--port=9000"}, "at least one server"},
      {{"server", "--job=linear_learner"}, "--scheduler HOST:PORT is required"},
      {{"server", "--scheduler=host"}, "is not HOST:PORT"},
      {{"server", "--scheduler=h:1", "--optimizer=lbfgs"}, "unknown optimizer 'lbfgs'"},
      {{"worker", "--scheduler=h:1", "--job=linear_learner", "--train=/d", "--epochs=0"},
       "--epochs must be at least 1"},
      {{"worker", "--scheduler=h:1", "--job=linear_learner"}, "--train is required"},
      {{"worker", "--scheduler=h:1", "--job=svm", "--train=/d"}, "--job 'svm'"},
      {{"worker", "--scheduler=h:1", "--job=linear_learner", "--train=/d", "--staleness=-2"},
       "--staleness '-2'"},
      {{"worker", "--scheduler=h:1", "--job=linear_learner", "--train=/d",
        "--rank_env=KEEL_TEST_UNSET_RANK"},
       "KEEL_TEST_UNSET_RANK is not set"},
      {{"launch", "--job=linear_learner", "--train=/d", "--mini_batch_size=0"},
       "--mini_batch_size"}};
  for (const auto& [argv, message] : cases) {
    std::vector<std::string> command = {KeelBinary()};
    command.insert(command.end(), argv.begin(), argv.end());
    command.push_back("--check_flags");
    const auto exit = testing::Run(command, 10);
    EXPECT_TRUE(exit.finished && exit.code == 1) << argv[0] << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, message)) << argv[0] << ": " << exit.output;
    EXPECT_FALSE(Contains(exit.output, "flags ok")) << argv[0] << ": " << exit.output;
  }
}

TEST(CheckFlags, TakesTheRankFromAnEnvironmentVariable) {
  setenv("KEEL_TEST_POD_NAME", "keel-server-3", 1);
  auto exit = testing::Run(
      {KeelBinary(), "server", "--scheduler=h:1", "--rank_env=KEEL_TEST_POD_NAME", "--check_flags"},
      10);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  setenv("KEEL_TEST_POD_NAME", "keel-server", 1);
  exit = testing::Run(
      {KeelBinary(), "server", "--scheduler=h:1", "--rank_env=KEEL_TEST_POD_NAME", "--check_flags"},
      10);
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "not a number or a name ending in -NUMBER")) << exit.output;
  unsetenv("KEEL_TEST_POD_NAME");
}

// Expects `output` to contain each of `parts`.
void ExpectSaysEach(const std::string& output, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_TRUE(Contains(output, part)) << part << "\n" << output;
  }
}

TEST(Launch, RunsAJobToCompletionWithPrefixedLogs) {
  const testing::TempFolder temp_folder("marker");
  const std::string& folder = temp_folder.path();
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=kv_bench",
       "--bench_out=" + folder, "--mode=all", "--dense_sizes=64KiB", "--sparse_keys=1000",
       "--key_space=100000", "--sparse_widths=1", "--bench_seconds=0.2", "--verbose"},
      120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  ExpectSaysEach(exit.output, {"[scheduler] ", "[server 1] ", "[worker 1] "});
  for (const char* file : {"/worker-0.tsv", "/worker-1.tsv"}) {
    EXPECT_EQ(access((folder + file).c_str(), R_OK), 0) << file;
  }
  EXPECT_TRUE(ProcessesMentioning(folder).empty());
}

TEST(Launch, CtrlCStopsEveryProcess) {
  // Its path marks this test's processes (it is in their flags).
  const testing::TempFolder folder("marker");
  const std::string& marker = folder.path();
  const std::string membership = marker + "/membership.jsonl";
  testing::Processes processes;
  // A long benchmark: it is interrupted long before it ends.
  const pid_t launcher =
      processes.Start({KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=kv_bench",
                       "--bench_out=" + marker, "--mode=dense", "--dense_sizes=64KiB",
                       "--bench_seconds=100", "--membership_log=" + membership});
  // Wait until the worker has joined the cluster, so every role is running.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (auto& join : testing::EventsNamed(membership, "join")) {
          if (join["role"] == "worker") return true;
        }
        return false;
      },
      20))
      << processes.Output(launcher);
  EXPECT_GE(ProcessesMentioning(marker).size(), 2u);  // the launcher and the worker
  kill(launcher, SIGINT);
  const auto exit = processes.Wait(launcher, 15);
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 130) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "interrupted")) << exit.output;
  EXPECT_TRUE(testing::WaitFor([&] { return ProcessesMentioning(marker).empty(); }, 5));
}

TEST(Bench, KVPrintsATableAndAJsonLine) {
  const auto exit = testing::Run(
      {KeelBinary(), "bench", "kv", "--mode=all", "--dense_sizes=4KiB", "--sparse_keys=1000",
       "--key_space=100000", "--sparse_widths=1", "--bench_seconds=0.1"},
      120);
  ASSERT_TRUE(exit.finished) << exit.output;
  ASSERT_EQ(exit.code, 0) << exit.output;
  ExpectSaysEach(exit.output, {"dense 4KiB push", "sparse 1000x1 pull", "{\"bench\":\"kv\"",
                               "\"zmq_gb_per_s\""});
}

}  // namespace
}  // namespace keel
