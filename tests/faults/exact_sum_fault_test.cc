// `keel launch --job=exact_sum` under a fault schedule: a replicated server
// killed, a worker killed and started again, and 1% of every node's data
// messages dropped, and still no update lost or applied twice; and a server
// without replicas killed and started again, whose range really loses its
// sums, which the job finds and names.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "base/files.h"
#include "base/json_reader.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

// The faults below come at fixed times after the job's start (its first
// progress record; a fault timed from the launch could come before a loaded
// machine has even formed the cluster): each job's workers wait this long (or
// as said) after each push, so that the job outlasts its faults however fast
// the pushes are (e.g. 24,000 pushes at 0.3 ms take at least 7.2 s).
const std::string kPace = "0.3";

class ExactSumFaults : public testing::TempFolderTest {
 protected:
  // An exact_sum job of `epochs` epochs of `minibatches` minibatches on 2
  // servers (one backup per range) and 2 workers, heartbeats timing out after
  // 1 s, under `faults` (`exit`): it must end, and succeed, the event log must
  // hold one `event`, and the membership log no leave.
  void RunWithoutLeaves(int epochs, int minibatches, const std::string& faults,
                        const std::string& event, testing::Exit* exit) {
    const std::string log = folder_ + "/events.jsonl";
    const std::string membership = folder_ + "/membership.jsonl";
    *exit = testing::Run(
        {KeelBinary(), "launch", "--servers=2", "--workers=2", "--replication=1", "--job=exact_sum",
         "--epochs=" + std::to_string(epochs),
         "--exact_sum_minibatches=" + std::to_string(minibatches),
         "--exact_sum_push_interval_ms=" + kPace, "--heartbeat_interval=0.25",
         "--heartbeat_timeout=1", "--model_dir=" + folder_ + "/run",
         "--membership_log=" + membership, "--faults=" + faults, "--event_log=" + log},
        240);
    ASSERT_TRUE(exit->finished) << exit->output;
    EXPECT_EQ(exit->code, 0) << exit->output;
    ASSERT_EQ(testing::EventsNamed(log, event).size(), 1u) << exit->output;
    EXPECT_TRUE(testing::EventsNamed(membership, "leave").empty())
        << testing::ReadFileOrEmpty(membership);
  }
};

// Whether the membership log records a node joining as `role` `rank`'s replacement.
bool Replaced(const std::string& membership, const std::string& role, int rank) {
  for (const auto& join : testing::EventsNamed(membership, "join")) {
    if (join.count("replaces") && join.at("replaces") == "true" && join.at("role") == role &&
        join.at("rank") == std::to_string(rank)) {
      return true;
    }
  }
  return false;
}

// An exact_sum job (closed connections unwatched, so a restarted node's old
// process stays a member until the heartbeat timeout) under `faults`, which
// restart the scheduler around a restart of `role` `rank`: the job finishes
// with no wrong sum, and the new node replaced its rank's holder.
void ExpectReplacedAcrossSchedulerRestarts(const std::string& folder, const std::string& faults,
                                           const std::string& role, int rank) {
  const std::string membership = folder + "/membership.jsonl";
  const auto exit =
      testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2", "--replication=1",
                    "--job=exact_sum", "--epochs=6", "--exact_sum_minibatches=7000",
                    "--exact_sum_push_interval_ms=0.25",
                    "--heartbeat_interval=0.25", "--heartbeat_timeout=2",
                    "--detect_closed_connections=false", "--model_dir=" + folder + "/run",
                    "--membership_log=" + membership, "--timeout=80", "--faults=" + faults},
                   90);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, " 0 violation(s) (0 lost, 0 doubled)")) << exit.output;
  EXPECT_TRUE(Replaced(membership, role, rank)) << testing::ReadFileOrEmpty(membership);
  EXPECT_TRUE(Contains(exit.output, "registered anew with this restarted scheduler"))
      << exit.output;
  EXPECT_FALSE(Contains(exit.output, "the restarted scheduler refused this node")) << exit.output;
}

