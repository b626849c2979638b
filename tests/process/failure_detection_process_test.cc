// Failure detection against real server processes: one killed -9 leaves the
// view at once (its connection closes and its port refuses the scheduler's
// probe), long before the heartbeat timeout; one stopped with SIGSTOP keeps
// its connections open and leaves at the heartbeat timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "kv/node.h"
#include "scheduler/scheduler.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;
using testing::WaitFor;

// A scheduler and a worker node in this process, two `keel server`
// processes with one backup per range.
class ServerProcessFailures : public ::testing::Test {
 protected:
  void StartCluster(double heartbeat_timeout_s) {
    SchedulerOptions options = testing::LocalScheduler(2, 1);
    options.replication = 1;
    options.heartbeat_timeout_s = heartbeat_timeout_s;
    options.membership_log = membership_log_;
    scheduler_ = testing::StartScheduler(options);
    const std::string address = "127.0.0.1:" + std::to_string(scheduler_->port());
    for (int rank = 0; rank < 2; ++rank) {
      servers_.push_back(
          processes_.Start({KeelBinary(), "server", "--scheduler=" + address, "--bind=127.0.0.1",
                            "--rank=" + std::to_string(rank), "--heartbeat_interval=0.2"}));
    }
    worker_ = std::make_unique<Node>(testing::LocalNode(proto::WORKER, scheduler_->port(), 0.2));
    worker_->Start();
  }

  void TearDown() override {
    for (pid_t server : servers_) kill(server, SIGCONT);
    if (worker_) worker_->Stop();
    if (scheduler_) scheduler_->Stop();
  }

  // The one leave line of the membership log (fails the test if there is
  // another count).
  std::map<std::string, std::string> OnlyLeave() {
    const auto leaves = testing::EventsNamed(membership_log_, "leave");
    EXPECT_EQ(leaves.size(), 1u) << testing::ReadFileOrEmpty(membership_log_);
    return leaves.empty() ? std::map<std::string, std::string>() : leaves[0];
  }

  // Sends server 1's process `signal`; once range 1 has moved to server 0,
  // `leave` is the one leave line, which must be rank 1's.
  void SignalServerOne(int signal, std::map<std::string, std::string>* leave) {
    kill(servers_[1], signal);
    ASSERT_TRUE(RangeOneMovedToServerZero()) << testing::ReadFileOrEmpty(membership_log_);
    *leave = OnlyLeave();
    EXPECT_EQ(leave->at("rank"), "1");
  }

  bool RangeOneMovedToServerZero() {
    return WaitFor([&] { return worker_->ranges()->Chain(1) == std::vector<int>{0}; }, 20);
  }

  const testing::TempFolder folder_{"detection"};
  const std::string membership_log_ = folder_.path() + "/membership.jsonl";
  testing::Processes processes_;
  std::vector<pid_t> servers_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Node> worker_;
};

TEST_F(ServerProcessFailures, AServerKilledMinus9LeavesAtOnceThoughHeartbeatsWait30s) {
  StartCluster(/*heartbeat_timeout_s=*/30);
  std::map<std::string, std::string> leave;
  ASSERT_NO_FATAL_FAILURE(SignalServerOne(SIGKILL, &leave));
  EXPECT_TRUE(Contains(leave.at("reason"), "its connection closed and 127.0.0.1:"))
      << leave.at("reason");
  EXPECT_TRUE(Contains(leave.at("reason"), "refuses connections")) << leave.at("reason");
  EXPECT_EQ(leave.at("promoted"), "[{\"range\": 1, \"primary\": 0}]");
}

TEST_F(ServerProcessFailures, AStoppedServerKeepsItsConnectionsAndLeavesAtTheHeartbeatTimeout) {
  StartCluster(/*heartbeat_timeout_s=*/2);
  std::map<std::string, std::string> leave;
  ASSERT_NO_FATAL_FAILURE(SignalServerOne(SIGSTOP, &leave));
  EXPECT_EQ(leave.at("reason").rfind("no heartbeat for ", 0), 0u) << leave.at("reason");
  // No connection of its closed: nothing was suspected.
  EXPECT_EQ(scheduler_->status().suspected, 0u);
}

}  // namespace
}  // namespace keel
