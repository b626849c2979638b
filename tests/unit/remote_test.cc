// Hostfiles, shell quoting and Slurm task roles: the pure parts of the
// multi-host launchers (the launchers themselves: tests/multihost/multihost_test.cc).
#include "launch/remote.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

TEST(Hostfile, ReadsRolesPortsAddressesAndFlags) {
  const auto hosts = ParseHostfile(
      "# the cluster\n"
      "ops@head:2222 scheduler servers=1   # the head node\n"
      "\n"
      "gpu1 workers=2 address=10.0.0.7 --train=/mnt/local/train\n"
      "gpu2 servers=1 workers=2\n",
      "hosts.txt");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].ssh_target, "ops@head");
  EXPECT_EQ(hosts[0].host, "head");
  EXPECT_EQ(hosts[0].ssh_port, 2222);
  EXPECT_TRUE(hosts[0].scheduler);
  EXPECT_EQ(hosts[0].servers, 1);
  EXPECT_EQ(hosts[0].address, "head");
  EXPECT_EQ(hosts[1].ssh_port, 0);
  EXPECT_EQ(hosts[1].workers, 2);
  EXPECT_EQ(hosts[1].address, "10.0.0.7");
  EXPECT_EQ(hosts[1].flags, std::vector<std::string>{"--train=/mnt/local/train"});
  EXPECT_EQ(hosts[1].line, 4);
  EXPECT_FALSE(hosts[2].scheduler);
}

TEST(Hostfile, NamesTheLineOfAMistake) {
  EXPECT_TRUE(Contains(ErrorOf([] { ParseHostfile("a scheduler servers=1\nb worker=2\n", "h"); }),
                       "h:2: 'worker=2' is not"));
  EXPECT_TRUE(Contains(ErrorOf([] { ParseHostfile("a:ssh scheduler workers=1 servers=1\n", "h"); }),
                       "h:1: ssh port 'ssh' is not a count"));
  EXPECT_TRUE(
      Contains(ErrorOf([] { ParseHostfile("a scheduler\nb\n", "h"); }), "h:2: b runs no role"));
}

TEST(Hostfile, NeedsOneSchedulerAServerAndAWorker) {
  EXPECT_TRUE(Contains(ErrorOf([] { ParseHostfile("a servers=1 workers=1\n", "h"); }),
                       "0 hosts run the scheduler"));
  EXPECT_TRUE(Contains(
      ErrorOf([] { ParseHostfile("a scheduler servers=1 workers=1\nb scheduler\n", "h"); }),
      "2 hosts run the scheduler"));
  EXPECT_TRUE(Contains(ErrorOf([] { ParseHostfile("a scheduler servers=2\n", "h"); }),
                       "at least one server and one worker"));
}

TEST(ShellQuote, LeavesPlainWordsAndQuotesTheRest) {
  EXPECT_EQ(ShellQuote("--train=/data/x.libsvm"), "--train=/data/x.libsvm");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME;rm"), "'$HOME;rm'");
  EXPECT_EQ(ShellQuote(""), "''");
}

std::map<std::string, std::string> SlurmEnv(int task, int tasks) {
  return {{"SLURM_PROCID", std::to_string(task)},
          {"SLURM_NTASKS", std::to_string(tasks)},
          {"SLURM_JOB_ID", "123"},
          {"SLURM_NODEID", "0"}};
}

TEST(SlurmTask, TaskZeroIsTheSchedulerThenServersThenWorkers) {
  const std::vector<std::string> hosts = {"node1", "node2"};
  auto task = ResolveSlurmTask(SlurmEnv(0, 5), 2, 0, hosts, "10.0.0.1");
  EXPECT_EQ(task.role, "scheduler");
  EXPECT_EQ(task.servers, 2);
  EXPECT_EQ(task.workers, 2);
  EXPECT_EQ(task.scheduler, "10.0.0.1:20123");  // derived from the job id
  EXPECT_TRUE(task.port_derived);
  task = ResolveSlurmTask(SlurmEnv(2, 5), 2, 9000, hosts, "10.0.0.1");
  EXPECT_EQ(task.role, "server");
  EXPECT_EQ(task.rank, 1);
  EXPECT_EQ(task.scheduler, "10.0.0.1:9000");
  EXPECT_FALSE(task.port_derived);
  task = ResolveSlurmTask(SlurmEnv(4, 5), 2, 0, hosts, "10.0.0.1");
  EXPECT_EQ(task.role, "worker");
  EXPECT_EQ(task.rank, 1);
  auto env = SlurmEnv(1, 3);
  env["SLURM_JOB_ID"] = "48123457";  // large job ids too
  EXPECT_EQ(ResolveSlurmTask(env, 1, 0, hosts, "n").scheduler, "n:23457");
  // Every derived port is below Linux's default ephemeral range (32768..).
  env["SLURM_JOB_ID"] = "11999";
  EXPECT_EQ(ResolveSlurmTask(env, 1, 0, hosts, "n").scheduler, "n:31999");
  env["SLURM_JOB_ID"] = "12000";
  EXPECT_EQ(ResolveSlurmTask(env, 1, 0, hosts, "n").scheduler, "n:20000");
}

TEST(SlurmTask, RefusesTooFewTasksAndMissingVariables) {
  EXPECT_TRUE(Contains(ErrorOf([] { ResolveSlurmTask(SlurmEnv(0, 2), 1, 0, {"n"}, "n"); }),
                       "the step has 2 task(s)"));
  EXPECT_TRUE(
      Contains(ErrorOf([] { ResolveSlurmTask({}, 1, 0, {"n"}, "n"); }), "SLURM_PROCID is not set"));
}

}  // namespace
}  // namespace keel