TEST_F(ExactSumFaults, AKilledServerAndARestartedWorkerLoseAndDoubleNoUpdate) {
  const std::string model_dir = folder_ + "/run";
  const std::string log = folder_ + "/events.jsonl";
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--replication=1", "--job=exact_sum",
       "--epochs=4", "--exact_sum_minibatches=10000", "--exact_sum_push_interval_ms=0.2",
       "--heartbeat_timeout=3", "--model_dir=" + model_dir, "--request_timeout_ms=100",
       "--drop_rate=0.01", "--faults=kill:server:1@start+2s,restart:worker:0@start+3s",
       "--event_log=" + log},
      240);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  // The faults hit the job while it pushed (80,000 pushes take well over 4 s,
  // drops or not; not after it ended): the scheduler
  // promoted server 1's backup, and worker 0's replacement took over its rank.
  EXPECT_EQ(testing::EventsNamed(log, "kill").size(), 1u) << exit.output;
  EXPECT_EQ(testing::EventsNamed(log, "restart").size(), 1u) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "backup server 0 is promoted to primary")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "worker 0 takes over its rank")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "0 violation(s) (0 lost, 0 doubled)")) << exit.output;
  const auto report = testing::ParseJsonObject(ReadFile(model_dir + "/exact_sum.json"));
  EXPECT_EQ(report.at("ok"), "true");
  EXPECT_EQ(report.at("violations"), "0");
  EXPECT_EQ(report.at("keys_checked"), "4096");
}

// The scheduler stopped (SIGSTOP) for longer than the heartbeat timeout: the
// heartbeats sent meanwhile wait unread, so when it runs again no node may
// count as silent. (It used to remove every node at once, both servers of a
// replicated range among them, and the range started over empty.)
TEST_F(ExactSumFaults, ASchedulerStoppedPastTheHeartbeatTimeoutRemovesNoNode) {
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(
      RunWithoutLeaves(4, 6000, "stop:scheduler@start+1s+2.5s", "continue", &exit));
  EXPECT_TRUE(Contains(exit.output, "the scheduler did not run for")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "0 violation(s) (0 lost, 0 doubled)")) << exit.output;
}

// The scheduler cut off from every node past the heartbeat timeout (a
// partition: its packets dropped, its connections open) hears from none of
// them and removes none. (It used to remove all of them: both replicas of
// every range, whose keys started over empty: chaos seeds 208, 211-213.)
TEST_F(ExactSumFaults, ASchedulerPartitionedFromEveryNodeRemovesNone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a partition uses cgroups and iptables)";
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(RunWithoutLeaves(
      8, 2500, "partition:scheduler|server:0,server:1,worker:0,worker:1@start+1s+2.5s", "heal",
      &exit));
  EXPECT_TRUE(Contains(exit.output, "the scheduler has not heard from most of its nodes"))
      << exit.output;
  EXPECT_TRUE(Contains(exit.output, "0 violation(s) (0 lost, 0 doubled)")) << exit.output;
}

// Chaos seed 100: a worker restarted and, before the scheduler found its old
// process gone, the scheduler restarted. The restarted scheduler learns the
// old worker's rank from the view the others bring back; the new worker
// replaces it at the job's current epoch. (It used to join as a fresh worker
// at epoch 1 while the others were at epoch 3, and the job waited at a
// barrier until --timeout.) Closed connections are not watched, so the old
// worker stays a member until the heartbeat timeout, past the restart.
TEST_F(ExactSumFaults, AWorkerReplacedAcrossASchedulerRestartResumesAtTheJobsEpoch) {
  ExpectReplacedAcrossSchedulerRestarts(
      folder_, "restart:worker:1@start+3s,restart:scheduler@start+4.5s", "worker", 1);
}

// Chaos seed 102: the scheduler restarted, a server restarted, and the
// scheduler restarted again before the server's old process was found
// silent. The new server replaces its rank's old one in the view the others
// bring back, and copies its ranges from the live replicas. (It used to
// register as a new node holding range 0 empty: every key of range 0 lost
// updates.)
TEST_F(ExactSumFaults, AServerReplacedAcrossSchedulerRestartsCopiesItsRanges) {
  ExpectReplacedAcrossSchedulerRestarts(
      folder_, "restart:scheduler@start+2s,restart:server:0@start+3.5s,restart:scheduler@start+5s",
      "server", 0);
}

