// Key caching with every role in one process, over loopback: a worker names
// the key lists its servers kept instead of sending the keys, and every push
// is applied exactly once through replication, a server that does not hold a
// list, view changes and a server's restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "kv/sent_key_lists.h"
#include "server/kv_server.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::LocalNode;
using testing::WaitFor;

KeyCacheOptions CacheEveryList() {
  KeyCacheOptions options;
  options.enabled = true;
  options.min_keys = 1;
  return options;
}

// A push that names a kept list instead of sending its keys.
bool NamesAKeptList(const Message& message) {
  return message.meta.key_list() != 0 && message.frames.size() == 1 &&
         message.meta.command() == proto::PUSH;
}

// A worker whose first request naming a kept list names, once, an id no
// server was ever offered: as a server that dropped its lists answers.
class WorkerNamingAnUnknownListOnce : public KVWorker {
 public:
  using KVWorker::KVWorker;

 protected:
  void SendPart(int server_id, Message& message) override {
    const bool named = NamesAKeptList(message);
    if (named && !renamed_.exchange(true)) message.meta.set_key_list(1u << 30);
    KVWorker::SendPart(server_id, message);
  }

 private:
  std::atomic<bool> renamed_{false};
};

// A worker whose first request naming a kept list is lost on its way; when
// it goes again (with its keys), a copy of the lost send naming an id the
// server does not hold goes just before it: the server's "unknown list"
// answer to the earlier send comes after the part went again with its keys.
class WorkerAnsweredUnknownAfterItsResend : public KVWorker {
 public:
  using KVWorker::KVWorker;

 protected:
  void SendPart(int server_id, Message& message) override {
    const bool named = NamesAKeptList(message);
    std::unique_lock<std::mutex> lock(mutex_);
    if (named && !lost_) {
      lost_ = Message();
      lost_->meta = message.meta;
      lost_->meta.set_key_list(1u << 30);
      lost_->frames = message.frames;
      return;  // lost
    }
    if (lost_ && !resent_ && message.meta.sequence() == lost_->meta.sequence()) {
      resent_ = true;
      Message earlier = *lost_;
      lock.unlock();
      KVWorker::SendPart(server_id, earlier);
    } else {
      lock.unlock();
    }
    KVWorker::SendPart(server_id, message);
  }

 public:
  bool resent() {
    std::lock_guard<std::mutex> lock(mutex_);
    return resent_;
  }

 private:
  std::mutex mutex_;
  std::optional<Message> lost_;
  bool resent_ = false;
};

class KeyCachedCluster : public testing::ReplicatedClusterTest {
 protected:
  enum class Twist { kNone, kRenameOnce, kUnknownAfterResend };

  void StartCluster(int servers, int replication, Twist twist = Twist::kNone) {
    SchedulerOptions options = testing::LocalScheduler(servers, 1);
    options.replication = replication;
    options.heartbeat_timeout_s = 0.5;
    StartServersAndWorker(options, [twist](Node* node, const RequestRetry& retry) {
      std::unique_ptr<KVWorker> client;
      if (twist == Twist::kRenameOnce) {
        client = std::make_unique<WorkerNamingAnUnknownListOnce>(node, retry);
      } else if (twist == Twist::kUnknownAfterResend) {
        client = std::make_unique<WorkerAnsweredUnknownAfterItsResend>(node, retry);
      } else {
        client = std::make_unique<KVWorker>(node, retry);
      }
      client->SetKeyCache(CacheEveryList());
      return client;
    });
  }

  // Pushes a gradient of 1, 2 (by column) for every key of `keys`, once.
  void PushOnce(const std::vector<Key>& keys) { Push(keys, 1); }

  // Checks that every key's row holds exactly `pushes` pushes of PushOnce.
  void ExpectPushedTimes(const std::vector<Key>& keys, int pushes) {
    const std::vector<float> values = Pull(keys);
    ASSERT_EQ(values.size(), keys.size() * kWidth);
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(values[i * kWidth], -1.0f * pushes) << "key " << i;
      ASSERT_EQ(values[i * kWidth + 1], -2.0f * pushes) << "key " << i;
    }
  }

  uint64_t ServerHits() const {
    uint64_t hits = 0;
    for (const auto& server : servers_) {
      if (server) hits += server->key_list_hits();
    }
    return hits;
  }

  uint64_t ServerSlotHits() const {
    uint64_t hits = 0;
    for (const auto& server : servers_) {
      if (server) hits += server->key_list_slot_hits();
    }
    return hits;
  }

  static std::vector<Key> SomeKeys() { return SpreadKeys(500); }
};

