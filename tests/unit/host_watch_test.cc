// HostWatch: how a host of a keel train job learns that another is gone
// (the jobs across hosts: tests/multihost/multihost_test.cc, SageMakerHosts).
#include "launch/host_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <thread>

#include "base/time.h"
#include "stall_meter.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::UnusedPort;
using testing::WaitFor;

// Runs `watch`'s rounds, as the process group does, until `hosts` of its
// hosts have answered (false if not within 10 s).
bool RoundsUntilReached(HostWatch* watch, int hosts) {
  return WaitFor(
      [&] {
        watch->Round();
        return watch->reached() >= hosts;
      },
      10);
}

// Runs `watch`'s rounds until it finds the job cannot go on (false if not
// within 10 s).
bool RoundsUntilFailure(HostWatch* watch) {
  return WaitFor(
      [&] {
        watch->Round();
        return !watch->failure().empty();
      },
      10);
}

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
  ASSERT_TRUE(RoundsUntilReached(&watch, 1));
  EXPECT_EQ(watch.failure(), "");
  leader.reset();
  ASSERT_TRUE(RoundsUntilFailure(&watch));
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
  ASSERT_TRUE(RoundsUntilReached(&ends, 1));
  ASSERT_TRUE(RoundsUntilReached(&goes_on, 1));
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
  ASSERT_TRUE(RoundsUntilReached(&watch, 1));  // algo-3
  other.reset();
  ASSERT_TRUE(RoundsUntilFailure(&watch));
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
  const double begin = MonotonicSeconds();
  watch.Round();  // nobody listens yet: every host probed, the next such round in a second
  auto leader = std::make_unique<HostWatch>(std::vector<WatchedHost>{}, port, true, 1);
  leader->Listen();
  ASSERT_TRUE(RoundsUntilReached(&watch, 1));
  EXPECT_LT(MonotonicSeconds() - begin, 0.95)
      << "a leader listening from the start was reached only at the next whole round";
  leader.reset();
  ASSERT_TRUE(RoundsUntilFailure(&watch));
  EXPECT_TRUE(Contains(watch.failure(), "the leader algo-1 is gone")) << watch.failure();
  EXPECT_TRUE(Contains(watch.failure(), "has not answered for")) << watch.failure();
}

TEST(HostWatch, AHostWhoseAddressDropsConnectionsHoldsUpNoRoundAndIsFoundGone) {
  // A listener that never accepts, its queue one connection long: the first
  // probe opens (and fills it), every later one's SYN is dropped unanswered,
  // as by a host that vanished behind a firewall.
  int port = 0;
  const int listener = testing::ListenOnLoopback(0, &port);
  ASSERT_GE(listener, 0);
  // Three such hosts: a round that waited for their probes would take 1.5 s.
  HostWatch watch({{"algo-1", "127.0.0.1", true},
                   {"algo-2", "127.0.0.1", false},
                   {"algo-3", "127.0.0.1", false}},
                  port, true, 1.0);
  testing::StallMeter stalls;
  double longest = 0;
  const bool gone = WaitFor(
      [&] {
        const double begin = MonotonicSeconds();
        watch.Round();
        longest = std::max(longest, MonotonicSeconds() - begin);
        return !watch.failure().empty();
      },
      15);
  close(listener);
  ASSERT_TRUE(gone) << "hosts reached: " << watch.reached();
  EXPECT_TRUE(Contains(watch.failure(), " is gone (its keel train at 127.0.0.1:"))
      << watch.failure();
  if (longest >= 0.4 && stalls.worst_s() >= 0.2) {
    GTEST_SKIP() << stalls.Describe("a round of the watch runs within 0.4 s");
  }
  EXPECT_LT(longest, 0.4) << "a round waited " << longest << " s for probes that are not answered";
}

}  // namespace
}  // namespace keel
