// `keel launch --faults=...`: a training job that is stopped and loses
// messages still finishes, and the event log says what happened, in order; no
// fault fires after the job's end; random restarts bring back what was killed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

using Event = std::map<std::string, std::string>;  // a JSON line's members

// Member `name` of `event`, or "" if it has none.
std::string Member(const Event& event, const std::string& name) {
  const auto found = event.find(name);
  return found == event.end() ? "" : found->second;
}

// Index of the first event from index `from` on named `name` for `role`
// `rank` ("": any), or -1.
int Find(const std::vector<Event>& events, const std::string& name, const std::string& role = "",
         const std::string& rank = "", size_t from = 0) {
  for (size_t i = from; i < events.size(); ++i) {
    const Event& event = events[i];
    if (Member(event, "event") == name && (role.empty() || Member(event, "role") == role) &&
        (rank.empty() || Member(event, "rank") == rank)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

double TimeOf(const Event& event) { return std::stod(event.at("t")); }

// A job of `epochs` epochs with replicas on 2 servers and 2 workers, `faults`
// its schedule; the event log goes to events.jsonl and the membership log to
// membership.jsonl in `folder`. Bounded by `timeout_s`.
testing::Exit LaunchReplicatedJob(const std::string& folder, int epochs, const std::string& faults,
                                  double timeout_s, const std::vector<std::string>& more = {}) {
  std::vector<std::string> argv = {
      KeelBinary(), "launch", "--servers=2", "--workers=2", "--replication=1",
      "--job=linear_learner", "--epochs=" + std::to_string(epochs), "--mini_batch_size=100",
      "--early_stopping_patience=100", "--train=" + folder + "/train",
      "--validation=" + folder + "/validation", "--model_dir=" + folder + "/model",
      "--heartbeat_interval=0.2", "--heartbeat_timeout=1", "--request_timeout_ms=200",
      "--faults=" + faults, "--event_log=" + folder + "/events.jsonl",
      "--membership_log=" + folder + "/membership.jsonl", "--verbose"};
  argv.insert(argv.end(), more.begin(), more.end());
  return testing::Run(argv, timeout_s);
}

// A job of one worker at staleness 0 on 2 servers (3 epochs, Adam), reading
// the linear model's data in `folder`; the caller adds its model folder,
// replicas and faults.
std::vector<std::string> OneWorkerJob(const std::string& folder) {
  return {KeelBinary(),
          "launch",
          "--servers=2",
          "--workers=1",
          "--job=linear_learner",
          "--epochs=3",
          "--mini_batch_size=100",
          "--optimizer=adam",
          "--early_stopping_patience=100",
          "--keep_best_epoch=false",
          "--staleness=0",
          "--train=" + folder + "/train",
          "--validation=" + folder + "/validation",
          "--minloglevel=1"};
}

class FaultLaunch : public testing::TempFolderTest {
 protected:
  // A linear model's data in folder_: 200000 rows over 5000 features, the
  // training channel in two files.
  void GenerateData() {
    const auto data =
        testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=200000", "--features=5000",
                      "--nnz=10", "--seed=7", "--train_files=2", "--out=" + folder_},
                     60);
    ASSERT_TRUE(data.finished && data.code == 0) << data.output;
  }

  // A linear model's data in folder_: 200000 rows over 50000 features.
  void GenerateWideData() {
    const auto data = testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=200000",
                                    "--features=50000", "--nnz=10", "--seed=7", "--out=" + folder_},
                                   60);
    ASSERT_TRUE(data.finished && data.code == 0) << data.output;
  }

  // GenerateData, then LaunchReplicatedJob in folder_ (`exit`), which must
  // end, and succeed.
  void RunReplicatedJob(int epochs, const std::string& faults, double timeout_s,
                        testing::Exit* exit, const std::vector<std::string>& more = {}) {
    ASSERT_NO_FATAL_FAILURE(GenerateData());
    *exit = LaunchReplicatedJob(folder_, epochs, faults, timeout_s, more);
    ASSERT_TRUE(exit->finished) << exit->output;
    EXPECT_EQ(exit->code, 0) << exit->output;
  }

  // The event log of LaunchReplicatedJob, as text and as events.
  std::string EventsText() const { return testing::ReadFileOrEmpty(folder_ + "/events.jsonl"); }
  std::vector<Event> Events() const { return testing::ReadJsonLines(folder_ + "/events.jsonl"); }

  // Every one of `epochs` epochs of the job that printed `exit` read every
  // example of the training channel.
  void ExpectEveryEpochReadEveryExample(const testing::Exit& exit, int epochs) {
    const long examples = static_cast<long>(testing::CountLinesInFolder(folder_ + "/train"));
    EXPECT_EQ(testing::ExamplesPerEpoch(exit.output), std::vector<long>(epochs, examples))
        << exit.output;
  }
};

