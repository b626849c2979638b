// The push filter on a worker's real push path (MinibatchPipeline over a
// BatchStream, KVWorker, replicated SGD servers), every role in one process
// over loopback. The model's gradients do not depend on the weights, and the
// servers apply SGD at rate 1 from rows of 0: once the pipeline's pushes are
// waited for (which flushes the remainders), every key's row on the servers
// is exactly minus the sum of the gradients the model made for it, whether
// or not servers left and came back meanwhile.
#include "worker/push_filter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cluster_fixture.h"
#include "io/input_split.h"
#include "kv/kv_worker.h"
#include "test_util.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/epoch_clock.h"
#include "worker/hyperparameters.h"
#include "worker/minibatch_pipeline.h"

namespace keel {
namespace {

using testing::WaitFor;
constexpr int kWidth = testing::ReplicatedClusterTest::kWidth;

// Gradients in 32nds of at most 1/4 that depend on the key and the minibatch,
// never on the weights; remembers every key's total.
class FixedGradients : public ComputeBackend {
 public:
  FixedGradients() : ComputeBackend(Hyperparameters()) { width_ = kWidth; }
  std::string name() const override { return "fixed gradients"; }
  double Predict(const PreparedBatch&, const float*, const float*, std::vector<float>*) override {
    return 0;
  }
  double Gradients(const PreparedBatch& batch, const float*, const float*,
                   std::vector<float>* weight_gradients,
                   std::vector<float>* bias_gradient) override {
    ++calls_;
    weight_gradients->assign(batch.keys.size() * kWidth, 0.0f);
    bias_gradient->assign(1, 0.0f);
    for (size_t i = 0; i < batch.keys.size(); ++i) {
      for (int j = 0; j < kWidth; ++j) {
        const int step = static_cast<int>((batch.keys[i] * 7 + calls_ * 3 + j * 5) % 17) - 8;
        (*weight_gradients)[i * kWidth + j] = static_cast<float>(step) / 32.0f;
        totals_[batch.keys[i]][j] += step / 32.0;
      }
    }
    return 0;
  }
  const std::map<Key, std::array<double, kWidth>>& totals() const { return totals_; }

 private:
  uint64_t calls_ = 0;
  std::map<Key, std::array<double, kWidth>> totals_;
};

// True once server `rank` is the primary of no key range in `node`'s view (a
// backup was promoted for each of its ranges).
bool PrimaryOfNoRange(const Node& node, int rank) {
  const auto ranges = node.ranges();
  if (!ranges) return false;
  for (size_t r = 0; r < ranges->num_ranges(); ++r) {
    if (ranges->server(r) == rank) return false;
  }
  return true;
}

class PushFilterCluster : public testing::ReplicatedClusterTest {
 protected:
  void StartCluster(int servers, int replication) {
    SchedulerOptions options = testing::LocalScheduler(servers, 1);
    options.replication = replication;
    options.heartbeat_timeout_s = 0.5;
    StartServersAndWorker(options, [](Node* node, const RequestRetry& retry) {
      auto client = std::make_unique<KVWorker>(node, retry);
      KeyCacheOptions cache;
      cache.enabled = true;
      cache.min_keys = 1;
      client->SetKeyCache(cache);
      return client;
    });
  }

  // 3000 rows of 8 features among 400, written as libsvm.
  std::string WriteData() {
    std::mt19937 random(3);
    std::string text;
    for (int row = 0; row < 3000; ++row) {
      text += "1";
      std::vector<int> features;
      for (int f = 0; f < 8; ++f) features.push_back(static_cast<int>(random() % 400));
      std::sort(features.begin(), features.end());
      features.erase(std::unique(features.begin(), features.end()), features.end());
      for (int f : features) text += " " + std::to_string(f + 1) + ":1";
      text += "\n";
    }
    const std::string path = folder_.path() + "/data.libsvm";
    testing::WriteFile(path, text);
    return path;
  }