TEST_F(KeyCachedCluster, RepeatedRequestsNameTheKeptListsAndSumExactly) {
  StartCluster(2, 0);
  const std::vector<Key> keys = SomeKeys();
  for (int i = 0; i < 6; ++i) PushOnce(keys);
  ExpectPushedTimes(keys, 6);
  ExpectPushedTimes(keys, 6);
  // The first push of a list goes with its keys, the second offers it, the
  // rest name it (a part per server each).
  EXPECT_GE(client_->named_key_lists(), 2u * 4);
  EXPECT_GE(ServerHits(), 2u * 4);
  EXPECT_EQ(client_->unknown_key_lists(), 0u);
  uint64_t kept = 0;
  for (const auto& server : servers_) kept += server->key_lists_kept();
  EXPECT_GE(kept, 2u);
  // A list of other keys is a list of its own.
  std::vector<Key> fewer(keys.begin(), keys.begin() + keys.size() / 2);
  for (int i = 0; i < 3; ++i) PushOnce(fewer);
  ExpectPushedTimes(fewer, 9);
  std::vector<Key> rest(keys.begin() + keys.size() / 2, keys.end());
  ExpectPushedTimes(rest, 6);
}

// A training minibatch: its pull offers the list (no row of its keys exists
// yet: no slots found), its push names it (the rows made, their slots kept),
// and the next round's pull and push name it and use the slots; every row
// ends exactly as pushed, on a chain too.
TEST_F(KeyCachedCluster, APullThatOffersItsListLetsTheMinibatchsPushNameIt) {
  StartCluster(2, 1);
  const std::vector<Key> keys = SomeKeys();
  const SharedArray<const Key> shared(keys);
  std::vector<float> gradient;
  for (size_t i = 0; i < keys.size(); ++i) {
    for (int c = 0; c < kWidth; ++c) gradient.push_back(static_cast<float>(c + 1));
  }
  const uint64_t named_before = client_->named_key_lists();
  for (int round = 1; round <= 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    SharedArray<float> pulled;
    client_->Wait(client_->Pull(shared, &pulled, kWidth, 0, /*sent_again=*/true), 60);
    ASSERT_EQ(pulled.size(), keys.size() * kWidth);
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(pulled[i * kWidth], -1.0f * (round - 1)) << "key " << i;
    }
    client_->Wait(client_->Push(shared, SharedArray<const float>(gradient), kWidth), 60);
  }
  ExpectPushedTimes(keys, 3);
  // Named from the first push on: 5 requests (a part per server each).
  EXPECT_GE(client_->named_key_lists() - named_before, 5u * 2);
  EXPECT_EQ(client_->unknown_key_lists(), 0u);
  // Rounds 2 and 3 went through the slots the first push found: 4 requests.
  EXPECT_GE(ServerSlotHits(), 4u * 2);
}

// A pull that offers a list whose keys all have rows finds their slots as it
// reads them: the push that names the list next goes straight to the rows.
TEST_F(KeyCachedCluster, AListKeptFromAnOfferKeepsTheSlotsItsRequestFound) {
  StartCluster(2, 0);
  const std::vector<Key> keys = SomeKeys();
  PushOnce(keys);  // with its keys: the rows exist now
  EXPECT_EQ(ServerSlotHits(), 0u);
  const SharedArray<const Key> shared(keys);
  SharedArray<float> pulled;
  client_->Wait(client_->Pull(shared, &pulled, kWidth, 0, /*sent_again=*/true), 60);
  EXPECT_EQ(ServerSlotHits(), 0u);  // the offer itself probes
  PushOnce(keys);                   // names the list: through the offer's slots, a part per server
  EXPECT_EQ(ServerSlotHits(), 2u);
  ExpectPushedTimes(keys, 2);
}

TEST_F(KeyCachedCluster, ABackupGetsThePrimarysKeysAndServesEveryPushOncePromoted) {
  StartCluster(2, 1);
  const std::vector<Key> keys = SomeKeys();
  for (int i = 0; i < 5; ++i) PushOnce(keys);
  EXPECT_GE(ServerHits(), 2u);
  StopServer(0);
  ASSERT_TRUE(ChainsBecome({1}));
  ExpectPushedTimes(keys, 5);
  PushOnce(keys);
  PushOnce(keys);
  ExpectPushedTimes(keys, 7);
}