TEST_F(FaultLaunch, AJobStoppedAndLosingMessagesFinishesAndLogsItsFaultsInOrder) {
  const auto data =
      testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=20000", "--features=2000",
                    "--nnz=10", "--seed=7", "--train_files=2", "--out=" + folder_},
                   60);
  ASSERT_TRUE(data.finished && data.code == 0) << data.output;
  const std::string log = folder_ + "/events.jsonl";
  const auto exit = testing::Run(
      // Minibatches of 20 make the job last seconds, so the stop half a second
      // after its start finds it running even when drops cost little (resends
      // follow the round trip).
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=linear_learner", "--epochs=6",
       "--mini_batch_size=20", "--train=" + folder_ + "/train",
       "--validation=" + folder_ + "/validation", "--model_dir=" + folder_ + "/model",
       "--minloglevel=1", "--request_timeout_ms=200",
       "--faults=stop:worker:0@start+0.5s+1s,drop:server:*=0.01,drop:worker:*=0.01",
       "--event_log=" + log},
      180);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "[faults] {\"t\": ")) << exit.output;  // echoed

  const std::vector<Event> events = testing::ReadJsonLines(log);
  ASSERT_FALSE(events.empty());
  const std::string text = testing::ReadFileOrEmpty(log);
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_LE(TimeOf(events[i - 1]), TimeOf(events[i])) << text;
  }
  const int drop = Find(events, "drop", "server");
  const int started = Find(events, "job_started");
  const int start = Find(events, "start", "worker", "0");
  const int stop = Find(events, "stop", "worker", "0");
  const int resume = Find(events, "continue", "worker", "0");
  const int exited = Find(events, "exit", "worker", "0");
  ASSERT_GE(drop, 0) << exit.output;
  ASSERT_GE(started, 0) << exit.output;
  ASSERT_GE(start, 0) << exit.output;
  ASSERT_GE(stop, 0) << exit.output;
  ASSERT_GE(resume, 0) << exit.output;
  ASSERT_GE(exited, 0) << exit.output;
  EXPECT_LT(drop, start);
  EXPECT_LT(start, started);
  EXPECT_LT(started, stop);
  EXPECT_LT(stop, resume);
  EXPECT_LT(resume, exited);
  // The log's times have 3 decimals: two of them may differ by up to 1 ms
  // less than the times they round.
  constexpr double kRounding = 0.001;
  EXPECT_GE(TimeOf(events[stop]) - TimeOf(events[started]), 0.5 - kRounding);
  EXPECT_GE(TimeOf(events[resume]) - TimeOf(events[stop]), 1.0 - kRounding);
  EXPECT_EQ(events[exited].at("status"), "exited with status 0") << text;
  EXPECT_EQ(events.back().at("event"), "end") << text;
  EXPECT_EQ(events.back().at("code"), "0") << text;
}

TEST_F(FaultLaunch, AReplicatedJobSurvivesAServerKilledAndRestartedByTheSchedule) {
  const std::string membership = folder_ + "/membership.jsonl";
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(
      RunReplicatedJob(10, "kill:server:1@start+1s,restart:server:1@start+2s", 180, &exit));
  const std::vector<Event> events = Events();
  const int kill = Find(events, "kill", "server", "1");
  const int restart = Find(events, "restart", "server", "1");
  ASSERT_GE(kill, 0) << exit.output;
  ASSERT_GE(restart, 0) << exit.output;
  EXPECT_LT(kill, restart);
  // Its backup took over, and the restarted server took its rank back and
  // copied its ranges back: it is in both chains again.
  const std::string members = testing::ReadFileOrEmpty(membership);
  const std::vector<Event> changes = testing::ReadJsonLines(membership);
  const int left = Find(changes, "leave", "server", "1");
  ASSERT_GE(left, 0) << members;
  EXPECT_EQ(changes[left].at("promoted"), "[{\"range\": 1, \"primary\": 0}]") << members;
  const int back = Find(changes, "join", "server", "1", left);
  ASSERT_GE(back, 0) << members;
  EXPECT_EQ(changes[back].at("replaces"), "true") << members;
  const auto views = testing::EventsNamed(membership, "view");
  ASSERT_FALSE(views.empty()) << members;
  EXPECT_EQ(views.back().at("ranges"), "[[0, 1], [0, 1]]") << members;
  // The view does not say when the copy is done; the server's log does.
  EXPECT_TRUE(Contains(exit.output, "this server holds a replica of it again")) << exit.output;
  // Every epoch read every example.
  ExpectEveryEpochReadEveryExample(exit, 10);
}

