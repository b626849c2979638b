// Wire precision with every role in one process, over loopback: a worker's
// pushes and pulls travel as 16-bit values, the servers apply float32, the
// backups of a chain hold exactly what the primary applied, and a frame whose
// size does not match its declared precision is refused, applying nothing.
#include "kv/wire_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "base/error.h"
#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;
using testing::WaitFor;

constexpr int kWidth = 2;

// A worker whose pushes can be broken on their way out: their values frame
// cut to float32's size for a 16-bit precision, or their precision made one
// no server knows.
class BreakingWorker : public KVWorker {
 public:
  using KVWorker::KVWorker;
  enum class Break { kNone, kFloat32Frame, kUnknownPrecision };
  Break next_push = Break::kNone;

 protected:
  void SendPart(int server_id, Message& message) override {
    if (message.meta.command() == proto::PUSH && next_push != Break::kNone) {
      Message broken = message;
      if (next_push == Break::kFloat32Frame) {
        // Twice the bytes its bf16 Meta declares.
        auto values = SharedArray<float>::Allocate(broken.meta.key_count() * kWidth);
        for (float& value : values) value = 1.0f;
        broken.frames.back() = AsBytes(values);
      } else {
        broken.meta.set_precision(static_cast<proto::WirePrecision>(7));
      }
      KVWorker::SendPart(server_id, broken);
      return;
    }
    KVWorker::SendPart(server_id, message);
  }
};

class WirePrecisionCluster : public testing::ClusterTest {
 protected:
  // `servers` servers with `replication` backups per range (SGD at
  // `learning_rate`, rows starting at 0), and one worker at `precision`.
  void StartCluster(int servers, int replication, proto::WirePrecision precision,
                    float learning_rate = 1.0f) {
    StartReplicatedScheduler(servers, replication);
    OptimizerOptions sgd;
    sgd.name = "sgd";
    sgd.learning_rate = learning_rate;
    for (int rank = 0; rank < servers; ++rank) {
      NodeOptions node = testing::LocalNode(proto::SERVER, scheduler_->port(), 0.1);
      node.rank = rank;
      server_nodes_[rank] = std::make_unique<Node>(node);
      servers_[rank] = std::make_unique<KVServer>(server_nodes_[rank].get(), sgd);
    }
    worker_node_ =
        std::make_unique<Node>(testing::LocalNode(proto::WORKER, scheduler_->port(), 0.1));
    auto worker = std::make_unique<BreakingWorker>(worker_node_.get(), testing::PatientRetry());
    worker_ = worker.get();
    client_ = std::move(worker);
    client_->SetWirePrecision(precision, {0});
    StartAll();
  }

  void Push(const std::vector<Key>& keys, const std::vector<float>& gradients) {
    client_->Wait(
        client_->Push(SharedArray<const Key>(keys), SharedArray<const float>(gradients), kWidth),
        30);
  }
  std::vector<float> Pull(const std::vector<Key>& keys) {
    SharedArray<float> values;
    client_->Wait(client_->Pull(SharedArray<const Key>(keys), &values, kWidth), 30);
    return std::vector<float>(values.begin(), values.end());
  }
  // The servers' float32 rows (a dump always travels as float32).
  std::vector<float> Dumped(std::vector<Key>* keys = nullptr) {
    std::vector<Key> dumped;
    std::vector<float> values;
    client_->Dump(0, kWidth, &dumped, &values, 30);
    if (keys) *keys = dumped;
    return values;
  }

  static std::vector<Key> SomeKeys() {
    std::vector<uint64_t> features;
    for (uint64_t f = 0; f < 300; ++f) features.push_back(f);
    return MixedKeySet(features);
  }

  BreakingWorker* worker_ = nullptr;
};

float Bf16(float value) { return Bf16ToFloat(FloatToBf16(value)); }

