// Key admission (--admit_after) and eviction (--evict_after) on servers in one
// process: a constructed key stream, with every range replicated, and the
// admission counters (AdmissionSketch) on their own.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "base/error.h"
#include "cluster_fixture.h"
#include "kv/admission_sketch.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::LocalNode;

TEST(AdmissionSketch, CountsEachKeyAndNeverBelowTheTruth) {
  AdmissionSketch sketch(8192);
  std::mt19937_64 random(3);
  std::map<Key, uint32_t> truth;
  // 3000 keys into 8192 counters a row: collisions, never an undercount.
  for (int i = 0; i < 20000; ++i) {
    const Key key = MixKey(random() % 3000);
    ++truth[key];
    EXPECT_GE(sketch.Add(key), truth[key]);
  }
  size_t exact = 0;
  for (const auto& [key, count] : truth) {
    ASSERT_GE(sketch.Count(key), count);
    exact += sketch.Count(key) == count;
  }
  // Conservative update over four rows keeps most counts exact even so.
  EXPECT_GT(exact, truth.size() / 2) << exact << " of " << truth.size();
  EXPECT_EQ(sketch.Count(MixKey(999999)) <= 20000, true);
}

TEST(AdmissionSketch, SaturatesAndMergesAndRefusesAShapeThatDoesNotFit) {
  AdmissionSketch a(2048), b(2048);
  for (int i = 0; i < 70000; ++i) a.Add(7);
  EXPECT_EQ(a.Count(7), 65535u);
  b.Add(7);
  b.Add(9);
  a.Merge(b);
  EXPECT_EQ(a.Count(7), 65535u);
  EXPECT_GE(a.Count(9), 1u);
  AdmissionSketch restored(a.depth(), a.width(), a.counters());
  EXPECT_EQ(restored.Count(9), a.Count(9));
  EXPECT_THROW(AdmissionSketch(3, 2048, std::vector<uint16_t>(3 * 2048)), Error);
  EXPECT_THROW(AdmissionSketch(4, 2048, std::vector<uint16_t>(10)), Error);
  EXPECT_THROW(a.Merge(AdmissionSketch(4096)), Error);
  EXPECT_EQ(AdmissionSketch::WidthFor(8 << 20), (8u << 20) / 8);
  EXPECT_EQ(AdmissionSketch::WidthFor(1), 1024u);
}

constexpr int kWidth = 2;
constexpr float kInitial = 0.5f;

// Two servers, every range on both (replication 1), one worker; table 0 has
// rows of two weights (the first starts at 0.5), SGD with rate 1 (a push of
// -1 adds 1), admission after 3 pushes and eviction after 4 clocks.
class AdmissionCluster : public testing::ClusterTest {
 protected:
  void SetUp() override {
    SchedulerOptions options = testing::LocalScheduler(2, 1);
    options.replication = 1;
    scheduler_ = testing::StartScheduler(options);
    TableSpec spec;
    spec.width = kWidth;
    spec.optimizer.name = "sgd";
    spec.optimizer.learning_rate = 1.0f;
    spec.initializer = [](Key, float* weights, int) { weights[0] = kInitial; };
    spec.admit_after = 3;
    spec.admit_sketch_bytes = 64 << 10;
    spec.evict_after = 4;
    spec_ = spec;
    server_nodes_.resize(2);
    servers_.resize(2);
    for (int rank = 0; rank < 2; ++rank) MakeServer(rank);
    worker_node_ = std::make_unique<Node>(LocalNode(proto::WORKER, scheduler_->port()));
    client_ = std::make_unique<KVWorker>(worker_node_.get());
    StartAll();
  }

  void MakeServer(int rank) {
    NodeOptions node = LocalNode(proto::SERVER, scheduler_->port(), 0.1);
    node.rank = rank;
    server_nodes_[rank] = std::make_unique<Node>(node);
    servers_[rank] = std::make_unique<KVServer>(server_nodes_[rank].get(), OptimizerOptions(),
                                                std::map<uint32_t, TableSpec>{{0, spec_}});
  }
  void StopServer(int rank) {
    servers_[rank].reset();
    server_nodes_[rank].reset();
  }
  // Waits until the worker's view gives both ranges the chain `chain`.
  bool ChainsBecome(const std::vector<int>& chain) {
    return testing::WaitFor(
        [&] {
          auto now = worker_node_->ranges();
          return now->Chain(0) == chain && now->Chain(1) == chain;
        },
        20);
  }

  // One push at `clock` of every key in `keys` (sorted), each weight's
  // gradient -1.
  void Push(int64_t clock, std::vector<Key> keys) {
    std::sort(keys.begin(), keys.end());
    client_->set_clock(clock);
    std::vector<float> gradient(keys.size() * kWidth, -1.0f);
    client_->Wait(
        client_->Push(SharedArray<const Key>(keys), SharedArray<const float>(gradient), kWidth),
        30);
  }
  // The first weight of each key.
  std::vector<float> Pull(std::vector<Key> keys) {
    std::sort(keys.begin(), keys.end());
    SharedArray<float> values;
    client_->Wait(client_->Pull(SharedArray<const Key>(keys), &values, kWidth), 30);
    std::vector<float> first;
    for (size_t i = 0; i < keys.size(); ++i) first.push_back(values[i * kWidth]);
    return first;
  }
  uint64_t Sum(uint64_t (KVServer::*counter)() const) const {
    uint64_t sum = 0;
    for (const auto& server : servers_) sum += server ? (server.get()->*counter)() : 0;
    return sum;
  }
  // Rows of table 0 on both servers (each range's primary and its replica),
  // once they are `expected`: a server publishes its sizes after it answered
  // (or passed down) a push, so they may lag its acknowledgement a moment.
  uint64_t Rows(uint64_t expected) const {
    testing::WaitFor([&] { return Rows() == expected; }, 10);
    return Rows();
  }
  uint64_t Rows() const {
    uint64_t rows = 0;
    for (const auto& server : servers_) {
      if (!server) continue;
      for (const auto& size : server->table_sizes()) rows += size.table == 0 ? size.rows : 0;
    }
    return rows;
  }