TEST_F(FaultLaunch, ARestartDueAfterTheJobsEndIsNotFiredAndTheLauncherReturnsPromptly) {
  // (24 epochs: training got faster, and 8 ended before a stop at 4 s.)
  // Server 1 is frozen 3 s after the job started (timed from the launch, a
  // loaded machine could freeze it before it registered) for 900 s: its
  // backup takes over and the job ends long before the restart is due, with
  // server 1 still stopped. The restart is timed from the launch: it is meant
  // for after the job's end. The bound is far below 500 s, far above the job.
  const std::string restart = "restart:server:1@500s";
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(
      RunReplicatedJob(24, "stop:server:1@start+3s+900s," + restart, 240, &exit));
  const std::string text = EventsText();
  const std::vector<Event> events = Events();
  const int stop = Find(events, "stop", "server", "1");
  const int over = Find(events, "job_over");
  ASSERT_GE(stop, 0) << text;
  ASSERT_GT(over, stop) << text;
  EXPECT_NE(Member(events[over], "reason"), "") << text;
  EXPECT_EQ(Find(events, "restart"), -1) << text;
  const int not_fired = Find(events, "not_fired", "", "", over);
  ASSERT_GE(not_fired, 0) << text;
  EXPECT_EQ(events[not_fired].at("spec"), restart) << text;
  EXPECT_EQ(events[not_fired].at("reason"), "the job was over") << text;
  EXPECT_EQ(events.back().at("event"), "end") << text;
  EXPECT_EQ(events.back().at("code"), "0") << text;
}

TEST_F(FaultLaunch, RandomRestartsBringBackAKilledServerAndTheJobFinishes) {
  const std::string random_restart = "restart:server:random@rate=1/s";
  // Long enough (about 8 s idle) for the random restarts to find server 1
  // down: with the default seed they fire at 0.4, 0.9, 1.4 and 3.8 s from the
  // launch, and on until the job ends. The kill comes a second after the job
  // started (timed from the launch, it could come before server 1 registered).
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(
      RunReplicatedJob(20, "kill:server:1@start+1s," + random_restart, 180, &exit));
  const std::string text = EventsText();
  const std::vector<Event> events = Events();
  const int kill = Find(events, "kill", "server", "1");
  ASSERT_GE(kill, 0) << text;
  // Before the kill no server was down: any firing then was skipped.
  const int restart = Find(events, "restart");
  ASSERT_GT(restart, kill) << text;
  EXPECT_EQ(events[restart].at("role"), "server") << text;
  EXPECT_EQ(events[restart].at("rank"), "1") << text;
  EXPECT_EQ(events[restart].at("spec"), random_restart) << text;
  for (int i = 0; i < kill; ++i) {
    if (Member(events[i], "event") != "skipped") continue;
    EXPECT_EQ(Member(events[i], "reason"), "no server is down") << text;
  }
  // The restarted server took its rank back: it is in both chains again.
  const std::string membership = folder_ + "/membership.jsonl";
  const std::vector<Event> changes = testing::ReadJsonLines(membership);
  const int left = Find(changes, "leave", "server", "1");
  ASSERT_GE(left, 0) << testing::ReadFileOrEmpty(membership);
  EXPECT_GE(Find(changes, "join", "server", "1", left), 0) << testing::ReadFileOrEmpty(membership);
  ExpectEveryEpochReadEveryExample(exit, 20);
}

// With checkpoints: the restarted scheduler takes over the job's store (the
// checkpoints there are its job's, not an earlier job's) and goes on writing
// to it, to the final checkpoint.
TEST_F(FaultLaunch, ASchedulerKilledAndRestartedByTheScheduleComesBackAndTheJobFinishes) {
  testing::Exit exit;
  const std::string store = "file://" + folder_ + "/ckpt";
  ASSERT_NO_FATAL_FAILURE(RunReplicatedJob(10, "kill:scheduler@start+1s,restart:scheduler@start+2s",
                                           180, &exit, {"--checkpoint_uri=" + store}));
  EXPECT_EQ(CheckpointStore(store).Latest(), CheckpointId(11, 0)) << exit.output;
  const std::string text = EventsText();
  const std::vector<Event> events = Events();
  const int kill = Find(events, "kill", "scheduler");
  const int restart = Find(events, "restart", "scheduler");
  const int over = Find(events, "job_over");
  ASSERT_GE(kill, 0) << text;
  ASSERT_GT(restart, kill) << text;
  // The kill did not end the job: it ended after the restart, with the job's own end.
  ASSERT_GT(over, restart) << text;
  EXPECT_NE(Member(events[over], "reason"), "") << text;
  ExpectEveryEpochReadEveryExample(exit, 10);
}