TEST_F(WirePrecisionCluster, Bf16PushesAreAppliedAsWidenedFloatsAndPullsComeBackAsBf16) {
  StartCluster(2, 0, proto::WIRE_BF16);
  const std::vector<Key> keys = SomeKeys();
  // 0.1 and 0.3 are not bfloat16 values: each push applies their bf16 form.
  std::vector<float> gradients;
  for (size_t i = 0; i < keys.size(); ++i) gradients.insert(gradients.end(), {0.1f, 0.3f});
  float expected[kWidth] = {0, 0};
  for (int t = 0; t < 5; ++t) {
    Push(keys, gradients);
    expected[0] -= Bf16(0.1f);
    expected[1] -= Bf16(0.3f);
  }
  // The servers' state is float32 (not rounded to bf16 after each step).
  const std::vector<float> state = Dumped();
  ASSERT_EQ(state.size(), keys.size() * kWidth);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(state[i * kWidth], expected[0]) << i;
    ASSERT_EQ(state[i * kWidth + 1], expected[1]) << i;
  }
  // A pull's answer is the state in bf16, widened here.
  const std::vector<float> pulled = Pull(keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(pulled[i * kWidth], Bf16(expected[0])) << i;
    ASSERT_EQ(pulled[i * kWidth + 1], Bf16(expected[1])) << i;
  }
  // A push sends its keys (8 bytes each) and 2 bytes a value, and a Meta per
  // part: less than the keys and float32 values alone would take. A part
  // resent for want of a quick answer (0.2 s on a loaded machine) sends its
  // bytes twice, so the bytes counted are those of a push sent once.
  uint64_t sent = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const uint64_t before = client_->wire_bytes_sent();
    const uint64_t resends_before = client_->resends();
    Push(keys, gradients);
    sent = client_->wire_bytes_sent() - before;
    if (client_->resends() == resends_before) break;
  }
  EXPECT_GT(sent, keys.size() * (8 + kWidth * 2));
  EXPECT_LT(sent, keys.size() * (8 + kWidth * 4));
}

TEST_F(WirePrecisionCluster, ATableNotNamedForBf16TravelsAsFloat32) {
  // A job's counters (the control table) must add up exactly: 20001 is no
  // bfloat16 value (19968 and 20096 are its neighbours).
  StartCluster(1, 0, proto::WIRE_BF16);
  const std::vector<Key> keys = MixedKeySet({1});
  client_->Wait(client_->Push(SharedArray<const Key>(keys),
                              SharedArray<const float>(std::vector<float>{-20001, -1}), kWidth,
                              /*table=*/1),
                30);
  SharedArray<float> counted;
  client_->Wait(client_->Pull(SharedArray<const Key>(keys), &counted, kWidth, /*table=*/1), 30);
  EXPECT_EQ(std::vector<float>(counted.begin(), counted.end()), (std::vector<float>{20001, 1}));
  // The table named travels as bf16 both ways.
  Push(keys, {-20001, -1});
  EXPECT_EQ(Pull(keys), (std::vector<float>{Bf16(20001), 1}));
}

TEST_F(WirePrecisionCluster, ABf16JobConvergesToItsTargets) {
  // Least squares per key, w <- w - rate (w - target), with gradients and
  // weights both travelling as bf16: it reaches its targets within bf16's
  // resolution of them.
  StartCluster(2, 0, proto::WIRE_BF16, /*learning_rate=*/0.5f);
  const std::vector<Key> keys = SomeKeys();
  std::vector<float> targets;
  for (size_t i = 0; i < keys.size() * kWidth; ++i) {
    targets.push_back(std::sin(static_cast<float>(i)) * 3.0f);
  }
  for (int step = 0; step < 40; ++step) {
    const std::vector<float> weights = Pull(keys);
    std::vector<float> gradients(weights.size());
    for (size_t i = 0; i < weights.size(); ++i) gradients[i] = weights[i] - targets[i];
    Push(keys, gradients);
  }
  const std::vector<float> state = Dumped();
  for (size_t i = 0; i < targets.size(); ++i) {
    ASSERT_NEAR(state[i], targets[i], 0.02f) << i;
  }
}