  TableSpec spec_;
};

// Hot keys pushed at every clock, warm ones at the first three only, a cold
// one at the first two: the hot and warm keys are admitted at their third
// push, the cold one never; the warm rows are evicted once four clocks pass
// without a push; pulls of keys without rows read the initial weights; the
// replicas hold the rows the primaries hold.
TEST_F(AdmissionCluster, AdmitsAtTheThirdPushEvictsAfterFourIdleClocksAndReplicasFollow) {
  const std::vector<Key> hot = MixedKeySet({1, 2, 3, 4, 5, 6});
  const std::vector<Key> warm = MixedKeySet({11, 12});
  const std::vector<Key> cold = MixedKeySet({21});
  auto ranges = worker_node_->ranges();
  std::set<size_t> hot_ranges;
  for (Key key : hot) hot_ranges.insert(ranges->RangeOf(key));
  ASSERT_EQ(hot_ranges.size(), 2u) << "the hot keys should span both ranges";
  for (int64_t clock = 1; clock <= 10; ++clock) {
    std::vector<Key> keys = hot;
    if (clock <= 3) keys.insert(keys.end(), warm.begin(), warm.end());
    if (clock <= 2) keys.insert(keys.end(), cold.begin(), cold.end());
    Push(clock, keys);
    if (clock == 2) {
      EXPECT_EQ(Rows(), 0u) << "no key has had its third push yet";
      EXPECT_EQ(Pull(hot), std::vector<float>(hot.size(), kInitial));
    }
    if (clock == 3) {
      EXPECT_EQ(Rows(2 * (hot.size() + warm.size())),
                2 * (hot.size() + warm.size()));  // on both replicas
      EXPECT_EQ(Pull(warm), std::vector<float>(warm.size(), kInitial + 1));
    }
    if (clock == 6) {
      EXPECT_EQ(Pull(warm), std::vector<float>(warm.size(), kInitial + 1));
    }
  }
  // Hot: pushes 3 to 10 applied. Warm: evicted at clock 7 (last pushed at 3).
  EXPECT_EQ(Pull(hot), std::vector<float>(hot.size(), kInitial + 8));
  EXPECT_EQ(Pull(warm), std::vector<float>(warm.size(), kInitial));
  EXPECT_EQ(Pull(cold), std::vector<float>(cold.size(), kInitial));
  EXPECT_EQ(Rows(2 * hot.size()), 2 * hot.size());
  EXPECT_EQ(Sum(&KVServer::admitted_keys), hot.size() + warm.size());
  EXPECT_EQ(Sum(&KVServer::unadmitted_key_pushes), 2 * (hot.size() + warm.size()) + 2);
  EXPECT_EQ(Sum(&KVServer::evicted_rows), warm.size());
  // A warm key pushed again is admitted at once (its count is past 3) and
  // starts from its initial weights.
  Push(11, {warm[0]});
  EXPECT_EQ(Pull({warm[0]}), std::vector<float>{kInitial + 1});
}

// Replicas count as their primary does (the keys it did not admit ride down
// the chain), so a promoted replica admits a key at the push its primary
// would have: here the third, though two were counted before the promotion.
TEST_F(AdmissionCluster, APromotedReplicaAdmitsAtThePushItsPrimaryWould) {
  const std::vector<Key> keys = MixedKeySet({31, 32, 33, 34, 35, 36, 37, 38});
  auto ranges = worker_node_->ranges();
  ASSERT_NE(ranges->RangeOf(keys.front()), ranges->RangeOf(keys.back()));
  Push(1, keys);
  Push(2, keys);
  EXPECT_EQ(Rows(), 0u);
  // Server 1 stops: server 0, its ranges' replica, is promoted.
  StopServer(1);
  ASSERT_TRUE(ChainsBecome({0}));
  Push(3, keys);
  EXPECT_EQ(Pull(keys), std::vector<float>(keys.size(), kInitial + 1));
  EXPECT_EQ(Rows(keys.size()), keys.size());
}

// A replica that joins a chain later gets its predecessor's counters with
// the rows (REPLICA_SYNC), so it too admits at the push its primary would.
TEST_F(AdmissionCluster, AReplicaCopiedLaterGetsTheCountersWithTheRows) {
  const std::vector<Key> keys = MixedKeySet({41, 42, 43, 44, 45, 46, 47, 48});
  Push(1, keys);
  // Server 1 stops and comes back: it copies both ranges from server 0.
  StopServer(1);
  ASSERT_TRUE(ChainsBecome({0}));
  MakeServer(1);
  server_nodes_[1]->Start();
  ASSERT_TRUE(testing::WaitFor([&] { return servers_[1]->serving(); }, 20));
  ASSERT_TRUE(ChainsBecome({0, 1}));
  Push(2, keys);
  // Server 0 stops: server 1, counting since its copy, is promoted.
  StopServer(0);
  ASSERT_TRUE(ChainsBecome({1}));
  EXPECT_EQ(Rows(), 0u);
  Push(3, keys);
  EXPECT_EQ(Pull(keys), std::vector<float>(keys.size(), kInitial + 1));
}

}  // namespace
}  // namespace keel
