// Live resharding with every role in one process, over loopback: a server
// joins a running job and another is drained from it while a worker pushes
// without pause, and every acknowledged push is applied exactly once.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "base/time.h"
#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "scheduler/admin_client.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::LocalNode;
using testing::WaitFor;

constexpr int kWidth = 2;
constexpr int kKeyRanges = 8;

class ElasticCluster : public testing::ClusterTest {
 protected:
  void StartCluster(int servers, int replication) {
    SchedulerOptions options = testing::LocalScheduler(servers, 1);
    options.replication = replication;
    options.key_ranges = kKeyRanges;
    options.heartbeat_timeout_s = 2;
    scheduler_options_ = options;
    scheduler_ = testing::StartScheduler(options);
    // Every server is made before any starts: AddServer grows server_nodes_,
    // which a starting thread would otherwise read while it moves.
    for (int rank = 0; rank < servers; ++rank) AddServer(rank, /*join=*/false);
    MakeWorker(0.1, testing::PatientRetry());
    StartAll();
  }

  // Makes server `index` (its rank if not joining); Start it after.
  void AddServer(size_t index, bool join) {
    NodeOptions options = LocalNode(proto::SERVER, scheduler_->port(), 0.1);
    options.rank = join ? -1 : static_cast<int>(index);
    options.join = join;
    OptimizerOptions sgd;
    sgd.name = "sgd";
    sgd.learning_rate = 1.0f;
    if (server_nodes_.size() <= index) {
      server_nodes_.resize(index + 1);
      servers_.resize(index + 1);
    }
    server_nodes_[index] = std::make_unique<Node>(options);
    servers_[index] = std::make_unique<KVServer>(server_nodes_[index].get(), sgd);
  }

  void TearDown() override {
    StopPushing();
    ClusterTest::TearDown();
  }

  // Keys spread over every range.
  static std::vector<Key> SomeKeys(uint64_t count = 400) {
    std::vector<uint64_t> features;
    for (uint64_t f = 0; f < count; ++f) features.push_back(f);
    return MixedKeySet(features);
  }

  // Pushes gradients of 1 and 2 (by column), `times` times, one at a time,
  // in the background; counts them and keeps the longest wait. Push t
  // carries the keys_[i] with i % kParts == t % kParts, so that a range's
  // rows change a part at a time (a copy's later rounds hold only some).
  static constexpr int kParts = 4;
  void StartPushing(int times) {
    pusher_ = std::thread([this, times] {
      std::vector<SharedArray<const Key>> keys;
      std::vector<SharedArray<const float>> values;
      for (int part = 0; part < kParts; ++part) {
        std::vector<Key> some;
        std::vector<float> gradient;
        for (size_t i = part; i < keys_.size(); i += kParts) {
          some.push_back(keys_[i]);
          gradient.insert(gradient.end(), {1.0f, 2.0f});
        }
        keys.emplace_back(std::move(some));
        values.emplace_back(std::move(gradient));
      }
      try {
        for (int t = 0; t < times && !stop_.load(); ++t) {
          const double begin = MonotonicSeconds();
          client_->Wait(client_->Push(keys[t % kParts], values[t % kParts], kWidth), 30);
          const double took = MonotonicSeconds() - begin;
          if (took > longest_push_s_.load()) longest_push_s_.store(took);
          pushed_.fetch_add(1);
        }
      } catch (const std::exception& e) {
        push_error_ = e.what();
      }
      done_.store(true);
    });
  }

  void StopPushing() {
    stop_.store(true);
    if (pusher_.joinable()) pusher_.join();
  }

  // Every range's chain has replication + 1 members, none copying, and the
  // scheduler's view has `servers` servers.
  bool Settled(int servers, int replication) {
    const SchedulerStatus status = scheduler_->status();
    if (status.expected_servers != servers) return false;
    int members = 0;
    for (const auto& node : status.members) members += node.role == proto::SERVER;
    if (members != servers) return false;
    for (const auto& range : status.ranges) {
      if (!range.copying.empty() || static_cast<int>(range.backups.size()) != replication) {
        return false;
      }
    }
    return !status.ranges.empty();
  }

  // Replicas of key ranges server `rank` holds in the scheduler's view.
  int RangesHeldBy(int rank) {
    int held = 0;
    for (const auto& range : scheduler_->status().ranges) {
      held +=
          range.primary == rank || std::count(range.backups.begin(), range.backups.end(), rank) > 0;
    }
    return held;
  }