TEST_F(KeyCachedCluster, AListTheServerDoesNotHoldIsSentAgainWithItsKeysAndAppliedOnce) {
  StartCluster(2, 1, Twist::kRenameOnce);
  const std::vector<Key> keys = SomeKeys();
  for (int i = 0; i < 5; ++i) PushOnce(keys);
  EXPECT_EQ(client_->unknown_key_lists(), 1u);
  uint64_t unknown = 0;
  for (const auto& server : servers_) unknown += server->unknown_key_lists();
  EXPECT_EQ(unknown, 1u);
  ExpectPushedTimes(keys, 5);
  for (const auto& server : servers_) EXPECT_EQ(server->rejected_requests(), 0u);
}

TEST_F(KeyCachedCluster, AnUnknownListAnswerToASendBeforeTheResendWithKeysFailsNothing) {
  StartCluster(2, 0, Twist::kUnknownAfterResend);
  const std::vector<Key> keys = SomeKeys();
  for (int i = 0; i < 5; ++i) PushOnce(keys);
  auto* worker = static_cast<WorkerAnsweredUnknownAfterItsResend*>(client_.get());
  ASSERT_TRUE(worker->resent());
  uint64_t unknown = 0;
  for (const auto& server : servers_) unknown += server->unknown_key_lists();
  EXPECT_EQ(unknown, 1u);
  ExpectPushedTimes(keys, 5);
}

TEST_F(KeyCachedCluster, PushesGoOnThroughViewChangesAndAServerRestartWithoutLossOrDouble) {
  StartCluster(3, 1);
  const std::vector<Key> keys = SomeKeys();
  constexpr int kPushes = 60;
  std::atomic<int> pushed{0};
  std::thread pusher([&] {
    for (int i = 0; i < kPushes; ++i) {
      PushOnce(keys);
      pushed.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  ASSERT_TRUE(WaitFor([&] { return pushed.load() >= 10; }, 60));
  const uint64_t named_before = client_->named_key_lists();
  StopServer(1);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ranges = worker_node_->ranges();
        for (size_t r = 0; ranges && r < ranges->num_ranges(); ++r) {
          const auto chain = ranges->Chain(r);
          if (std::find(chain.begin(), chain.end(), 1) != chain.end()) return false;
        }
        return ranges != nullptr;
      },
      20));
  ASSERT_TRUE(WaitFor([&] { return pushed.load() >= 25; }, 60));
  RestartServer(1);
  ASSERT_TRUE(WaitFor([&] { return servers_[1]->serving(); }, 30));
  pusher.join();
  ExpectPushedTimes(keys, kPushes);
  EXPECT_GT(named_before, 0u);
  // Lists were offered and named again after the view changes.
  EXPECT_GT(client_->named_key_lists(), named_before + 10);
}

// A member's requests built by hand: the server's answers to a list it does
// not hold and to malformed ones, and the rows they leave.
class RawKeyListRequests : public testing::ClusterTest {
 protected:
  void SetUp() override {
    scheduler_ = testing::StartScheduler(testing::LocalScheduler(1, 2));
    server_nodes_.resize(1);
    servers_.resize(1);
    NodeOptions options = LocalNode(proto::SERVER, scheduler_->port(), 0.1);
    options.rank = 0;
    OptimizerOptions sgd;
    sgd.name = "sgd";
    sgd.learning_rate = 1.0f;
    server_nodes_[0] = std::make_unique<Node>(options);
    servers_[0] = std::make_unique<KVServer>(server_nodes_[0].get(), sgd);
    MakeWorker(0.1, testing::PatientRetry());
    raw_ = std::make_unique<Node>(LocalNode(proto::WORKER, scheduler_->port(), 0.1));
    raw_->SetDataHandler([this](Message&& message) {
      std::lock_guard<std::mutex> lock(mutex_);
      answers_.push_back(std::move(message));
      answered_.notify_all();
    });
    std::vector<Node*> nodes = {server_nodes_[0].get(), raw_.get(), worker_node_.get()};
    testing::StartNodes(nodes);
  }

  void TearDown() override {
    if (raw_) raw_->Stop();
    ClusterTest::TearDown();
    raw_.reset();
  }

