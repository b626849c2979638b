// Fault injection in the transport, and the client's resends that survive it:
// Vans and nodes in one process, over loopback.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "kv/van.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;
using testing::LocalNode;
using testing::WaitFor;

// A sending Van with faults and a receiving Van that records what arrives.
class VanPair : public ::testing::Test {
 protected:
  void Open(const TransportFaults& faults) {
    VanOptions receiving;
    receiver_ = std::make_unique<Van>(receiving);
    receiver_->Start([this](Message&& message) {
      std::lock_guard<std::mutex> lock(mutex_);
      received_.push_back(message.meta);
    });
    VanOptions sending;
    sending.faults = faults;
    sender_ = std::make_unique<Van>(sending);
    sender_->Start([](Message&&) {});
    sender_->Connect(1, receiver_->address());
  }

  void TearDown() override {
    if (sender_) sender_->Stop();
    if (receiver_) receiver_->Stop();
  }

  void Send(proto::Command command, uint64_t sequence, bool sent_until_answered = false) {
    Message message;
    message.meta.set_command(command);
    message.meta.set_sequence(sequence);
    message.sent_until_answered = sent_until_answered;
    sender_->Send(1, message);
  }

  std::vector<proto::Meta> Received() {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }

  std::unique_ptr<Van> receiver_, sender_;
  std::mutex mutex_;
  std::vector<proto::Meta> received_;
};

TEST_F(VanPair, DropsAShareOfDataMessagesAndNoControlMessage) {
  TransportFaults faults;
  faults.drop_rate = 0.5;
  faults.seed = 3;
  Open(faults);
  constexpr int kData = 1000, kControl = 20;
  for (int i = 0; i < kData; ++i) Send(i % 2 ? proto::PUSH : proto::PULL, i);
  for (int i = 0; i < kControl; ++i) Send(proto::BARRIER, kData + i);
  const TransportFaultCounts counts = sender_->fault_counts();
  EXPECT_EQ(counts.data_messages, static_cast<uint64_t>(kData));
  EXPECT_GT(counts.dropped, 0u);
  EXPECT_LT(counts.dropped, static_cast<uint64_t>(kData));
  const size_t expected = kData - counts.dropped + kControl;
  ASSERT_TRUE(WaitFor([&] { return Received().size() == expected; }, 10))
      << Received().size() << " of " << expected;
  int control = 0;
  for (const proto::Meta& meta : Received()) control += meta.command() == proto::BARRIER;
  EXPECT_EQ(control, kControl);
}

TEST_F(VanPair, OnControlMessagesOnlyThoseSentUntilAnsweredAreDropped) {
  TransportFaults faults;
  faults.drop_rate = 1;
  faults.control = true;
  Open(faults);
  // The same command both ways: the sender's mark decides, not the command.
  for (int i = 0; i < 10; ++i) Send(proto::BARRIER, i, /*sent_until_answered=*/true);
  for (int i = 10; i < 20; ++i) Send(proto::BARRIER, i);
  Send(proto::REGISTER, 20);
  ASSERT_TRUE(WaitFor([&] { return Received().size() == 11; }, 10)) << Received().size();
  for (const proto::Meta& meta : Received()) EXPECT_GE(meta.sequence(), 10u);
  EXPECT_EQ(sender_->fault_counts().dropped, 10u);
}

TEST_F(VanPair, DelayedMessagesToOnePeerArriveInTheOrderSent) {
  TransportFaults faults;
  faults.delay_ms = 1;
  faults.delay_jitter_ms = 20;  // far more than the gap between sends
  faults.delay_rate = 0.5;      // and some not delayed at all
  Open(faults);
  constexpr int kMessages = 200;
  for (int i = 0; i < kMessages; ++i) Send(proto::PUSH, i);
  ASSERT_TRUE(WaitFor([&] { return Received().size() == kMessages; }, 20)) << Received().size();
  const std::vector<proto::Meta> received = Received();
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(received[i].sequence(), static_cast<uint64_t>(i));
  EXPECT_GT(sender_->fault_counts().delayed, 0u);
  EXPECT_LT(sender_->fault_counts().delayed, static_cast<uint64_t>(kMessages));
}