TEST_F(FaultLaunch, ASchedulerFaultIsRefusedWhenTheSchedulerIsNotTheLaunchers) {
  const auto exit =
      testing::Run({KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=linear_learner",
                    "--train=" + folder_, "--scheduler=127.0.0.1:9", "--faults=kill:scheduler@1s"},
                   30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output,
                       "'kill:scheduler@1s': the scheduler at 127.0.0.1:9 "
                       "(--scheduler) is not started by this launch"))
      << exit.output;
}

// A partition needs root (cgroups, iptables); without it the launch refuses
// the schedule (tests/faults/partition_test.cc). Worker 1 is cut from the scheduler
// and both servers for 4 s, longer than the heartbeat timeout.
TEST_F(FaultLaunch, AWorkerPartitionedFromEveryoneLeavesTheViewAndTheJobFinishesAfterTheHeal) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a partition uses cgroups and iptables)";
  const std::string partition = "partition:worker:1|scheduler,server:0,server:1@start+1s+4s";
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(RunReplicatedJob(10, partition, 240, &exit));
  const std::string text = EventsText();
  const std::vector<Event> events = Events();
  const int cut = Find(events, "partition");
  const int heal = Find(events, "heal");
  ASSERT_GE(cut, 0) << text;
  ASSERT_GT(heal, cut) << text;
  EXPECT_EQ(events[cut].at("a"), "[\"worker 1\"]") << text;
  EXPECT_EQ(events[cut].at("b"), "[\"scheduler\", \"server 0\", \"server 1\"]") << text;
  EXPECT_GE(TimeOf(events[heal]) - TimeOf(events[cut]), 4.0) << text;
  // Cut off, worker 1 sent no heartbeat the scheduler could hear: it left the view.
  const std::string membership = folder_ + "/membership.jsonl";
  const std::vector<Event> changes = testing::ReadJsonLines(membership);
  EXPECT_GE(Find(changes, "leave", "worker", "1"), 0) << testing::ReadFileOrEmpty(membership);
  // Every rule is gone after the heal and the launch's end.
  EXPECT_FALSE(Contains(testing::Run({"iptables", "-S", "OUTPUT"}, 30).output, "keel-launch-"));
}