// A worker that dies after registering but before the cluster's first view
// is logged as silent then; once the view is out it must leave it, so that
// its replacement can take the rank. (It used to stay a member for ever: the
// replacement was refused, "WORKER rank 0 is taken", and the job hung.)
TEST_F(ExactSumFaults, AWorkerDeadBeforeTheFirstViewLeavesItAndItsReplacementFinishesTheJob) {
  testing::Processes processes;
  const std::string port_file = folder_ + "/port";
  const std::string membership = folder_ + "/membership.jsonl";
  const pid_t scheduler =
      processes.Start({KeelBinary(), "scheduler", "--bind=127.0.0.1", "--port_file=" + port_file,
                       "--num_servers=1", "--num_workers=2", "--heartbeat_interval=0.2",
                       "--heartbeat_timeout=1", "--membership_log=" + membership});
  const std::string port = testing::WaitForPortFile(port_file, 30);
  ASSERT_FALSE(port.empty()) << processes.Output(scheduler);
  auto role = [&](const std::string& name, int rank) {
    return processes.Start({KeelBinary(), name, "--scheduler=127.0.0.1:" + port, "--bind=127.0.0.1",
                            "--rank=" + std::to_string(rank), "--job=exact_sum", "--epochs=2",
                            "--exact_sum_minibatches=50", "--heartbeat_interval=0.2",
                            "--model_dir=" + folder_ + "/run"});
  };
  role("server", 0);
  const pid_t first = role("worker", 0);
  auto joins = [&] { return testing::EventsNamed(membership, "join").size(); };
  ASSERT_TRUE(testing::WaitFor([&] { return joins() == 2; }, 60)) << processes.Output(scheduler);
  kill(first, SIGKILL);
  processes.Wait(first, 10);
  ASSERT_TRUE(
      testing::WaitFor([&] { return Contains(processes.Output(scheduler), "WORKER 0 (node"); }, 30))
      << processes.Output(scheduler);
  role("worker", 1);  // the cluster is complete: the first view goes out
  ASSERT_TRUE(
      testing::WaitFor([&] { return !testing::EventsNamed(membership, "leave").empty(); }, 30))
      << testing::ReadFileOrEmpty(membership);
  EXPECT_EQ(testing::EventsNamed(membership, "leave")[0].at("role"), "worker");
  EXPECT_EQ(testing::EventsNamed(membership, "leave")[0].at("rank"), "0");
  const pid_t replacement = role("worker", 0);
  const testing::Exit end = processes.Wait(scheduler, 120);
  EXPECT_TRUE(end.finished) << end.output;
  EXPECT_EQ(end.code, 0) << end.output;
  EXPECT_TRUE(Contains(processes.Output(replacement), "0 violation(s)"))
      << processes.Output(replacement);
}

// No replicas and no checkpoint: server 1's range starts over empty when it
// is started again. The scheduler announces the loss the moment the server
// leaves; without replicas that is what the job was promised (exit status 0,
// as before the announcement), and the check finds the lost sums in range 1
// alone, all announced.
TEST_F(ExactSumFaults, AServerRestartedWithoutReplicasLosesItsRangeAndTheJobSaysSo) {
  const std::string model_dir = folder_ + "/run";
  const std::string log = folder_ + "/events.jsonl";
  const std::string membership = folder_ + "/membership.jsonl";
  // The pushes take far longer than the 4 s from the job's start to the fault.
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=exact_sum", "--epochs=4",
       "--exact_sum_minibatches=10000", "--exact_sum_push_interval_ms=0.25",
       "--model_dir=" + model_dir, "--heartbeat_timeout=3", "--faults=restart:server:1@start+4s",
       "--event_log=" + log, "--membership_log=" + membership},
      240);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  ASSERT_EQ(testing::EventsNamed(log, "restart").size(), 1u) << exit.output;
  const auto lost = testing::EventsNamed(membership, "range_lost");
  ASSERT_EQ(lost.size(), 1u) << testing::ReadFileOrEmpty(membership);
  EXPECT_EQ(lost[0].at("range"), "1");
  EXPECT_TRUE(Contains(exit.output, "key range(s) 1 lost every replica")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--replication=0 keeps no backup")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "they start over from their initial values")) << exit.output;
  const auto report = testing::ParseJsonObject(ReadFile(model_dir + "/exact_sum.json"));
  EXPECT_EQ(report.at("ok"), "true");
  EXPECT_EQ(report.at("doubled"), "0");
  EXPECT_EQ(report.at("lost"), "0");
  EXPECT_NE(report.at("announced_lost"), "0");
  // Every lost key is in range 1.
  EXPECT_TRUE(Contains(report.at("ranges"),
                       "\"range\":0,\"begin\":\"0x0000000000000000\","
                       "\"last\":\"0x7ffffffffffffffe\",\"primary\":0,"
                       "\"keys_checked\":2017,\"lost\":0,\"doubled\":0,\"announced_lost\":false"))
      << report.at("ranges");
  EXPECT_TRUE(Contains(exit.output, "(announced lost)")) << exit.output;
}