TEST_F(WirePrecisionCluster, APromotedBackupHoldsExactlyWhatThePrimaryAppliedFromBf16Pushes) {
  // The primary passes the bf16 frame down as it came; each replica widens
  // it to the same floats, so a backup's rows are the primary's bit for bit.
  StartCluster(3, 1, proto::WIRE_BF16);
  const std::vector<Key> keys = SomeKeys();
  std::vector<float> gradients;
  for (size_t i = 0; i < keys.size(); ++i) {
    gradients.insert(gradients.end(), {0.1f + 0.001f * static_cast<float>(i), 0.7f});
  }
  for (int t = 0; t < 4; ++t) Push(keys, gradients);
  const std::vector<float> before = Dumped();
  servers_[1].reset();
  server_nodes_[1].reset();
  // Range 1's backup (server 2) is promoted.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ranges = worker_node_->ranges();
        return ranges->Chain(1) == std::vector<int>{2};
      },
      10));
  EXPECT_EQ(Dumped(), before);
}

TEST_F(WirePrecisionCluster, AFrameOfTheWrongSizeForItsPrecisionIsRefusedAndAppliesNothing) {
  StartCluster(1, 0, proto::WIRE_BF16);
  const std::vector<Key> keys = MixedKeySet({1, 2});
  worker_->next_push = BreakingWorker::Break::kFloat32Frame;
  const std::string error = ErrorOf([&] { Push(keys, {1, 1, 1, 1}); });
  EXPECT_TRUE(Contains(error, "has 16 bytes; 4 values of bf16 need 8")) << error;
  worker_->next_push = BreakingWorker::Break::kUnknownPrecision;
  const std::string unknown = ErrorOf([&] { Push(keys, {1, 1, 1, 1}); });
  EXPECT_TRUE(Contains(unknown, "unknown wire precision 7")) << unknown;
  EXPECT_EQ(servers_[0]->rejected_requests(), 2u);
  std::vector<Key> dumped;
  Dumped(&dumped);
  EXPECT_TRUE(dumped.empty());  // nothing applied, no row made
  // The server goes on serving well-formed 16-bit pushes.
  worker_->next_push = BreakingWorker::Break::kNone;
  Push(keys, {1, 2, 3, 4});
  EXPECT_EQ(Dumped(), (std::vector<float>{-1, -2, -3, -4}));
}

TEST_F(WirePrecisionCluster, Fp16FramesHoldingAValuePastItsRangeTravelAsFloat32) {
  StartCluster(1, 0, proto::WIRE_FP16);
  const std::vector<Key> keys = MixedKeySet({1});
  const float third = 1.0f / 3, half_third = Fp16ToFloat(FloatToFp16(third));
  ASSERT_NE(third, half_third);
  // -1e5 is past half's range: the whole push goes as float32, unclipped,
  // its 1/3 too (sgd, rate 1: the weights are minus the gradients' sum).
  Push(keys, {-1e5f, third});
  EXPECT_EQ(Dumped(), (std::vector<float>{1e5f, -third}));
  EXPECT_EQ(client_->wide_fp16_parts(), 1u);
  // A weight past the range: the pull's answer is float32 as well.
  EXPECT_EQ(Pull(keys), (std::vector<float>{1e5f, -third}));
  EXPECT_EQ(client_->wide_fp16_parts(), 2u);
  // Within the range, a push and a pull travel as halves.
  Push(keys, {99999.0f, third});  // past the range: float32
  Push(keys, {0.0f, third});      // a half: 1/3 rounded
  const float weight = -third - third - half_third;
  EXPECT_EQ(Dumped(), (std::vector<float>{1.0f, weight}));
  EXPECT_EQ(Pull(keys), (std::vector<float>{1.0f, Fp16ToFloat(FloatToFp16(weight))}));
  ASSERT_NE(weight, Fp16ToFloat(FloatToFp16(weight)));
  EXPECT_EQ(client_->wide_fp16_parts(), 3u);  // the dumps are float32 asked, not counted
}

}  // namespace
}  // namespace keel