  // Sends `message` to the server and returns its answer.
  Message Ask(Message message) {
    message.meta.set_sequence(raw_->NextSequence());
    message.meta.set_value_width(1);
    const uint64_t sequence = message.meta.sequence();
    raw_->Send(raw_->ServerId(0), message);
    std::unique_lock<std::mutex> lock(mutex_);
    const bool answered = answered_.wait_for(lock, std::chrono::seconds(10), [&] {
      for (const Message& answer : answers_) {
        if (answer.meta.sequence() == sequence) return true;
      }
      return false;
    });
    EXPECT_TRUE(answered) << "no answer to " << Describe(message.meta);
    for (const Message& answer : answers_) {
      if (answer.meta.sequence() == sequence) return answer;
    }
    return Message();
  }

  static Message Push(uint64_t key_list, const std::vector<Key>* keys, size_t values) {
    Message message;
    message.meta.set_command(proto::PUSH);
    message.meta.set_key_list(key_list);
    message.meta.set_key_count(keys ? keys->size() : values);
    if (keys) message.frames.push_back(AsBytes(SharedArray<const Key>(*keys)));
    message.frames.push_back(AsBytes(SharedArray<const float>(std::vector<float>(values, 1.0f))));
    return message;
  }

  std::vector<float> PullRows(const std::vector<Key>& keys) {
    SharedArray<float> values;
    client_->Wait(client_->Pull(SharedArray<const Key>(keys), &values, 1), 30);
    return std::vector<float>(values.begin(), values.end());
  }

  std::unique_ptr<Node> raw_;
  std::mutex mutex_;
  std::condition_variable answered_;
  std::vector<Message> answers_;
};

TEST_F(RawKeyListRequests, AnUnknownOrMalformedListIsRefusedAndAppliesNothing) {
  const std::vector<Key> keys = {MixKey(1), MixKey(2), MixKey(3)};
  std::vector<Key> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  // An id never offered.
  Message unknown = Ask(Push(77, nullptr, 3));
  EXPECT_TRUE(unknown.meta.unknown_key_list());
  EXPECT_NE(unknown.meta.error().find("holds no key list 77"), std::string::npos)
      << unknown.meta.error();
  EXPECT_EQ(PullRows(sorted), std::vector<float>(3, 0.0f));
  // Offered with its keys: kept and applied.
  Message offered = Ask(Push(5, &sorted, 3));
  EXPECT_TRUE(offered.meta.error().empty()) << offered.meta.error();
  EXPECT_TRUE(offered.meta.key_list_kept());
  EXPECT_EQ(PullRows(sorted), std::vector<float>(3, -1.0f));
  // Named: applied with the kept keys.
  Message named = Ask(Push(5, nullptr, 3));
  EXPECT_TRUE(named.meta.error().empty()) << named.meta.error();
  EXPECT_EQ(PullRows(sorted), std::vector<float>(3, -2.0f));
  // Named with the wrong count of keys or values, or with no frame at all.
  Message wrong_count = Ask(Push(5, nullptr, 2));
  EXPECT_NE(wrong_count.meta.error().find("holds 3 keys, the request says 2"), std::string::npos)
      << wrong_count.meta.error();
  EXPECT_FALSE(wrong_count.meta.unknown_key_list());
  Message no_frames = Push(5, nullptr, 3);
  no_frames.frames.clear();
  EXPECT_FALSE(Ask(no_frames).meta.error().empty());
  // Another list under a kept id is not taken: the request is refused... or
  // served with its own keys, never with the kept ones.
  std::vector<Key> other = {MixKey(4)};
  Message reused = Ask(Push(5, &other, 1));
  EXPECT_FALSE(reused.meta.key_list_kept());
  EXPECT_EQ(PullRows(sorted), std::vector<float>(3, -2.0f));
  EXPECT_EQ(PullRows(other), std::vector<float>(1, -1.0f));
  // A pull naming the list reads its rows.
  Message pull;
  pull.meta.set_command(proto::PULL);
  pull.meta.set_key_list(5);
  pull.meta.set_key_count(3);
  Message rows = Ask(pull);
  ASSERT_TRUE(rows.meta.error().empty()) << rows.meta.error();
  ASSERT_EQ(rows.frames.size(), 1u);
  const auto floats = rows.frames[0].As<const float>();
  EXPECT_EQ(std::vector<float>(floats.begin(), floats.end()), std::vector<float>(3, -2.0f));
  EXPECT_EQ(servers_[0]->unknown_key_lists(), 1u);
}

}  // namespace
}  // namespace keel