  // Grows the cluster by a joining server, then drains server 0, while the
  // pusher runs; then checks every key's sum and that a dump reads each row
  // once.
  void GrowAndDrain(int replication) {
    StartCluster(2, replication);
    // 5000 rows a range: a pre-copy takes more than one round.
    keys_ = SomeKeys(40000);
    constexpr int kPushes = 1200;
    StartPushing(kPushes);
    ASSERT_TRUE(WaitFor([&] { return pushed_.load() >= 100 || done_.load(); }, 30));
    AddServer(2, /*join=*/true);
    server_nodes_[2]->Start();
    EXPECT_EQ(server_nodes_[2]->rank(), 2);
    // Each of the three holds its share of the 8 (x copies) range replicas.
    const int share = kKeyRanges * (replication + 1) / 3;
    ASSERT_TRUE(WaitFor([&] { return Settled(3, replication) && RangesHeldBy(2) >= share; }, 30))
        << "the joined server did not take its ranges";
    const int at_join = pushed_.load();
    ASSERT_TRUE(WaitFor([&] { return pushed_.load() >= at_join + 100 || done_.load(); }, 30));
    RequestDrain("127.0.0.1:" + std::to_string(scheduler_->port()), 0, std::nullopt, 10);
    ASSERT_TRUE(WaitFor([&] { return server_nodes_[0]->shutdown_requested(); }, 30))
        << "the drained server was not told to go";
    ASSERT_TRUE(WaitFor([&] { return Settled(2, replication) && RangesHeldBy(0) == 0; }, 30));
    const int at_drain = pushed_.load();
    EXPECT_LT(at_drain, kPushes) << "the moves came after the pushes: nothing was tested";
    ASSERT_TRUE(WaitFor([&] { return done_.load(); }, 120));
    EXPECT_EQ(push_error_, "");
    ASSERT_EQ(pushed_.load(), kPushes);
    servers_[0].reset();
    server_nodes_[0]->Stop();
    SharedArray<float> values;
    client_->Wait(client_->Pull(SharedArray<const Key>(keys_), &values, kWidth), 30);
    ASSERT_EQ(values.size(), keys_.size() * kWidth);
    for (size_t i = 0; i < keys_.size(); ++i) {
      const float pushes = kPushes / kParts;  // kPushes is a multiple of kParts
      ASSERT_EQ(values[i * kWidth], -1.0f * pushes) << "key " << i;
      ASSERT_EQ(values[i * kWidth + 1], -2.0f * pushes) << "key " << i;
    }
    std::vector<Key> dumped;
    std::vector<float> rows;
    client_->Dump(0, kWidth, &dumped, &rows, 30);
    EXPECT_EQ(dumped, keys_);
    LOG(INFO) << "longest push: " << longest_push_s_.load() * 1e3 << " ms";
  }

  SchedulerOptions scheduler_options_;
  std::vector<Key> keys_;
  std::thread pusher_;
  std::atomic<bool> stop_{false}, done_{false};
  std::atomic<int> pushed_{0};
  std::atomic<double> longest_push_s_{0};
  std::string push_error_;
};

TEST_F(ElasticCluster, AServerJoinsAndAnotherIsDrainedWhilePushesGoOnAndNoneIsLostOrDoubled) {
  GrowAndDrain(/*replication=*/0);
}

TEST_F(ElasticCluster, WithReplicationAServerJoinsAndAnotherIsDrainedAndNoPushIsLostOrDoubled) {
  GrowAndDrain(/*replication=*/1);
}

// The scheduler dies after a server joined: started again with the job's
// first flags (2 servers), it learns from the nodes' views that the job has
// 3, admits rank 2 and keeps every range where it was.
TEST_F(ElasticCluster, ASchedulerStartedAgainAfterAJoinExpectsTheServersOfTheLatestView) {
  StartCluster(2, 0);
  keys_ = SomeKeys();
  std::vector<float> gradient;
  for (size_t i = 0; i < keys_.size(); ++i) gradient.insert(gradient.end(), {1.0f, 2.0f});
  auto push = [&] {
    client_->Wait(
        client_->Push(SharedArray<const Key>(keys_), SharedArray<const float>(gradient), kWidth),
        30);
  };
  push();
  AddServer(2, /*join=*/true);
  server_nodes_[2]->Start();
  ASSERT_TRUE(WaitFor([&] { return Settled(3, 0) && RangesHeldBy(2) == 2; }, 30));
  push();
  const proto::ClusterView view = scheduler_->view();
  const std::vector<proto::KeyRange> before(view.ranges().begin(), view.ranges().end());
  scheduler_options_.port = scheduler_->port();
  scheduler_->Stop();
  scheduler_ = std::make_unique<Scheduler>(scheduler_options_);
  scheduler_->Start();
  ASSERT_TRUE(WaitFor([&] { return scheduler_->view().epoch() > 0 && Settled(3, 0); }, 30))
      << "the restarted scheduler did not take back the three servers";
  const proto::ClusterView after = scheduler_->view();
  ASSERT_EQ(static_cast<size_t>(after.ranges_size()), before.size());
  for (size_t range = 0; range < before.size(); ++range) {
    EXPECT_EQ(after.ranges(range).server_rank(), before[range].server_rank()) << range;
  }
  push();
  SharedArray<float> values;
  client_->Wait(client_->Pull(SharedArray<const Key>(keys_), &values, kWidth), 30);
  for (size_t i = 0; i < keys_.size(); ++i) ASSERT_EQ(values[i * kWidth], -3.0f) << i;
}

TEST_F(ElasticCluster, AJoinBeyondTheKeyRangesAndADrainBelowTheReplicasAreRefused) {
  StartCluster(2, 1);
  // Replication 1 needs two servers: neither may go.
  const std::string port = std::to_string(scheduler_->port());
  EXPECT_EQ(testing::ErrorOf([&] { RequestDrain("127.0.0.1:" + port, 1, std::nullopt, 10); }),
            "the scheduler at 127.0.0.1:" + port +
                " refused to drain server 1: draining server 1 would leave 1 server(s), too few "
                "for a key range and its 1 backup(s) (--replication)");
  EXPECT_EQ(scheduler_->Drain(7, "test"), "server 7 is not in the cluster");
  // Six more servers fill the 8 ranges; a ninth is refused.
  for (size_t index = 2; index < 8; ++index) {
    AddServer(index, /*join=*/true);
    server_nodes_[index]->Start();
  }
  ASSERT_TRUE(WaitFor([&] { return Settled(8, 1); }, 30));
  AddServer(8, /*join=*/true);
  EXPECT_EQ(testing::ErrorOf([&] { server_nodes_[8]->Start(); }),
            "the scheduler at 127.0.0.1:" + port +
                " refused this SERVER: the job has 8 key range(s), too few for 9 servers (each "
                "holds at least one): start it with a larger --key_ranges to let more servers "
                "join");
}

}  // namespace
}  // namespace keel
