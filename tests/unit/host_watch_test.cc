// HostWatch: how a host of a keel train job learns that another is gone
// (the jobs across hosts: tests/multihost/multihost_test.cc, SageMakerHosts).
#include "launch/host_watch.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::UnusedPort;
using testing::WaitFor;

TEST(HostWatch, AHostAnswersWhileItsWatchPortListens) {
  const int port = UnusedPort();
  EXPECT_FALSE(HostWatch::Answers("127.0.0.1", port, 0.5));
  {
    HostWatch other({}, port, true, 1);
    other.Listen();
    EXPECT_TRUE(HostWatch::Answers("127.0.0.1", port, 0.5));
  }
  EXPECT_FALSE(HostWatch::Answers("127.0.0.1", port, 0.5));
  EXPECT_FALSE(HostWatch::Answers("no-such-host.invalid", port, 0.5));
}

TEST(HostWatch, ALeaderThatAnsweredAndThenStopsEndsTheJob) {
  const int port = UnusedPort();
  auto leader = std::make_unique<HostWatch>(std::vector<WatchedHost>{}, port, true, 1);
  leader->Listen();
  HostWatch watch({{"algo-1", "127.0.0.1", true}}, port, false, 0.5);
  watch.Round();  // it answers
  EXPECT_EQ(watch.failure(), "");
  leader.reset();
  ASSERT_TRUE(WaitFor(
      [&] {
        watch.Round();
        return !watch.failure().empty();
      },
      10));
  EXPECT_TRUE(Contains(watch.failure(), "the leader algo-1 is gone (its keel train at 127.0.0.1:"))
      << watch.failure();
  EXPECT_TRUE(Contains(watch.failure(), "so the job cannot go on")) << watch.failure();
}

TEST(HostWatch, AnotherHostGoneEndsTheJobOnlyWithoutReplicas) {
  const int port = UnusedPort();
  auto other = std::make_unique<HostWatch>(std::vector<WatchedHost>{}, port, true, 1);
  other->Listen();
  HostWatch ends({{"algo-3", "127.0.0.1", false}}, port, true, 0.5);
  HostWatch goes_on({{"algo-3", "127.0.0.1", false}}, port, false, 0.5);
  ends.Round();
  goes_on.Round();
  other.reset();
  ASSERT_TRUE(WaitFor(
      [&] {
        ends.Round();
        goes_on.Round();
        return !ends.failure().empty();
      },
      10));
  EXPECT_TRUE(Contains(ends.failure(), "host algo-3 is gone")) << ends.failure();
  EXPECT_TRUE(Contains(ends.failure(), "(replication 0)")) << ends.failure();
  EXPECT_EQ(goes_on.failure(), "");
}

TEST(HostWatch, AHostNeverSeenIsNotGone) {
  HostWatch watch({{"algo-2", "127.0.0.1", true}}, UnusedPort(), true, 0.1);
  for (int round = 0; round < 3; ++round) {
    watch.Round();
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }
  EXPECT_EQ(watch.failure(), "");  // not started yet, as far as it knows
}

TEST(HostWatch, ALeaderNeverReachedIsNamedRatherThanAHostThatStoppedAfterIt) {
  // The leader killed before this host first reached it; another host
  // stopped because the leader was gone, and that is what this host sees.
  const int port = UnusedPort();
  auto other = std::make_unique<HostWatch>(std::vector<WatchedHost>{}, port, true, 1);
  other->Listen();
  HostWatch watch({{"algo-1", "no-such-host.invalid", true}, {"algo-3", "127.0.0.1", false}}, port,
                  true, 0.5);
  watch.Round();
  other.reset();
  ASSERT_TRUE(WaitFor(
      [&] {
        watch.Round();
        return !watch.failure().empty();
      },
      10));
  EXPECT_TRUE(Contains(watch.failure(),
                       "the leader algo-1 is gone (its keel train at "
                       "no-such-host.invalid:"))
      << watch.failure();
  EXPECT_TRUE(Contains(watch.failure(), "has not answered since this host began watching"))
      << watch.failure();
}

TEST(HostWatch, AHostIsReachedSoonAfterItListensNotOnlyAtTheNextSecond) {
  const int port = UnusedPort();
  HostWatch watch({{"algo-1", "127.0.0.1", true}}, port, true, 0.5);
  watch.Round();  // nobody listens yet
  auto leader = std::make_unique<HostWatch>(std::vector<WatchedHost>{}, port, true, 1);
  leader->Listen();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  watch.Round();  // within the second: only the hosts never reached are probed
  leader.reset();
  ASSERT_TRUE(WaitFor(
      [&] {
        watch.Round();
        return !watch.failure().empty();
      },
      10))
      << "a leader that listened for 0.3 s was never reached";
  EXPECT_TRUE(Contains(watch.failure(), "the leader algo-1 is gone")) << watch.failure();
  EXPECT_TRUE(Contains(watch.failure(), "has not answered for")) << watch.failure();
}

}  // namespace
}  // namespace keel