  // Trains one pass over the data through a pipeline `depth` deep with the
  // filter at `threshold`; `after_batch(b)` runs after minibatch b's push.
  // Returns the remainders held just before the final wait.
  size_t Train(float threshold, int depth, const std::function<void(uint64_t)>& after_batch) {
    PushFilterOptions filter;
    filter.threshold = threshold;
    const SharedArray<const Key> bias_key = BiasKey();
    MinibatchPipeline pipeline(client_.get(), &model_, bias_key, /*use_bias=*/false, depth, filter);
    BatchStream stream({InputSplit{WriteData()}}, ReaderOptions(), 50);
    const EpochClock clock = EpochClock::Outside();
    uint64_t batches = 0;
    for (bool have = pipeline.Start(&stream); have; ++batches) {
      const bool have_next = pipeline.StartNext(&stream, clock, batches);
      pipeline.WaitForRows();
      pipeline.ComputeGradients();
      pipeline.PushGradients(clock.After(batches + 1));
      if (after_batch) after_batch(batches);
      pipeline.Advance();
      have = have_next;
    }
    const size_t held = pipeline.filter().remainder_rows();
    given_ = pipeline.filter().rows_given();
    sent_ = pipeline.filter().rows_sent();
    pipeline.WaitForPushes();
    EXPECT_EQ(pipeline.filter().remainder_rows(), 0u);
    return held;
  }

  // Every key's row on the servers is minus its gradients' total.
  void ExpectRowsAreMinusTheTotals() {
    std::vector<Key> keys;
    std::vector<float> values;
    client_->Dump(kWeightTable, kWidth, &keys, &values, 60);
    std::map<Key, std::array<double, kWidth>> rows;
    for (size_t i = 0; i < keys.size(); ++i) {
      for (int j = 0; j < kWidth; ++j) rows[keys[i]][j] = values[i * kWidth + j];
    }
    ASSERT_EQ(rows.size(), model_.totals().size());
    for (const auto& [key, total] : model_.totals()) {
      ASSERT_EQ(rows.count(key), 1u) << key;
      for (int j = 0; j < kWidth; ++j) ASSERT_EQ(rows[key][j], -total[j]) << key << " " << j;
    }
  }

  FixedGradients model_;
  testing::TempFolder folder_{"push_filter"};
  uint64_t given_ = 0, sent_ = 0;
};

TEST_F(PushFilterCluster, AfterTheFinalFlushTheServersHoldEveryGradientExactlyOnce) {
  StartCluster(2, 0);
  const size_t held = Train(/*threshold=*/0.25f, /*depth=*/2, nullptr);
  EXPECT_GT(held, 0u) << "nothing was held back to flush: the test shows nothing";
  EXPECT_LT(sent_, given_ / 2) << "the filter sent " << sent_ << " of " << given_ << " rows";
  ExpectRowsAreMinusTheTotals();
}

TEST_F(PushFilterCluster, WithoutTheFilterEveryRowGoesAndTheSumsAreTheSame) {
  StartCluster(2, 0);
  EXPECT_EQ(Train(/*threshold=*/0, /*depth=*/1, nullptr), 0u);
  ExpectRowsAreMinusTheTotals();
}

TEST_F(PushFilterCluster,
       RemaindersAreNeitherLostNorCountedTwiceThroughAServerLeavingAndReturning) {
  StartCluster(3, 1);
  const size_t held = Train(/*threshold=*/0.25f, /*depth=*/2, [this](uint64_t batch) {
    if (batch == 10) {
      StopServer(1);
      ASSERT_TRUE(WaitFor([&] { return PrimaryOfNoRange(*worker_node_, 1); }, 20));
    } else if (batch == 30) {
      RestartServer(1);
      ASSERT_TRUE(WaitFor([&] { return servers_[1]->serving(); }, 30));
    }
  });
  EXPECT_GT(held, 0u);
  ExpectRowsAreMinusTheTotals();
}

}  // namespace
}  // namespace keel