TEST(TransportFaults, RefusesSharesOutsideZeroToOne) {
  TransportFaults faults;
  faults.drop_rate = 1.5;
  EXPECT_TRUE(Contains(ErrorOf([&] { faults.Check(); }), "drop rate 1.5 is not in [0, 1]"));
  faults.drop_rate = 0;
  faults.delay_ms = -1;
  EXPECT_TRUE(Contains(ErrorOf([&] { faults.Check(); }), "negative"));
}

TEST(RequestRetry, WaitsDoubleUpToTheLargest) {
  RequestRetry retry;
  retry.timeout_s = 1;
  retry.max_timeout_s = 5;
  EXPECT_DOUBLE_EQ(retry.TimeoutAfter(1), 1);
  EXPECT_DOUBLE_EQ(retry.TimeoutAfter(2), 2);
  EXPECT_DOUBLE_EQ(retry.TimeoutAfter(3), 4);
  EXPECT_DOUBLE_EQ(retry.TimeoutAfter(4), 5);
  EXPECT_DOUBLE_EQ(retry.TimeoutAfter(9), 5);
  retry.max_attempts = 0;
  EXPECT_TRUE(Contains(ErrorOf([&] { retry.Check(); }), "attempts 0"));
}

// A scheduler, two servers (server 0's node injecting `server_faults` into
// its responses) and a worker resending after `retry`, in one process.
class LossyCluster : public testing::ClusterTest {
 protected:
  void Start(const TransportFaults& server_faults, const RequestRetry& retry,
             const TransportFaults& worker_faults = TransportFaults()) {
    scheduler_ = testing::StartScheduler(testing::LocalScheduler(2, 1));
    OptimizerOptions sgd;
    sgd.learning_rate = 1.0f;
    for (int i = 0; i < 2; ++i) {
      NodeOptions node = LocalNode(proto::SERVER, scheduler_->port());
      node.rank = i;
      if (i == 0) node.faults = server_faults;
      server_nodes_.push_back(std::make_unique<Node>(node));
      servers_.push_back(std::make_unique<KVServer>(server_nodes_.back().get(), sgd));
    }
    NodeOptions worker = LocalNode(proto::WORKER, scheduler_->port());
    worker.faults = worker_faults;
    worker_node_ = std::make_unique<Node>(worker);
    client_ = std::make_unique<KVWorker>(worker_node_.get(), retry);
    StartAll();
  }

  void TearDown() override {
    client_.reset();
    servers_.clear();
    server_nodes_.clear();
    if (scheduler_) scheduler_->Stop();
  }

  // Pushes ones to `keys` `pushes` times, then pulls them: each push applied
  // once moves a weight by -1 (SGD at rate 1 from 0). Each wait is bounded by
  // `timeout_s`.
  void ExpectEveryPushAppliedOnce(const std::vector<Key>& keys, int pushes, double timeout_s) {
    SharedArray<const Key> shared(keys);
    SharedArray<const float> ones(std::vector<float>(keys.size(), 1.0f));
    for (int i = 0; i < pushes; ++i) client_->Wait(client_->Push(shared, ones, 1), timeout_s);
    SharedArray<float> values;
    client_->Wait(client_->Pull(shared, &values, 1), timeout_s);
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(values[i], -pushes) << i;
  }

  // Mixed keys of features 0..n-1 that server `rank` holds.
  std::vector<Key> KeysOf(int rank, int n) {
    std::vector<uint64_t> features;
    for (int f = 0; f < n; ++f) features.push_back(static_cast<uint64_t>(f));
    std::vector<Key> keys;
    for (Key key : MixedKeySet(features)) {
      if (ServerRankOf(key) == rank) keys.push_back(key);
    }
    return keys;
  }
};

RequestRetry Quick(int attempts) { return testing::Retries(0.02, 0.1, attempts); }

