// Workers leaving and rejoining a running job: killed with -9 and started
// again with the same rank, killed and never replaced, paused past the
// heartbeat timeout. Every example of every epoch is still read once, and
// the job finishes. Roles are started one by one, as on a cluster.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ExamplesPerEpoch;
using testing::KeelBinary;
using testing::MetricOf;

double ValidationLoss(const std::string& model_dir) {
  return MetricOf(model_dir + "/metrics.json", "validation:objective_loss");
}

constexpr int kRows = 30000;
constexpr int kEpochs = 4;

class WorkerFaults : public testing::TempFolderTest {
 public:
  WorkerFaults() : TempFolderTest("faults") {}
  void SetUp() override {
    const auto exit =
        testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=" + std::to_string(kRows),
                      "--features=2000", "--nnz=10", "--seed=3", "--train_files=4",
                      "--out=" + folder_ + "/data"},
                     60);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

  std::vector<std::string> JobFlags(const std::string& model) const {
    return {"--job=linear_learner",
            "--train=" + folder_ + "/data/train",
            "--validation=" + folder_ + "/data/validation",
            "--epochs=" + std::to_string(kEpochs),
            "--mini_batch_size=20",
            "--optimizer=adam",
            "--learning_rate=0.01",
            "--early_stopping_patience=100",
            "--model_dir=" + folder_ + "/" + model,
            "--heartbeat_interval=0.2"};
  }

  // Starts a scheduler, 2 servers and 2 workers (ranks 0 and 1).
  void StartCluster(const std::string& model, double replace_timeout,
                    const std::vector<std::string>& scheduler_flags = {}) {
    const std::string port_file = folder_ + "/port";
    std::remove(port_file.c_str());
    std::vector<std::string> scheduler = {
        KeelBinary(),
        "scheduler",
        "--port_file=" + port_file,
        "--bind=127.0.0.1",
        "--num_servers=2",
        "--num_workers=2",
        "--heartbeat_timeout=1.5",
        "--worker_replace_timeout=" + std::to_string(replace_timeout),
        "--membership_log=" + MembershipLog()};
    scheduler.insert(scheduler.end(), scheduler_flags.begin(), scheduler_flags.end());
    scheduler_ = processes_.Start(scheduler);
    const std::string port = testing::WaitForPortFile(port_file, 30);
    ASSERT_FALSE(port.empty()) << processes_.Output(scheduler_);
    address_ = "127.0.0.1:" + port;
    for (int rank = 0; rank < 2; ++rank) servers_[rank] = Role("server", rank, model);
    workers_[0] = Role("worker", 0, model);
    workers_[1] = Role("worker", 1, model);
  }
  // A scheduler started again on the same address, as an operator would.
  pid_t RestartScheduler(double replace_timeout) {
    const std::string port = address_.substr(address_.find(':') + 1);
    return processes_.Start({KeelBinary(), "scheduler", "--port=" + port, "--bind=127.0.0.1",
                             "--num_servers=2", "--num_workers=2", "--heartbeat_timeout=1.5",
                             "--worker_replace_timeout=" + std::to_string(replace_timeout),
                             "--membership_log=" + MembershipLog()});
  }
  pid_t Role(const std::string& role, int rank, const std::string& model) {
    std::vector<std::string> argv = {KeelBinary(), role, "--scheduler=" + address_,
                                     "--bind=127.0.0.1", "--rank=" + std::to_string(rank)};
    for (const std::string& flag : JobFlags(model)) argv.push_back(flag);
    return processes_.Start(argv);
  }
  // Waits until the leading worker has finished epoch 1 (so the others are
  // inside epoch 2).
  bool InsideEpochTwo() {
    return testing::WaitFor([&] { return Contains(processes_.Output(workers_[0]), "epoch 1: "); },
                            120);
  }
  testing::Exit FinishJob() { return processes_.Wait(scheduler_, 180); }

  // Kills `pid`, the process of `role` `rank`, starts its replacement
  // (`replacement`), and waits for the job (`job`), which must end, and
  // succeed with the replacement in the role's place.
  void ReplaceAndFinish(pid_t pid, const std::string& role, int rank, pid_t* replacement,
                        testing::Exit* job) {
    kill(pid, SIGKILL);
    processes_.Wait(pid, 10);
    *replacement = Role(role, rank, "faulty");
    *job = FinishJob();
    ASSERT_TRUE(job->finished) << job->output;
    EXPECT_EQ(job->code, 0) << job->output;
    // A server without backups takes its ranges' only replica with it: the
    // scheduler declares them lost before the replacement restores them.
    EXPECT_EQ(MembershipOf(role, rank), role == "server" ? "join, leave, range_lost, join replaces"
                                                         : "join, leave, join replaces")
        << job->output;
  }

  // The scheduler's --membership_log (a scheduler started again appends).
  std::string MembershipLog() const { return folder_ + "/membership.jsonl"; }
  // What the membership log says of `role` `rank`, in order: "join",
  // "join replaces" (taking a departed node's rank), "join rejoin" (a node
  // registering again with a restarted scheduler) or "leave", comma-separated.
  std::string MembershipOf(const std::string& role, int rank) const {
    std::string changes;
    for (auto& change : testing::ReadJsonLines(MembershipLog())) {
      if (change["role"] != role || change["rank"] != std::to_string(rank)) continue;
      changes += (changes.empty() ? "" : ", ") + change["event"];
      if (change["replaces"] == "true") changes += " replaces";
      if (change["rejoin"] == "true") changes += " rejoin";
    }
    return changes;
  }
  // Whether the membership log says `role` `rank` left.
  bool Left(const std::string& role, int rank) const {
    return Contains(MembershipOf(role, rank), "leave");
  }

  testing::Processes processes_;
  pid_t scheduler_ = -1;
  pid_t workers_[2] = {-1, -1};
  pid_t servers_[2] = {-1, -1};
  std::string address_;
};

