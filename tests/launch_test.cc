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

// A unique folder name that also marks the processes of one test.
std::string Marker() {
  std::random_device random;
  return "/tmp/keel-marker-" + std::to_string(getpid()) + "-" + std::to_string(random());
}

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

TEST(Launch, RejectsAnUnknownFlagAtOnce) {
  const auto exit =
      testing::Run({KeelBinary(), "launch", "--servers=1", "--workers=1", "--no_such_flag=3"}, 10);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "no_such_flag")) << exit.output;
  EXPECT_LT(exit.seconds, 5);
}

TEST(Launch, FailsWithinSecondsWhenTheSchedulerIsUnreachable) {
  const std::string marker = Marker();
  const std::string scheduler = "127.0.0.1:" + std::to_string(testing::UnusedPort());
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=1", "--workers=1", "--scheduler=" + scheduler,
       "--register_timeout=2", "--job=kv_bench", "--bench_out=" + marker},
      30);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "no answer from the scheduler at " + scheduler)) << exit.output;
  EXPECT_LT(exit.seconds, 10);
  EXPECT_TRUE(ProcessesMentioning(marker).empty());
}

TEST(Launch, StopsEveryRoleWhenOneDiesAtStart) {
  const std::string marker = Marker();
  const auto exit = testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2",
                                  "--optimizer=bogus", "--job=kv_bench", "--bench_out=" + marker},
                                 30);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "unknown optimizer 'bogus'")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "stopping the others")) << exit.output;
  EXPECT_LT(exit.seconds, 10);
  EXPECT_TRUE(ProcessesMentioning(marker).empty());
}

TEST(Launch, RunsAJobToCompletionWithPrefixedLogs) {
  const std::string folder = Marker();
  ASSERT_EQ(mkdir(folder.c_str(), 0755), 0);
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=kv_bench",
       "--bench_out=" + folder, "--mode=all", "--dense_sizes=64KiB", "--sparse_keys=1000",
       "--key_space=100000", "--sparse_widths=1", "--bench_seconds=0.2"},
      120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "[scheduler] ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "[server 1] ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "[worker 1] ")) << exit.output;
  for (const char* file : {"/worker-0.tsv", "/worker-1.tsv"}) {
    EXPECT_EQ(access((folder + file).c_str(), R_OK), 0) << file;
    unlink((folder + file).c_str());
  }
  rmdir(folder.c_str());
  EXPECT_TRUE(ProcessesMentioning(folder).empty());
}

TEST(Launch, CtrlCStopsEveryProcess) {
  const std::string marker = Marker();
  ASSERT_EQ(mkdir(marker.c_str(), 0755), 0);
  testing::Processes processes;
  // A long benchmark: it is interrupted long before it ends.
  const pid_t launcher = processes.Start({KeelBinary(), "launch", "--servers=1", "--workers=1",
                                          "--job=kv_bench", "--bench_out=" + marker, "--mode=dense",
                                          "--dense_sizes=64KiB", "--bench_seconds=100"});
  // Wait until the worker has joined the cluster, so every role is running.
  ASSERT_TRUE(
      testing::WaitFor([&] { return Contains(processes.Output(launcher), "WORKER 0 (node"); }, 20))
      << processes.Output(launcher);
  EXPECT_GE(ProcessesMentioning(marker).size(), 2u);  // the launcher and the worker
  kill(launcher, SIGINT);
  const auto exit = processes.Wait(launcher, 15);
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 130) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "interrupted")) << exit.output;
  EXPECT_TRUE(testing::WaitFor([&] { return ProcessesMentioning(marker).empty(); }, 5));
  rmdir(marker.c_str());
}

TEST(Bench, KVPrintsATableAndAJsonLine) {
  const auto exit = testing::Run(
      {KeelBinary(), "bench", "kv", "--mode=all", "--dense_sizes=4KiB", "--sparse_keys=1000",
       "--key_space=100000", "--sparse_widths=1", "--bench_seconds=0.1"},
      120);
  ASSERT_TRUE(exit.finished) << exit.output;
  ASSERT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "dense 4KiB push")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "sparse 1000x1 pull")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "{\"bench\":\"kv\"")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "\"zmq_gb_per_s\"")) << exit.output;
}

}  // namespace
}  // namespace keel