TEST_F(LossyCluster, APushWhoseAnswerWasLostIsResentAcknowledgedAndAppliedOnce) {
  TransportFaults lossy;
  lossy.drop_rate = 0.3;  // of server 0's responses
  lossy.seed = 5;
  Start(lossy, Quick(50));
  const std::vector<Key> keys = KeysOf(0, 40);
  ASSERT_FALSE(keys.empty());
  ExpectEveryPushAppliedOnce(keys, 100, 30);
  // Every Wait above returned, so the repeated pushes were answered as successes.
  EXPECT_GT(servers_[0]->duplicate_pushes(), 0u);
  EXPECT_GT(client_->resends(), 0u);
  EXPECT_GT(server_nodes_[0]->transport_fault_counts().dropped, 0u);
}

TEST_F(LossyCluster, AWorkerWithDropsOnItsLinkGetsEveryPushAppliedExactlyOnce) {
  TransportFaults lossy_server, lossy_worker;
  lossy_server.drop_rate = 0.05;  // of server 0's responses
  lossy_server.seed = 7;
  lossy_worker.drop_rate = 0.05;  // of the worker's requests, to both servers
  lossy_worker.seed = 8;
  RequestRetry retry;  // the defaults but for a first estimate of 50 ms
  retry.timeout_s = 0.05;
  Start(lossy_server, retry, lossy_worker);
  std::vector<Key> keys = KeysOf(0, 40);
  for (Key key : KeysOf(1, 40)) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  ExpectEveryPushAppliedOnce(keys, 300, 60);
  EXPECT_GT(worker_node_->transport_fault_counts().dropped, 0u);
  EXPECT_GT(server_nodes_[0]->transport_fault_counts().dropped, 0u);
  EXPECT_GT(client_->resends(), 0u);
}

TEST_F(LossyCluster, LostClockAnnouncementsAreResentUntilAcknowledged) {
  TransportFaults lossy;
  lossy.drop_rate = 0.3;
  lossy.seed = 6;
  Start(TransportFaults(), Quick(50), lossy);  // the worker loses its own requests
  for (int i = 1; i <= 50; ++i) client_->AnnounceClock(i, /*wait=*/true, 30);
  client_->AnnounceClock(kLeaveClock, /*wait=*/true, 30);
  EXPECT_GT(worker_node_->transport_fault_counts().dropped, 0u);
  EXPECT_GT(client_->resends(), 0u);
}

TEST_F(LossyCluster, ARequestNeverAnsweredFailsNamingTheServerAfterTheLastAttempt) {
  TransportFaults silent;
  silent.drop_rate = 1;
  Start(silent, Quick(3));
  const std::vector<Key> keys = KeysOf(0, 40);
  SharedArray<const Key> shared(keys);
  SharedArray<float> values;
  const std::string error = ErrorOf([&] { client_->Wait(client_->Pull(shared, &values, 1), 30); });
  EXPECT_TRUE(Contains(error, "no answer to PULL seq")) << error;
  EXPECT_TRUE(Contains(error, "to server 0")) << error;
  EXPECT_TRUE(Contains(error, "after 3 attempt(s)")) << error;
  EXPECT_EQ(client_->resends(), 2u);
}

TEST_F(LossyCluster, ARequestIsNotResentOnceTooManyLaterRequestsWentOut) {
  TransportFaults silent;
  silent.drop_rate = 1;  // server 0 never answers
  Start(silent, Quick(1000000));
  SharedArray<const Key> lost(KeysOf(0, 40));
  SharedArray<const Key> answered(KeysOf(1, 40));
  ASSERT_GT(answered.size(), 0u);
  SharedArray<float> lost_values, values;
  const KVWorker::Handle handle = client_->Pull(lost, &lost_values, 1);
  // Server 1 answers; server 0's request falls behind the resend horizon.
  for (uint64_t i = 0; i < kResendSequenceHorizon + 10; ++i) {
    client_->Wait(client_->Pull(answered, &values, 1), 30);
  }
  const std::string error = ErrorOf([&] { client_->Wait(handle, 30); });
  EXPECT_TRUE(Contains(error, "later requests went out")) << error;
  EXPECT_TRUE(Contains(error, "to server 0")) << error;
}

}  // namespace
}  // namespace keel
