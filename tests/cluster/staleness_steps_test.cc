// Staleness-aware steps on a real server in one process: a scheduler, one
// asynchronous server and two workers over loopback. Table 0 is a
// staleness-aware SGD table at rate 1 (a push of g moves a weight by
// -scale x g); the control table is the job's own (TablesFor), which sums.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <thread>

#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "test_util.h"
#include "worker/hyperparameters.h"

namespace keel {
namespace {

constexpr uint32_t kAwareTable = 0;

class StalenessSteps : public testing::OneServerClusterTest {
 protected:
  void SetUp() override {
    std::map<uint32_t, TableSpec> tables;
    tables[kAwareTable].optimizer.learning_rate = 1.0f;
    tables[kAwareTable].optimizer.staleness_aware = true;
    tables[kControlTable] = TablesFor(Hyperparameters())[kControlTable];
    tables[kControlTable].width = 1;  // its optimizer, at the width these tests push
    StartCluster(2, [&](Node* node) {
      return std::make_unique<KVServer>(node, OptimizerOptions(), tables);
    });
  }

  // Worker `w` pushes a gradient of 1 to the key, read at `read_clock`.
  void PushOne(int w, uint32_t table, std::optional<int64_t> read_clock = std::nullopt) {
    clients_[w]->Wait(clients_[w]->Push(key_, SharedArray<const float>(std::vector<float>{1}), 1,
                                        table, read_clock));
  }
  float Read(int w, uint32_t table) {
    SharedArray<float> values;
    clients_[w]->Wait(clients_[w]->Pull(key_, &values, 1, table));
    return values[0];
  }
  // Worker 0 reads the key at clock 5; then worker 1 pushes three times.
  void ReadThenThreeOtherPushes(uint32_t table) {
    clients_[0]->set_clock(5);
    Read(0, table);
    for (int i = 0; i < 3; ++i) PushOne(1, table);
  }

  SharedArray<const Key> key_{std::vector<Key>{MixKey(1)}};
};

TEST_F(StalenessSteps, APushThreeUpdatesLateTakesOneOverRootThreeOfItsStep) {
  ReadThenThreeOtherPushes(kAwareTable);
  PushOne(0, kAwareTable, /*read_clock=*/5);
  // Worker 1's pushes carry no read clock: whole steps.
  EXPECT_NEAR(Read(0, kAwareTable), -3.0 - 1.0 / std::sqrt(3.0), 1e-6);
}

TEST_F(StalenessSteps, APushReadingTheLatestRowsTakesItsWholeStep) {
  ReadThenThreeOtherPushes(kAwareTable);
  clients_[0]->set_clock(6);
  Read(0, kAwareTable);
  PushOne(0, kAwareTable, /*read_clock=*/6);
  EXPECT_FLOAT_EQ(Read(0, kAwareTable), -4.0f);
}

TEST_F(StalenessSteps, ASumTableIsNeverScaled) {
  ReadThenThreeOtherPushes(kControlTable);
  PushOne(0, kControlTable, /*read_clock=*/5);
  EXPECT_FLOAT_EQ(Read(0, kControlTable), -4.0f);
}

TEST_F(StalenessSteps, AReadClockNeverPulledTakesNoLargerStep) {
  ReadThenThreeOtherPushes(kAwareTable);
  PushOne(0, kAwareTable, /*read_clock=*/std::numeric_limits<int64_t>::min());
  PushOne(0, kAwareTable, /*read_clock=*/1000);  // a clock it never pulled at
  EXPECT_FLOAT_EQ(Read(0, kAwareTable), -5.0f);
}

// A worker that leaves the view is forgotten: its pulls' table versions go
// with it (node ids are never reused, so they would only pile up).
TEST_F(StalenessSteps, ADepartedWorkersPullsAreForgotten) {
  Read(0, kAwareTable);
  Read(1, kAwareTable);
  ASSERT_TRUE(testing::WaitFor([&] { return server_->remembered_readers() == 2u; }, 20))
      << server_->remembered_readers() << " readers remembered";
  worker_nodes_[1]->Stop();  // silent: it leaves the view at the heartbeat timeout
  ASSERT_TRUE(testing::WaitFor([&] { return server_->remembered_readers() == 1u; }, 20))
      << server_->remembered_readers() << " readers remembered";
}

}  // namespace
}  // namespace keel
