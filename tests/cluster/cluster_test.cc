// Nodes of every role in one process, over loopback: the behaviour of the
// scheduler, servers and client without process boundaries.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "kv/view_delta.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "test_util.h"
#include "worker/scheduler_link.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;
using testing::WaitFor;

using testing::LocalNode;

class InProcessCluster : public testing::ClusterTest {
 protected:
  static constexpr int kServers = 2;

  void SetUp() override {
    scheduler_ = testing::StartScheduler(testing::LocalScheduler(kServers, 1));
    MakeSumServers(kServers);
    MakeWorker();
    StartAll();
  }
};

// Nodes that cannot register (no scheduler at their address: on a loaded
// machine, one whose registration timed out) make StartNodes throw the first
// node's error to the test, which fails with it; thrown on the node's own
// thread, it used to end the whole test process.
TEST(StartNodes, ANodeThatCannotRegisterFailsTheTestRatherThanTheProcess) {
  const int nobody = testing::UnusedPort();
  std::vector<std::unique_ptr<Node>> nodes;
  for (proto::Role role : {proto::SERVER, proto::WORKER}) {
    NodeOptions options = testing::LocalNode(role, nobody, 0.1);
    options.register_timeout_s = 0.5;
    nodes.push_back(std::make_unique<Node>(options));
  }
  const std::string error =
      ErrorOf([&] { testing::StartNodes({nodes[0].get(), nodes[1].get()}); });
  EXPECT_TRUE(Contains(error, "no answer from the scheduler")) << error;
  for (auto& node : nodes) node->Stop();
}

// Every server gets the same view, and the worker the same but for the
// workers (left out of a worker's form).
TEST_F(InProcessCluster, EveryNodeGetsTheSameViewWithARankPerRole) {
  auto view = server_nodes_[0]->view();
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->epoch(), 1u);
  EXPECT_EQ(view->nodes_size(), kServers + 1);
  EXPECT_EQ(view->ranges_size(), kServers);
  proto::ClusterView workers_form = *view;
  CutWorkers(&workers_form);
  EXPECT_EQ(worker_node_->view()->SerializeAsString(), workers_form.SerializeAsString());
  EXPECT_EQ(workers_form.nodes_size(), kServers);
  std::set<int> ranks;
  for (auto& node : server_nodes_) {
    EXPECT_EQ(node->view()->SerializeAsString(), view->SerializeAsString());
    ranks.insert(node->rank());
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(worker_node_->rank(), 0);
}