// Two failures on one chain, in the order a chaos schedule found: server 1
// (range 0's backup, range 1's primary) is stopped past the heartbeat timeout
// and removed, so server 2 is left range 1's only replica; server 2 is then
// killed and started again, empty; server 1 continues and rejoins. One backup
// cannot cover two failures: range 1 lost every replica, and the scheduler
// says so at once (the membership log, the view, the exit status). The empty
// replacement waits (--rebuild_wait) for server 1, which comes back with the
// copy it kept: the range is rebuilt from it, and only the pushes server 2
// acknowledged after server 1 left are reported lost, with their count. The
// check finds wrong sums only inside range 1, counted as announced, and they
// lack far less than a rebuild from nothing would (it used to start over from
// initial values, after saying "nothing was lost").
TEST_F(ExactSumFaults, TwoFailuresOnOneChainRebuildTheRangeFromTheRemovedServersCopy) {
  const std::string model_dir = folder_ + "/run";
  const std::string membership = folder_ + "/membership.jsonl";
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=3", "--workers=2", "--replication=1", "--job=exact_sum",
       "--epochs=4", "--exact_sum_minibatches=10000", "--exact_sum_push_interval_ms=0.25",
       "--heartbeat_interval=0.2", "--heartbeat_timeout=1", "--model_dir=" + model_dir,
       "--membership_log=" + membership,
       "--faults=stop:server:1@start+2s+3s,kill:server:2@start+3.8s,restart:server:2@start+4.2s"},
      240);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 3) << exit.output;  // kDataLostExitStatus
  const auto lost = testing::EventsNamed(membership, "range_lost");
  ASSERT_EQ(lost.size(), 1u) << testing::ReadFileOrEmpty(membership);
  EXPECT_EQ(lost[0].at("range"), "1");
  EXPECT_EQ(lost[0].at("rank"), "2");
  // What the range held by server 2's last report: the pushes of the 2 s
  // from the job's start to the backup's stop, and more.
  const uint64_t reported = std::stoull(lost[0].at("pushes_at_last_report"));
  EXPECT_GT(reported, 1000u) << testing::ReadFileOrEmpty(membership);
  EXPECT_TRUE(Contains(exit.output, "key range(s) 1 lost every replica")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "server 2 waits: key range 1 lost every replica"))
      << exit.output;
  const auto rebuilt = testing::EventsNamed(membership, "range_rebuilt");
  ASSERT_EQ(rebuilt.size(), 1u) << testing::ReadFileOrEmpty(membership);
  EXPECT_EQ(rebuilt[0].at("range"), "1");
  EXPECT_EQ(rebuilt[0].at("rank"), "1");
  EXPECT_EQ(rebuilt[0].at("from"), "held_copy");
  const uint64_t in_copy = std::stoull(rebuilt[0].at("pushes_in_copy"));
  const uint64_t missing_pushes = std::stoull(rebuilt[0].at("pushes_lost_at_least"));
  EXPECT_EQ(missing_pushes, reported - in_copy);
  EXPECT_GT(missing_pushes, 0u) << "server 2 acknowledged pushes after server 1 left";
  EXPECT_LT(missing_pushes, in_copy) << "the copy held most of the range";
  EXPECT_TRUE(Contains(exit.output, "key range 1 is rebuilt from the copy server 1 kept"))
      << exit.output;
  EXPECT_TRUE(Contains(exit.output, "job lost data")) << exit.output;
  // The check: wrong sums in range 1 only, all of them announced.
  const auto report = testing::ParseJsonObject(ReadFile(model_dir + "/exact_sum.json"));
  EXPECT_EQ(report.at("ok"), "true") << report.at("ranges");
  EXPECT_EQ(report.at("lost"), "0");
  EXPECT_EQ(report.at("doubled"), "0");
  EXPECT_NE(report.at("announced_lost"), "0");
  const JsonValue json = ParseJson(ReadFile(model_dir + "/exact_sum.json"), "exact_sum.json");
  const std::vector<JsonValue>& ranges = json.Find("ranges")->AsArray();
  ASSERT_EQ(ranges.size(), 3u) << report.at("ranges");
  EXPECT_TRUE(ranges[1].Find("announced_lost")->AsBool());
  // Each push reaches every range: a rebuild from nothing would lack at
  // least the share of the job's pushes server 2 had reported; the copy's
  // rebuild lacks what came after it, and what server 2 took after its report.
  const double lacking =
      ranges[1].Find("missing")->AsNumber() / ranges[1].Find("expected")->AsNumber();
  const double acknowledged = json.Find("pushes")->Find("acknowledged")->AsNumber();
  EXPECT_GT(lacking, 0) << report.at("ranges");
  EXPECT_LT(lacking, 0.6 * static_cast<double>(reported) / acknowledged) << report.at("ranges");
}