TEST_F(FaultLaunch, ABadFaultSpecIsRefusedBeforeAnythingStarts) {
  const auto exit =
      testing::Run({KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=linear_learner",
                    "--train=" + folder_, "--faults=stop:worker:0@1s+1s,kill:worker:3@2s"},
                   30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--faults item 2 'kill:worker:3@2s': there is no worker 3"))
      << exit.output;
  EXPECT_FALSE(Contains(exit.output, "[scheduler]")) << exit.output;
}

// Delta checkpoints across a promotion: a replicated job (one worker) loses
// server 1 mid-job; its backup takes over, and the rows it now writes as
// primary were not tracked by it since the last checkpoint (it was a
// replica), so its next file is whole, and the chain starts again there.
// The final checkpoint's chain gives the job's final weights, bit for bit.
// One worker at staleness 0 computes the same weights whatever happens to the
// servers: a server killed under replication changes who serves, not what.
// Each pull waits for the pushes of its own key range and table, wherever
// the range has gone and however its pushes were sent again.
// Server 1 is killed a second after the job started training (start+1s):
// timed from the launch, a loaded machine could kill it before it registered,
// and then the cluster never forms.
TEST_F(FaultLaunch, AServerKilledUnderReplicationLeavesTheWeightsOfAFaultFreeRun) {
  ASSERT_NO_FATAL_FAILURE(GenerateWideData());
  std::vector<std::string> job = OneWorkerJob(folder_);
  job.insert(job.end(), {"--replication=1", "--heartbeat_interval=0.2", "--heartbeat_timeout=1",
                         "--request_timeout_ms=200"});
  std::vector<std::string> fault_free = job;
  fault_free.push_back("--model_dir=" + folder_ + "/fault_free");
  const auto clean = testing::Run(fault_free, 180);
  ASSERT_TRUE(clean.finished && clean.code == 0) << clean.output;
  const std::string log = folder_ + "/events.jsonl";
  std::vector<std::string> faulted = job;
  faulted.insert(faulted.end(), {"--model_dir=" + folder_ + "/faulted",
                                 "--faults=kill:server:1@start+1s", "--event_log=" + log});
  const auto run = testing::Run(faulted, 180);
  ASSERT_TRUE(run.finished && run.code == 0) << run.output;
  ASSERT_EQ(testing::EventsNamed(log, "kill").size(), 1u) << run.output;
  ASSERT_TRUE(Contains(run.output, "backup server 0 is promoted to primary")) << run.output;
  const std::string weights = testing::ReadFileOrEmpty(folder_ + "/fault_free/weights.bin");
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(testing::ReadFileOrEmpty(folder_ + "/faulted/weights.bin") == weights)
      << "the weights of the run with server 1 killed differ from the fault-free run's";
}

// The kill must come after a checkpoint was committed (else the first one
// after it starts the job's only chain): timed from the job's start (a kill
// timed from the launch can come before the server registered, and the
// cluster never forms); on a machine too slow for a checkpoint a second in,
// the job runs again with the kill later.
TEST_F(FaultLaunch, ADeltaChainStartsAgainAfterAPromotionAndRestoresTheJobsWeights) {
  ASSERT_NO_FATAL_FAILURE(GenerateWideData());
  std::vector<std::string> job = OneWorkerJob(folder_);
  job.push_back("--num_models=2");
  const std::string log = folder_ + "/events.jsonl";
  testing::Exit run;
  for (const char* kill_at : {"start+1s", "start+3s", "start+6s"}) {
    std::filesystem::remove_all(folder_ + "/ckpt");
    std::filesystem::remove_all(folder_ + "/faulted");
    std::filesystem::remove(log);
    std::vector<std::string> faulted = job;
    faulted.insert(faulted.end(),
                   {"--replication=1", "--model_dir=" + folder_ + "/faulted",
                    "--heartbeat_interval=0.2", "--heartbeat_timeout=1", "--request_timeout_ms=200",
                    "--checkpoint_uri=file://" + folder_ + "/ckpt", "--checkpoint_every=200",
                    "--checkpoint_delta", "--checkpoint_full_every=1000",
                    "--faults=kill:server:1@" + std::string(kill_at), "--event_log=" + log});
    run = testing::Run(faulted, 180);
    ASSERT_EQ(run.code, 0) << run.output;
    const auto kills = testing::EventsNamed(folder_ + "/faulted/timeline/launch.jsonl", "kill");
    const auto checkpoints =
        testing::EventsNamed(folder_ + "/faulted/timeline/scheduler.jsonl", "checkpoint");
    ASSERT_EQ(kills.size(), 1u) << run.output;
    const double killed = std::stod(kills.front().at("time"));
    if (std::any_of(checkpoints.begin(), checkpoints.end(), [&](const auto& checkpoint) {
          return !checkpoint.count("error") && std::stod(checkpoint.at("time")) < killed;
        })) {
      break;
    }
    std::cerr << "no checkpoint was committed before the kill at " << kill_at << ": again\n";
  }
  ASSERT_EQ(testing::EventsNamed(log, "kill").size(), 1u) << run.output;
  ASSERT_TRUE(Contains(run.output, "backup server 0 is promoted to primary")) << run.output;
  CheckpointStore store("file://" + folder_ + "/ckpt");
  const std::vector<std::string> ids = store.Committed();
  const std::string last = store.Latest();
  ASSERT_EQ(last, ids.back());
  const std::vector<proto::CheckpointManifest> chain = store.Chain(last);
  ASSERT_GT(chain.size(), 1u);
  // Without the promotion one chain (every 1000th full) would span the job.
  EXPECT_NE(chain.front().id(), ids.front()) << "no full checkpoint after server 1 left";
  std::vector<std::string> resumed = job;
  resumed.insert(resumed.end(), {"--model_dir=" + folder_ + "/resumed",
                                 "--resume=file://" + folder_ + "/ckpt/" + last});
  const auto again = testing::Run(resumed, 120);
  ASSERT_EQ(again.code, 0) << again.output;
  const std::string weights = testing::ReadFileOrEmpty(folder_ + "/faulted/weights.bin");
  ASSERT_FALSE(weights.empty());
  EXPECT_TRUE(testing::ReadFileOrEmpty(folder_ + "/resumed/weights.bin") == weights);
}

}  // namespace
}  // namespace keel