TEST_F(WorkerFaults, WorkerKilledMidEpochAndRestartedTakesItsRankBackAndNoExampleIsLost) {
  const auto reference = testing::Run(
      [&] {
        std::vector<std::string> argv = {KeelBinary(), "launch", "--servers=2", "--workers=2"};
        for (const std::string& flag : JobFlags("reference")) argv.push_back(flag);
        return argv;
      }(),
      180);
  ASSERT_TRUE(reference.finished && reference.code == 0) << reference.output;

  StartCluster("faulty", /*replace_timeout=*/60);
  ASSERT_TRUE(InsideEpochTwo()) << processes_.Output(workers_[0]);
  // Deliberate: worker 1 trains a moment into epoch 2 (a heartbeat, every
  // 0.2 s, carries its progress to the scheduler) so that it dies mid-epoch.
  // Nothing outside the processes marks a progress report to wait on.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  pid_t replacement = -1;
  testing::Exit job;
  ASSERT_NO_FATAL_FAILURE(ReplaceAndFinish(workers_[1], "worker", 1, &replacement, &job));
  const std::string leader = processes_.Output(workers_[0]);
  EXPECT_EQ(ExamplesPerEpoch(leader), std::vector<long>(kEpochs, kRows))
      << leader << processes_.Output(replacement);
  EXPECT_TRUE(Contains(processes_.Output(replacement), "replaces a worker that left"))
      << processes_.Output(replacement);
  const double loss = ValidationLoss(folder_ + "/faulty");
  ASSERT_GT(loss, 0);
  EXPECT_NEAR(loss, ValidationLoss(folder_ + "/reference"), 0.02 * loss);
}

TEST_F(WorkerFaults, WorkerNotReplacedHasTheRestOfItsShareReadByTheOthers) {
  StartCluster("faulty", /*replace_timeout=*/1);
  ASSERT_TRUE(InsideEpochTwo()) << processes_.Output(workers_[0]);
  kill(workers_[1], SIGKILL);
  const testing::Exit job = FinishJob();
  ASSERT_TRUE(job.finished) << job.output;
  EXPECT_EQ(job.code, 0) << job.output;
  EXPECT_EQ(MembershipOf("worker", 1), "join, leave") << job.output;  // and never again
  const std::string leader = processes_.Output(workers_[0]);
  // Epoch 2 through the survivor and the departed worker's part before it
  // left; epochs 3 and 4 through the survivor alone.
  EXPECT_EQ(ExamplesPerEpoch(leader), std::vector<long>(kEpochs, kRows)) << leader;
}