// Without replicas, a server stopped past the heartbeat timeout loses its
// range when it is removed; when it continues it comes back with the copy it
// kept, and the range is rebuilt from it: nothing it acknowledged is missing
// (it was paused), and a push it applied after the pause and its worker sends
// again is not applied twice (the copy keeps the at-most-once records).
TEST_F(ExactSumFaults, AStoppedServerWithoutReplicasComesBackWithItsRange) {
  const std::string model_dir = folder_ + "/run";
  const std::string membership = folder_ + "/membership.jsonl";
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=exact_sum", "--epochs=4",
       "--exact_sum_minibatches=6000", "--exact_sum_push_interval_ms=0.35",
       "--heartbeat_interval=0.2", "--heartbeat_timeout=1", "--model_dir=" + model_dir,
       "--membership_log=" + membership, "--faults=stop:server:1@start+2s+2s"},
      240);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;  // no replicas: the loss was the promise
  const auto lost = testing::EventsNamed(membership, "range_lost");
  ASSERT_EQ(lost.size(), 1u) << testing::ReadFileOrEmpty(membership);
  EXPECT_EQ(lost[0].at("range"), "1");
  const auto rebuilt = testing::EventsNamed(membership, "range_rebuilt");
  ASSERT_EQ(rebuilt.size(), 1u) << testing::ReadFileOrEmpty(membership);
  EXPECT_EQ(rebuilt[0].at("rank"), "1");
  EXPECT_EQ(rebuilt[0].at("from"), "held_copy");
  EXPECT_EQ(rebuilt[0].at("pushes_lost_at_least"), "0");
  const auto report = testing::ParseJsonObject(ReadFile(model_dir + "/exact_sum.json"));
  EXPECT_EQ(report.at("ok"), "true") << report.at("ranges");
  EXPECT_EQ(report.at("doubled"), "0") << report.at("ranges");
  EXPECT_EQ(report.at("lost"), "0") << report.at("ranges");
  EXPECT_EQ(report.at("announced_lost"), "0") << report.at("ranges");
}

// Live resharding under the exact-sum job: two servers join (a quarter of
// the 8 key ranges move to each), then one of them and server 0 are drained
// (their ranges move to the others), while both workers push; every update
// is applied exactly once on the two servers left.
void ExpectExactSumsAcrossJoinsAndDrains(const std::string& folder, int replication) {
  const std::string model_dir = folder + "/run";
  const std::string log = folder + "/events.jsonl";
  const std::string membership = folder + "/membership.jsonl";
  const auto exit = testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2",
                                  "--replication=" + std::to_string(replication), "--key_ranges=8",
                                  "--job=exact_sum", "--epochs=4", "--exact_sum_minibatches=10000",
                                  "--exact_sum_push_interval_ms=0.25", "--model_dir=" + model_dir,
                                  "--faults=join:server@start+1s,join:server@start+1s,drain:server:"
                                  "3@start+3s,drain:server:0@start+4s",
                                  "--event_log=" + log, "--membership_log=" + membership},
                                 240);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_EQ(testing::EventsNamed(log, "join").size(), 2u) << exit.output;
  EXPECT_EQ(testing::EventsNamed(log, "drain").size(), 2u) << exit.output;
  // Both drains ended (the servers left the cluster) while the job ran.
  size_t drained = 0;
  for (const auto& leave : testing::EventsNamed(membership, "leave")) {
    drained += leave.count("reason") && leave.at("reason") == "drained";
  }
  EXPECT_EQ(drained, 2u) << testing::ReadFileOrEmpty(membership);
  EXPECT_TRUE(testing::EventsNamed(log, "not_fired").empty()) << exit.output;
  EXPECT_TRUE(Contains(exit.output, " 0 violation(s) (0 lost, 0 doubled)")) << exit.output;
  const auto report = testing::ParseJsonObject(ReadFile(model_dir + "/exact_sum.json"));
  EXPECT_EQ(report.at("ok"), "true");
  EXPECT_EQ(report.at("keys_checked"), "4096");
}

TEST_F(ExactSumFaults, ServersJoinedAndDrainedMidJobLoseAndDoubleNoUpdate) {
  ExpectExactSumsAcrossJoinsAndDrains(folder_, 0);
}

TEST_F(ExactSumFaults, ReplicatedServersJoinedAndDrainedMidJobLoseAndDoubleNoUpdate) {
  ExpectExactSumsAcrossJoinsAndDrains(folder_, 1);
}

}  // namespace
}  // namespace keel
