// A server that steps pushes on several apply threads (--server_apply_threads),
// with every role in one process over loopback: each push of two workers,
// large enough to be stepped in parts, is applied exactly once to every key,
// by key list (PushSlots) and by keys (Push).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "kv/keys.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "kv/parameter_table.h"
#include "kv/sent_key_lists.h"
#include "server/kv_server.h"
#include "test_util.h"

namespace keel {
namespace {

constexpr int kWorkers = 2;
constexpr int kPushes = 5;  // per worker
// Three parts of ApplyThreads::kMinRowsPerPart, and a few more.
constexpr size_t kKeys = 3 * ApplyThreads::kMinRowsPerPart + 5;

class ApplyThreadsCluster : public testing::OneServerClusterTest {
 protected:
  // OneServerClusterTest::StartCluster, with key caching set on the workers
  // before their nodes start.
  void Start(bool key_cache) {
    OptimizerOptions summing;  // rate 1 SGD: a row is minus the sum of its gradients
    summing.learning_rate = 1.0f;
    scheduler_ = testing::StartScheduler(testing::LocalScheduler(1, kWorkers));
    server_node_ =
        std::make_unique<Node>(testing::LocalNode(proto::SERVER, scheduler_->port(), 0.2));
    server_ =
        std::make_unique<KVServer>(server_node_.get(), summing, std::map<uint32_t, TableSpec>());
    server_->SetApplyThreads(3);
    std::vector<Node*> nodes = {server_node_.get()};
    for (int i = 0; i < kWorkers; ++i) {
      worker_nodes_.push_back(
          std::make_unique<Node>(testing::LocalNode(proto::WORKER, scheduler_->port(), 0.2)));
      clients_.push_back(std::make_unique<KVWorker>(worker_nodes_.back().get()));
      if (key_cache) {
        KeyCacheOptions cache;
        cache.enabled = true;
        cache.min_keys = 1;
        clients_.back()->SetKeyCache(cache);
      }
      nodes.push_back(worker_nodes_.back().get());
    }
    testing::StartNodes(nodes);
  }

  // Each worker pushes kPushes times, at the same time as the other: row i
  // takes (i % 7) + 1 from each push.
  void PushFromEveryWorker() {
    std::vector<Key> keys;
    for (size_t i = 0; i < kKeys; ++i) keys.push_back(MixKey(i));
    std::sort(keys.begin(), keys.end());
    keys_ = SharedArray<const Key>(keys);
    std::vector<float> values(kKeys);
    for (size_t i = 0; i < kKeys; ++i) values[i] = static_cast<float>(i % 7 + 1);
    const SharedArray<const float> gradients(values);
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        for (int p = 0; p < kPushes; ++p) clients_[w]->Wait(clients_[w]->Push(keys_, gradients, 1));
      });
    }
    for (std::thread& worker : workers) worker.join();
  }

  void ExpectEveryPushAppliedOnce() {
    SharedArray<float> rows;
    clients_[0]->Wait(clients_[0]->Pull(keys_, &rows, 1));
    ASSERT_EQ(rows.size(), kKeys);
    size_t wrong = 0;
    for (size_t i = 0; i < kKeys; ++i) {
      const float expected = -static_cast<float>(kWorkers * kPushes * (i % 7 + 1));
      if (rows[i] != expected && wrong++ < 5) {
        ADD_FAILURE() << "row " << i << ": " << rows[i] << ", expected " << expected;
      }
    }
    EXPECT_EQ(wrong, 0u);
  }

  SharedArray<const Key> keys_;
};

TEST_F(ApplyThreadsCluster, EveryPushByKeysIsAppliedOnceToEveryRow) {
  Start(/*key_cache=*/false);
  PushFromEveryWorker();
  ExpectEveryPushAppliedOnce();
}

TEST_F(ApplyThreadsCluster, EveryPushByKeyListIsAppliedOnceToEveryRow) {
  Start(/*key_cache=*/true);
  PushFromEveryWorker();
  ExpectEveryPushAppliedOnce();
  EXPECT_GT(server_->key_list_hits(), 0u);  // later pushes named their kept list
}

}  // namespace
}  // namespace keel
