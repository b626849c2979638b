// RegistrationProbes (scheduler/registration_probes.h): the queue of
// registrations being checked is bounded in count and in bytes.
#include "scheduler/registration_probes.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "kv/memory_network.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::WaitFor;

// Probes whose checks (every address is unreachable on an empty in-process
// network) end only once the test opens the gate.
class HeldProbes : public ::testing::Test {
 protected:
  HeldProbes()
      : probes_(1, "127.0.0.1", 1, std::nullopt, &network_,
                [this](const Message&, const std::string&) {
                  std::unique_lock<std::mutex> lock(mutex_);
                  opened_.wait(lock, [this] { return open_; });
                  ++done_;
                }) {}
  ~HeldProbes() override { Open(); }

  void Open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  int done() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }

  static Message Register(size_t frame_bytes) {
    Message request = CommandMessage(proto::REGISTER);
    request.meta.mutable_node()->set_address("127.0.0.1:1");
    if (frame_bytes > 0) request.frames.push_back(Bytes(std::vector<char>(frame_bytes, 'x')));
    return request;
  }

  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
  int done_ = 0;
  MemoryNetwork network_;
  RegistrationProbes probes_;  // last: its threads use the members above
};

TEST_F(HeldProbes, RequestsPastTheBytesHeldAreRefusedUntilTheChecksEnd) {
  const size_t third = RegistrationProbes::kMaxHeldBytes / 3 + 1;
  EXPECT_TRUE(probes_.Add(Register(third)));
  EXPECT_TRUE(probes_.Add(Register(third)));
  EXPECT_FALSE(probes_.Add(Register(third)));  // over the bytes, queued or being checked
  EXPECT_TRUE(probes_.Add(Register(0)));       // a small one still fits
  Open();
  ASSERT_TRUE(WaitFor([&] { return done() == 3; }, 20)) << done() << " checked";
  EXPECT_TRUE(probes_.Add(Register(third)));
  ASSERT_TRUE(WaitFor([&] { return done() == 4; }, 20)) << done() << " checked";
}

TEST_F(HeldProbes, OneRequestLargerThanTheBytesHeldIsTakenAlone) {
  EXPECT_TRUE(probes_.Add(Register(RegistrationProbes::kMaxHeldBytes + 1)));
  EXPECT_FALSE(probes_.Add(Register(0)));
  Open();
  ASSERT_TRUE(WaitFor([&] { return done() == 1; }, 20));
}

TEST_F(HeldProbes, RequestsPastTheCountHeldAreRefused) {
  for (size_t i = 0; i < RegistrationProbes::kMaxHeld; ++i) {
    ASSERT_TRUE(probes_.Add(Register(0))) << i;
  }
  EXPECT_FALSE(probes_.Add(Register(0)));
  Open();
  ASSERT_TRUE(
      WaitFor([&] { return done() == static_cast<int>(RegistrationProbes::kMaxHeld); }, 60));
  EXPECT_TRUE(probes_.Add(Register(0)));
}

}  // namespace
}  // namespace keel