TEST_F(InProcessCluster, PullReturnsWhatPushesAddedAcrossServers) {
  std::vector<Key> keys = MixedKeySet({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  std::set<int> servers_touched;
  for (Key key : keys) servers_touched.insert(ServerRankOf(key));
  ASSERT_EQ(servers_touched.size(), 2u) << "the keys should span both servers";
  std::vector<float> gradient(keys.size() * 2);
  for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = static_cast<float>(i);
  SharedArray<const Key> shared_keys(keys);
  SharedArray<const float> shared_gradient(gradient);
  client_->Wait(client_->Push(shared_keys, shared_gradient, 2));
  client_->Wait(client_->Push(shared_keys, shared_gradient, 2));
  SharedArray<float> values;
  client_->Wait(client_->Pull(shared_keys, &values, 2));
  ASSERT_EQ(values.size(), gradient.size());
  for (size_t i = 0; i < gradient.size(); ++i) EXPECT_EQ(values[i], -2 * gradient[i]) << i;
}

TEST_F(InProcessCluster, AWidthThatDisagreesWithTheTableFailsWithTheServersReason) {
  SharedArray<const Key> keys(std::vector<Key>{MixKey(1)});
  client_->Wait(client_->Push(keys, SharedArray<const float>(std::vector<float>{1}), 1));
  // "no error": a push of the wrong width was accepted.
  const std::string error = ErrorOf([&] {
    client_->Wait(client_->Push(keys, SharedArray<const float>(std::vector<float>{1, 2}), 2));
  });
  EXPECT_TRUE(Contains(error, "has rows of width 1")) << error;
}

TEST_F(InProcessCluster, ClientRejectsUnsortedKeysBeforeSending) {
  SharedArray<const Key> keys(std::vector<Key>{5, 3});
  EXPECT_THROW(client_->Push(keys, SharedArray<const float>(std::vector<float>{1, 2}), 1), Error);
  EXPECT_EQ(client_->pending(), 0u);
}

// A client whose sends fail, when told to, as a socket's can: with an
// exception that is not Keel's Error (which means "not connected now: resend
// later").
class FailingSendWorker : public KVWorker {
 public:
  using KVWorker::KVWorker;
  std::atomic<bool> failing{false};

 protected:
  void SendPart(int server_id, Message& message) override {
    if (failing.load()) throw std::runtime_error("zmq_msg_send: Cannot allocate memory");
    KVWorker::SendPart(server_id, message);
  }
};

// The message of any exception `body` throws, or "no error".
std::string AnyErrorOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// Two summing servers and a worker of type `TwistedWorker`, which resends
// soon: a request left behind would be resent within the test.
template <typename TwistedWorker>
class TwistedWorkerCluster : public testing::ClusterTest {
 protected:
  void SetUp() override {
    scheduler_ = testing::StartScheduler(testing::LocalScheduler(2, 1));
    MakeSumServers(2);
    worker_node_ = std::make_unique<Node>(LocalNode(proto::WORKER, scheduler_->port()));
    auto worker =
        std::make_unique<TwistedWorker>(worker_node_.get(), testing::Retries(0.02, 0.05, 100));
    worker_ = worker.get();
    client_ = std::move(worker);
    StartAll();
  }
  TwistedWorker* worker_ = nullptr;
};

using SendFailure = TwistedWorkerCluster<FailingSendWorker>;

TEST_F(SendFailure, ARequestWhoseSendThrowsFailsAtOnceAndIsForgotten) {
  const std::vector<Key> keys = MixedKeySet({1, 2, 3, 4, 5, 6, 7, 8});
  const std::vector<float> gradient(keys.size(), 1.0f);
  SharedArray<const Key> shared_keys(keys);
  SharedArray<const float> shared_gradient(gradient);
  SharedArray<float> values;
  worker_->failing = true;
  // An error naming the request, the part and the cause.
  std::string error = AnyErrorOf([&] { client_->Push(shared_keys, shared_gradient, 1); });
  EXPECT_TRUE(Contains(error, "could not be sent")) << error;
  EXPECT_TRUE(Contains(error, "Cannot allocate memory")) << error;
  EXPECT_EQ(client_->pending(), 0u);
  error = AnyErrorOf([&] { client_->Pull(shared_keys, &values, 1); });
  EXPECT_TRUE(Contains(error, "could not be sent")) << error;
  EXPECT_EQ(client_->pending(), 0u);
  error = AnyErrorOf([&] { client_->AnnounceClock(3, /*wait=*/true, 5); });
  EXPECT_TRUE(Contains(error, "could not be sent")) << error;
  EXPECT_EQ(client_->pending(), 0u);
  // Nothing of them is resent later: the push failed, and is not applied.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(client_->resends(), 0u);
  worker_->failing = false;
  client_->Wait(client_->Pull(shared_keys, &values, 1));
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(values[i], 0.0f) << i;
}

// A client that loses the first copy of every part while told to, as a
// network that drops a message: the server answers the resend.
class LosingFirstCopiesWorker : public KVWorker {
 public:
  using KVWorker::KVWorker;
  std::atomic<bool> losing{false};

 protected:
  void SendPart(int server_id, Message& message) override {
    if (losing.load() && message.meta.send() == 1) return;  // lost on its way
    KVWorker::SendPart(server_id, message);
  }
};

using LostFirstCopies = TwistedWorkerCluster<LosingFirstCopiesWorker>;

// A part whose first copy was lost is answered on its resend (Meta.send
// echoed): the resend was needed, and the answer is no sample of a round trip.
TEST_F(LostFirstCopies, AnAnswerToTheResendDoesNotCountItNeedless) {
  const std::vector<Key> keys = MixedKeySet({1, 2, 3, 4, 5, 6, 7, 8});
  const std::vector<Key> others = MixedKeySet({11, 12, 13, 14, 15, 16, 17, 18});
  const SharedArray<const float> gradient(std::vector<float>(keys.size(), 1.0f));
  worker_->losing = true;
  client_->Wait(client_->Push(SharedArray<const Key>(keys), gradient, 1), 10);
  worker_->losing = false;
  EXPECT_GE(client_->resends(), 1u);
  EXPECT_EQ(client_->needless_resends(), 0u);
  // Applied once: as a push of other keys sent once.
  client_->Wait(client_->Push(SharedArray<const Key>(others), gradient, 1), 10);
  SharedArray<float> lost_first, sent_once;
  client_->Wait(client_->Pull(SharedArray<const Key>(keys), &lost_first, 1), 10);
  client_->Wait(client_->Pull(SharedArray<const Key>(others), &sent_once, 1), 10);
  EXPECT_EQ(std::vector<float>(lost_first.begin(), lost_first.end()),
            std::vector<float>(sent_once.begin(), sent_once.end()));
}

// Sends raw multipart messages to a server as if from the worker's node id.
class RawSender {
 public:
  explicit RawSender(const std::string& address)
      : context_(1), socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect("tcp://" + address);
  }
  void Send(std::vector<zmq::message_t> frames) { zmq::send_multipart(socket_, frames); }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
};

template <typename T>
std::string Raw(std::vector<T> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// A message of `meta` with `data` frames, for a node to send on its own
// connection (data from any other connection is dropped before a server sees it).
Message WithFrames(const proto::Meta& meta, const std::vector<std::string>& data) {
  Message message;
  message.meta = meta;
  for (const auto& bytes : data) {
    message.frames.push_back(Bytes(std::vector<char>(bytes.begin(), bytes.end())));
  }
  return message;
}

TEST_F(InProcessCluster, ServerRejectsMalformedRequestsCountsThemAndKeepsServing) {
  Node& server_node = *server_nodes_[0];
  KVServer& server = *servers_[0];
  RawSender raw(server_node.address());
  proto::Meta meta;
  meta.set_sender(worker_node_->id());
  meta.set_value_width(1);
  meta.set_epoch(1);

  // Not a Meta at all: dropped by the transport.
  std::vector<zmq::message_t> garbage;
  garbage.emplace_back("\xff\xff\xff", 3);
  raw.Send(std::move(garbage));
  ASSERT_TRUE(WaitFor([&] { return server_node.malformed_messages() == 1; }, 5));

  // Malformed requests from the worker itself (a broken member): refused.
  const int to = server_node.id();
  meta.set_command(proto::PUSH);
  meta.set_sequence(1000001);
  meta.set_key_count(3);
  Message truncated = WithFrames(meta, {Raw<Key>({1, 2, 3}).substr(0, 20), Raw<float>({1, 2, 3})});
  worker_node_->Send(to, truncated);
  meta.set_sequence(1000002);
  Message missing = WithFrames(meta, {Raw<Key>({1, 2})});  // value frame missing, key count wrong
  worker_node_->Send(to, missing);
  meta.set_sequence(1000003);
  Message unsorted = WithFrames(meta, {Raw<Key>({3, 2, 1}), Raw<float>({1, 2, 3})});
  worker_node_->Send(to, unsorted);
  meta.set_sequence(1000004);
  meta.set_command(static_cast<proto::Command>(77));
  Message unknown = WithFrames(meta, {Raw<Key>({1, 2, 3})});
  worker_node_->Send(to, unknown);
  ASSERT_TRUE(WaitFor([&] { return server.rejected_requests() == 4; }, 5))
      << "rejected " << server.rejected_requests();

  // Still serving.
  std::vector<Key> keys = MixedKeySet({11, 12, 13, 14});
  SharedArray<const Key> shared(keys);
  client_->Wait(client_->Push(shared, SharedArray<const float>(std::vector<float>(4, 1.0f)), 1));
  SharedArray<float> values;
  client_->Wait(client_->Pull(shared, &values, 1));
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(values[i], -1.0f);
  EXPECT_EQ(server.rejected_requests(), 4u);
}

TEST_F(InProcessCluster, BarrierReleasesEveryoneOnceAllArrive) {
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (auto& node : server_nodes_) {
    threads.emplace_back([&] {
      node->Barrier(kAllGroup, 10);
      ++released;
    });
  }
  // Nobody is released before the worker arrives. A deliberate window, the
  // point of the test: no event marks "still held", so the servers are given
  // 200 ms in which a wrong release would show.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(released.load(), 0);
  worker_node_->Barrier(kAllGroup, 10);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(released.load(), kServers);
}

TEST_F(InProcessCluster, JobEndsWhenEveryWorkerReportsDone) {
  SchedulerLink(*worker_node_).ReportDone("");
  EXPECT_EQ(scheduler_->WaitForJob(10), 0);
  for (auto& node : server_nodes_) EXPECT_TRUE(node->WaitForShutdown(10));
  EXPECT_TRUE(worker_node_->WaitForShutdown(10));
}

TEST_F(InProcessCluster, AFailedWorkerIsCounted) {
  SchedulerLink(*worker_node_).ReportDone("disk full");
  EXPECT_EQ(scheduler_->WaitForJob(10), 1);
}

TEST_F(InProcessCluster, ANodeBeyondTheExpectedCountIsRefused) {
  Node extra(LocalNode(proto::WORKER, scheduler_->port()));
  // "no error": an extra worker was admitted.
  const std::string error = ErrorOf([&] { extra.Start(); });
  EXPECT_TRUE(Contains(error, "already has its 1 WORKER")) << error;
}

TEST(Scheduler, RefusesANodeItCannotReachNamingBothAddresses) {
  SchedulerOptions options;
  options.bind_host = "127.0.0.1";
  options.connect_timeout_s = 2;
  Scheduler scheduler(options);
  scheduler.Start();
  // A REGISTER naming a port of this host that nothing listens on.
  const std::string closed = "127.0.0.1:" + std::to_string(testing::UnusedPort());
  zmq::context_t context(1);
  zmq::socket_t raw(context, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::rcvtimeo, 10000);
  raw.connect("tcp://127.0.0.1:" + std::to_string(scheduler.port()));
  proto::Meta meta;
  meta.set_command(proto::REGISTER);
  meta.mutable_node()->set_role(proto::WORKER);
  meta.mutable_node()->set_rank(-1);
  meta.mutable_node()->set_address(closed);
  const std::string header = meta.SerializeAsString();
  raw.send(zmq::buffer(header), zmq::send_flags::none);
  zmq::message_t reply;
  ASSERT_TRUE(raw.recv(reply)) << "no answer within 10 s";
  proto::Meta answer;
  ASSERT_TRUE(answer.ParseFromArray(reply.data(), static_cast<int>(reply.size())));
  EXPECT_EQ(answer.error(), "node at " + closed +
                                " (seen from 127.0.0.1:" + std::to_string(scheduler.port()) +
                                ") is unreachable: connection refused; its registration came "
                                "from 127.0.0.1; give it an --advertise address the scheduler "
                                "can reach");
  // The refused node took no rank: a reachable worker still gets rank 0.
  Node server(LocalNode(proto::SERVER, scheduler.port()));
  Node worker(LocalNode(proto::WORKER, scheduler.port()));
  std::thread starting([&] { server.Start(); });
  worker.Start();
  starting.join();
  EXPECT_EQ(worker.rank(), 0);
  worker.Stop();
  server.Stop();
  scheduler.Stop();
}

TEST(Node, FailsClearlyWhenTheSchedulerDoesNotAnswer) {
  NodeOptions options = LocalNode(proto::WORKER, testing::UnusedPort());
  options.register_timeout_s = 1;
  Node node(options);
  // "no error": it started without a scheduler.
  const std::string error = ErrorOf([&] { node.Start(); });
  EXPECT_TRUE(Contains(error, "no answer from the scheduler at " + options.scheduler)) << error;
}

// A member that never registers (a server that died as it started) keeps the
// cluster from forming: the others were admitted, so their error says the
// cluster did not form, not that the scheduler did not answer.
TEST(Node, AdmittedButTheClusterNeverFormedSaysSoRatherThanNoAnswer) {
  auto scheduler = testing::StartScheduler(testing::LocalScheduler(/*servers=*/2, /*workers=*/1));
  NodeOptions options = LocalNode(proto::WORKER, scheduler->port());
  options.register_timeout_s = 5;  // admitted well within it, even on a loaded machine
  Node worker(options);
  const std::string error = ErrorOf([&] { worker.Start(); });
  EXPECT_TRUE(Contains(error, "admitted this WORKER (rank 0) but the cluster did not form"))
      << error;
  EXPECT_FALSE(Contains(error, "no answer")) << error;
  worker.Stop();
  scheduler->Stop();
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

TEST(Scheduler, SurvivesARegistrationWithAnAddressZeroMqRejects) {
  SchedulerOptions options;
  options.bind_host = "127.0.0.1";
  Scheduler scheduler(options);
  scheduler.Start();
  {
    zmq::context_t context(1);
    zmq::socket_t raw(context, zmq::socket_type::dealer);
    raw.set(zmq::sockopt::linger, 1000);
    raw.connect("tcp://127.0.0.1:" + std::to_string(scheduler.port()));
    proto::Meta meta;
    meta.set_command(proto::REGISTER);
    meta.set_sender(-1);
    meta.mutable_node()->set_role(proto::WORKER);
    meta.mutable_node()->set_rank(-1);
    meta.mutable_node()->set_address("my host:5000");  // a space: ZeroMQ refuses to connect
    const std::string header = meta.SerializeAsString();
    raw.send(zmq::buffer(header), zmq::send_flags::none);
  }
  // The cluster still forms with well-formed nodes.
  Node server(LocalNode(proto::SERVER, scheduler.port()));
  Node worker(LocalNode(proto::WORKER, scheduler.port()));
  std::thread starting([&] { server.Start(); });
  worker.Start();
  starting.join();
  EXPECT_EQ(worker.view()->epoch(), 1u);
  EXPECT_EQ(worker.rank(), 0);
  worker.Stop();
  server.Stop();
  scheduler.Stop();
}

}  // namespace
}  // namespace keel