TEST_F(WorkerFaults, PausedWorkerLeavesTheViewAndOnContinueJoinsAgainWithoutStaleUpdates) {
  StartCluster("faulty", /*replace_timeout=*/60);
  ASSERT_TRUE(InsideEpochTwo()) << processes_.Output(workers_[0]);
  kill(workers_[1], SIGSTOP);
  // The scheduler drops it after the heartbeat timeout; the job goes on
  // without it meanwhile (the other worker keeps training).
  const bool dropped = testing::WaitFor([&] { return Left("worker", 1); }, 30);
  kill(workers_[1], SIGCONT);
  ASSERT_TRUE(dropped) << processes_.Output(scheduler_)
                       << testing::ReadFileOrEmpty(MembershipLog());
  const testing::Exit job = FinishJob();
  ASSERT_TRUE(job.finished) << job.output;
  EXPECT_EQ(job.code, 0) << job.output;
  const std::string paused = processes_.Output(workers_[1]);
  EXPECT_TRUE(Contains(paused, "left the cluster; it joins again")) << paused;
  EXPECT_EQ(MembershipOf("worker", 1), "join, leave, join replaces") << job.output;
  const std::string leader = processes_.Output(workers_[0]);
  EXPECT_EQ(ExamplesPerEpoch(leader), std::vector<long>(kEpochs, kRows)) << leader;
}

// Without replicas: a server killed -9 and started again restores its key
// ranges from the latest checkpoint (updates since then are lost, and the log
// says so); the workers' requests wait and are resent to it.
TEST_F(WorkerFaults, ServerKilledAndRestartedRestoresItsRangesFromTheLatestCheckpoint) {
  StartCluster("faulty", /*replace_timeout=*/60,
               {"--checkpoint_uri=file://" + folder_ + "/ckpt", "--checkpoint_every=100"});
  ASSERT_TRUE(InsideEpochTwo()) << processes_.Output(workers_[0]);
  pid_t replacement = -1;
  testing::Exit job;
  ASSERT_NO_FATAL_FAILURE(ReplaceAndFinish(servers_[1], "server", 1, &replacement, &job));
  EXPECT_TRUE(Contains(job.output, "restores key range(s) 1 from checkpoint ckpt-00000"))
      << job.output;
  EXPECT_TRUE(Contains(job.output, "job finished: 2 of 2 worker(s) succeeded")) << job.output;
  EXPECT_TRUE(Contains(processes_.Output(replacement), "resumed from checkpoint"))
      << processes_.Output(replacement);
  const std::string leader = processes_.Output(workers_[0]);
  EXPECT_EQ(ExamplesPerEpoch(leader), std::vector<long>(kEpochs, kRows)) << leader;
  EXPECT_GT(ValidationLoss(folder_ + "/faulty"), 0);
}

TEST_F(WorkerFaults, SchedulerKilledAndRestartedMidRunAndTheJobFinishes) {
  StartCluster("faulty", /*replace_timeout=*/60);
  ASSERT_TRUE(InsideEpochTwo()) << processes_.Output(workers_[0]);
  kill(scheduler_, SIGKILL);
  processes_.Wait(scheduler_, 10);
  // Deliberate: the scheduler stays down a while, as after a crash, and the
  // nodes go on without it meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  scheduler_ = RestartScheduler(60);
  const testing::Exit job = FinishJob();
  ASSERT_TRUE(job.finished) << job.output;
  EXPECT_EQ(job.code, 0) << job.output;
  EXPECT_EQ(MembershipOf("worker", 1), "join, join rejoin") << job.output;
  EXPECT_TRUE(Contains(job.output, "job finished: 2 of 2 worker(s) succeeded")) << job.output;
  const std::string leader = processes_.Output(workers_[0]);
  EXPECT_TRUE(Contains(leader, "the scheduler was restarted")) << leader;
  EXPECT_EQ(ExamplesPerEpoch(leader), std::vector<long>(kEpochs, kRows)) << leader;
}

}  // namespace
}  // namespace keel
