// ConnectionWatch: a watched send socket's lost connection is reported once,
// and so is a connection that could never be made (a peer gone before the
// socket connected).
#include "kv/connection_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "test_util.h"

namespace keel {
namespace {

constexpr int kNode = 7;

class ConnectionWatchTest : public ::testing::Test {
 protected:
  // A loopback endpoint where nothing listens: bound once, then closed.
  std::string FreeEndpoint() {
    zmq::socket_t listener(context_, zmq::socket_type::router);
    listener.set(zmq::sockopt::linger, 0);
    listener.bind("tcp://127.0.0.1:*");
    return listener.get(zmq::sockopt::last_endpoint);
  }

  // A send socket to `endpoint`, watched as node kNode's.
  void Connect(const std::string& endpoint) {
    sender_.set(zmq::sockopt::linger, 0);
    sender_.set(zmq::sockopt::reconnect_ivl, 50);
    watch_id_ = watch_.Watch(sender_, kNode);
    sender_.connect(endpoint);
  }

  void TearDown() override {
    ConnectionWatch::Unwatch(sender_);
    watch_.Forget(watch_id_);
    watch_.Stop();
  }

  zmq::context_t context_{1};
  std::atomic<int> reports_{0};
  std::atomic<int> reported_node_{-1};
  ConnectionWatch watch_{context_, [this](int node) {
                           reported_node_ = node;
                           ++reports_;
                         }};
  zmq::socket_t sender_{context_, zmq::socket_type::dealer};
  uint64_t watch_id_ = 0;
};

TEST_F(ConnectionWatchTest, AConnectionNeverMadeIsReportedOnceNotAtEveryRetry) {
  Connect(FreeEndpoint());
  ASSERT_TRUE(testing::WaitFor([&] { return reports_ > 0; }, 10))
      << "a socket whose peer refuses every connection was never reported";
  EXPECT_EQ(reported_node_, kNode);
  // libzmq retries every 50 ms meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(reports_, 1);
}

TEST_F(ConnectionWatchTest, AClosedConnectionIsReportedOnceThoughReconnectsFail) {
  auto peer = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
  peer->set(zmq::sockopt::linger, 0);
  peer->bind("tcp://127.0.0.1:*");
  Connect(peer->get(zmq::sockopt::last_endpoint));
  // Connected once a message gets through.
  sender_.send(zmq::buffer("hello", 5), zmq::send_flags::none);
  peer->set(zmq::sockopt::rcvtimeo, 10000);
  zmq::message_t identity, body;
  ASSERT_TRUE(peer->recv(identity));
  ASSERT_TRUE(peer->recv(body));
  EXPECT_EQ(reports_, 0);
  peer.reset();  // the peer goes: its port now refuses
  ASSERT_TRUE(testing::WaitFor([&] { return reports_ > 0; }, 10))
      << "a closed connection was never reported";
  EXPECT_EQ(reported_node_, kNode);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(reports_, 1);
}

}  // namespace
}  // namespace keel
