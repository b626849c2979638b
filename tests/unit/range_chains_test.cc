#include "scheduler/range_chains.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "scheduler/lost_ranges.h"
#include "test_util.h"

namespace keel {
namespace {

// Two servers, one backup each: range 0 on servers 0 then 1, range 1 on 1 then 0.
RangeChains TwoServersReplicated() {
  RangeChains chains(2, 1);
  proto::ClusterView view;
  view.set_epoch(1);
  chains.ToView({0, 1}, &view);
  return chains;
}

TEST(RangeChains, AReplicaSyncForARangeThatDoesNotExistIsRefused) {
  RangeChains chains = TwoServersReplicated();
  const std::string error = testing::ErrorOf([&] { chains.Synced(99, 0); });
  EXPECT_EQ(error, "key range 99 does not exist (the job has 2)");
}

TEST(RangeChains, AReplicaSyncFromAServerNotCopyingTheRangeIsRefused) {
  RangeChains chains = TwoServersReplicated();
  const std::string error = testing::ErrorOf([&] { chains.Synced(0, 1); });
  EXPECT_EQ(error, "server 1 is not copying key range 0");
}

TEST(RangeChains, AReplicaSyncFromTheServerCopyingTheRangeCountsIt) {
  RangeChains chains = TwoServersReplicated();
  chains.RemoveServer(1);  // range 0 on server 0 alone; range 1's backup 0 promoted
  chains.Repair({0, 1});   // server 1 comes back: it copies both ranges
  chains.Synced(0, 1);
  proto::ClusterView view;
  view.set_epoch(2);
  chains.ToView({0, 1}, &view);
  EXPECT_EQ(view.ranges(0).copying_size(), 0);
  EXPECT_EQ(view.ranges(1).copying_size(), 1);
}

// Each rank's replicas among `view`'s chains.
std::map<int, int> Held(const proto::ClusterView& view) {
  std::map<int, int> held;
  for (const proto::KeyRange& range : view.ranges()) {
    ++held[range.server_rank()];
    for (int backup : range.backups()) ++held[backup];
  }
  return held;
}

proto::ClusterView ViewOf(RangeChains& chains, const std::set<int>& live, uint64_t epoch) {
  proto::ClusterView view;
  view.set_epoch(epoch);
  chains.ToView(live, &view);
  return view;
}

TEST(RangeChains, MoreKeyRangesThanServersAreDealtRoundTheServers) {
  RangeChains chains(3, 1, 6);
  const proto::ClusterView view = ViewOf(chains, {0, 1, 2}, 1);
  ASSERT_EQ(view.ranges_size(), 6);
  EXPECT_EQ(view.ranges(4).server_rank(), 1);
  EXPECT_EQ(view.ranges(4).backups(0), 2);
  EXPECT_EQ(Held(view), (std::map<int, int>{{0, 4}, {1, 4}, {2, 4}}));
}

// A server joins 2 servers' 8 ranges: it pre-copies its share outside the
// chains, then joins them copying the changes, and once those arrived the old
// holders leave those chains.
TEST(RangeChains, AJoiningServerCopiesItsShareAndTheOldHoldersLeaveOnceItHasThem) {
  RangeChains chains(2, 0, 8);
  ViewOf(chains, {0, 1}, 1);
  const std::vector<size_t> moved = chains.Join(2, {0, 1, 2});
  ASSERT_EQ(moved.size(), 2u);
  EXPECT_EQ(chains.Moving(), 2u);
  const proto::ClusterView precopying = ViewOf(chains, {0, 1, 2}, 2);
  for (size_t range : moved) {
    ASSERT_EQ(precopying.ranges(range).precopy_size(), 1);
    EXPECT_EQ(precopying.ranges(range).precopy(0), 2);
    EXPECT_EQ(precopying.ranges(range).backups_size(), 0) << "not in the chain yet";
    chains.Precopied(range, 2);
  }
  EXPECT_EQ(testing::ErrorOf([&] { chains.Precopied(moved[0], 2); }),
            "server 2 is not pre-copying key range " + std::to_string(moved[0]));
  const proto::ClusterView copying = ViewOf(chains, {0, 1, 2}, 3);
  for (size_t range : moved) {
    // Joined behind the old holder, marked copying.
    ASSERT_EQ(copying.ranges(range).backups_size(), 1);
    EXPECT_EQ(copying.ranges(range).backups(0), 2);
    EXPECT_EQ(copying.ranges(range).copying(0), 2);
  }
  EXPECT_TRUE(chains.Trim().empty()) << "nobody leaves before the copy arrived";
  chains.Synced(moved[0], 2);
  EXPECT_EQ(chains.Trim().size(), 1u);
  chains.Synced(moved[1], 2);
  EXPECT_EQ(chains.Trim().size(), 1u);
  EXPECT_EQ(chains.Moving(), 0u);
  const proto::ClusterView after = ViewOf(chains, {0, 1, 2}, 4);
  EXPECT_EQ(Held(after), (std::map<int, int>{{0, 3}, {1, 3}, {2, 2}}));
  for (size_t range : moved) EXPECT_EQ(after.ranges(range).server_rank(), 2);
}

// A view names a range's home only where it is not the range's chain; a
// restarted scheduler adopting the view has every home all the same: its next
// view is the one the earlier scheduler would have sent (after a server left,
// during a join's pre-copy, and with nothing moved).
TEST(RangeChains, AViewNamesOnlyHomesThatAreNotTheChainAndAnAdopterHasThemAll) {
  RangeChains chains(3, 1, 6);
  const proto::ClusterView first = ViewOf(chains, {0, 1, 2}, 1);
  for (const proto::KeyRange& range : first.ranges()) EXPECT_EQ(range.home_size(), 0);
  const auto with_servers = [](proto::ClusterView view, const std::set<int>& ranks) {
    for (int rank : ranks) {
      proto::NodeInfo* server = view.add_nodes();
      server->set_role(proto::SERVER);
      server->set_rank(rank);
    }
    return view;
  };
  const auto adopter_sends_the_same = [&](const proto::ClusterView& known,
                                          const std::set<int>& live, uint64_t next_epoch) {
    RangeChains restarted(3, 1, 6);
    restarted.Adopt(with_servers(known, live));
    const proto::ClusterView theirs = ViewOf(restarted, live, next_epoch);
    const proto::ClusterView ours = ViewOf(chains, live, next_epoch);
    EXPECT_EQ(theirs.SerializeAsString(), ours.SerializeAsString())
        << "earlier scheduler\n"
        << ours.DebugString() << "restarted\n"
        << theirs.DebugString();
  };
  adopter_sends_the_same(first, {0, 1, 2}, 2);
  // Server 0 leaves: the chains close over it, its ranges' homes still name it.
  chains.RemoveServer(0);
  const proto::ClusterView after_leave = ViewOf(chains, {1, 2}, 3);
  int named = 0;
  for (const proto::KeyRange& range : after_leave.ranges()) {
    if (range.home_size() == 0) continue;
    ++named;
    EXPECT_EQ(std::count(range.home().begin(), range.home().end(), 0), 1) << range.DebugString();
  }
  EXPECT_EQ(named, 4);  // the ranges with server 0 in their chain
  adopter_sends_the_same(after_leave, {1, 2}, 4);
  // A fourth server joins: the moved ranges' homes name it while it pre-copies.
  RangeChains joined(3, 0, 6);
  ViewOf(joined, {0, 1, 2}, 1);
  const std::vector<size_t> moved = joined.Join(3, {0, 1, 2, 3});
  ASSERT_FALSE(moved.empty());
  const proto::ClusterView precopying = ViewOf(joined, {0, 1, 2, 3}, 2);
  for (int range = 0; range < precopying.ranges_size(); ++range) {
    const bool is_moved = std::count(moved.begin(), moved.end(), static_cast<size_t>(range)) > 0;
    EXPECT_EQ(precopying.ranges(range).home_size(), is_moved ? 1 : 0) << range;
    if (is_moved) {
      EXPECT_EQ(precopying.ranges(range).home(0), 3);
    }
  }
  RangeChains restarted(3, 0, 6);
  restarted.Adopt(with_servers(precopying, {0, 1, 2, 3}));
  EXPECT_EQ(ViewOf(restarted, {0, 1, 2, 3}, 3).SerializeAsString(),
            ViewOf(joined, {0, 1, 2, 3}, 3).SerializeAsString());
}

// A view whose left-out home (its chain) is not the job's number of replicas
// did not come from this job.
TEST(RangeChains, ALeftOutHomeMustBeAChainOfTheJobsReplicas) {
  RangeChains chains(3, 1, 3);
  proto::ClusterView view = ViewOf(chains, {0, 1, 2}, 1);
  for (int rank : {0, 1, 2}) {
    proto::NodeInfo* server = view.add_nodes();
    server->set_role(proto::SERVER);
    server->set_rank(rank);
  }
  view.mutable_ranges(1)->clear_backups();
  RangeChains restarted(3, 1, 3);
  EXPECT_EQ(testing::ErrorOf([&] { restarted.CheckFits(view); }),
            "key range 1's home (its chain) has 1 server(s); this job's ranges have 2");
}

TEST(RangeChains, ADrainedServersRangesGoToTheLeastLoadedAndItIsNamedNoMore) {
  RangeChains chains(3, 1, 6);
  ViewOf(chains, {0, 1, 2}, 1);
  const std::vector<size_t> moved = chains.Drain(0, {1, 2});
  EXPECT_EQ(moved.size(), 4u);  // ranges 0, 2, 3, 5 have server 0 in their chain
  const proto::ClusterView precopying = ViewOf(chains, {0, 1, 2}, 2);
  for (size_t range : moved) {
    for (int rank : precopying.ranges(range).precopy()) chains.Precopied(range, rank);
  }
  const proto::ClusterView copying = ViewOf(chains, {0, 1, 2}, 3);
  for (size_t range : moved) {
    ASSERT_EQ(copying.ranges(range).copying_size(), 1);
    for (int rank : copying.ranges(range).copying()) chains.Synced(range, rank);
  }
  chains.Trim();
  EXPECT_FALSE(chains.Names(0));
  const proto::ClusterView after = ViewOf(chains, {1, 2}, 4);
  EXPECT_EQ(Held(after), (std::map<int, int>{{1, 6}, {2, 6}}));
  for (const proto::KeyRange& range : after.ranges()) EXPECT_EQ(range.backups_size(), 1);
}

TEST(RangeChains, ADrainThatWouldLeaveTooFewServersForTheReplicasChangesNothing) {
  RangeChains chains(2, 1, 4);
  ViewOf(chains, {0, 1}, 1);
  EXPECT_EQ(testing::ErrorOf([&] { chains.Drain(1, {0}); }),
            "draining server 1 would leave 1 server(s), too few for a key range and its 1 "
            "backup(s) (--replication)");
  EXPECT_EQ(chains.Moving(), 0u);
  EXPECT_EQ(testing::ErrorOf([&] {
              chains.Join(5, {0, 1, 2, 3, 5});
            }),
            "the job has 4 key ranges, too few for 5 servers (start it with a larger "
            "--key_ranges to let more servers join)");
}

// A move whose new holder left before its copy arrived: the old holder stays.
// Both ways: while it pre-copies (outside the chain), and once it joined the
// chain and is copying the changes.
TEST(RangeChains, AMoveWhoseNewHolderLeftKeepsTheOldHolder) {
  RangeChains chains(2, 0, 4);
  ViewOf(chains, {0, 1}, 1);
  const std::vector<size_t> moved = chains.Join(2, {0, 1, 2});
  ASSERT_EQ(moved.size(), 1u);
  const size_t range = moved[0];
  const int old_holder = ViewOf(chains, {0, 1, 2}, 2).ranges(range).server_rank();
  chains.Precopied(range, 2);
  const proto::ClusterView joined = ViewOf(chains, {0, 1, 2}, 3);
  ASSERT_EQ(joined.ranges(range).backups_size(), 1);
  ASSERT_EQ(joined.ranges(range).backups(0), 2) << "in the chain, copying";
  chains.RemoveServer(2);
  EXPECT_TRUE(chains.Trim().empty());
  const proto::ClusterView after = ViewOf(chains, {0, 1}, 4);
  EXPECT_EQ(after.ranges(range).server_rank(), old_holder);
  EXPECT_EQ(after.ranges(range).backups_size(), 0);
  EXPECT_EQ(after.ranges(range).precopy_size(), 0) << "nobody copies for a dead rank";
  EXPECT_TRUE(chains.Names(2)) << "its home still waits for rank 2";
}

// Three servers, one backup each (range i on servers i, i + 1): server 1 is
// removed, then server 2, range 1's last replica. Server 1 comes back with
// its copy: the range is handed to it alone, and server 2, back later,
// copies it from server 1.
TEST(RangeChains, ALostRangeHandedToAReturningHolderIsCopiedFromItByTheRest) {
  RangeChains chains(3, 1);
  ViewOf(chains, {0, 1, 2}, 1);
  EXPECT_EQ(chains.WholeReplicas(1), (std::vector<size_t>{0, 1}));
  chains.RemoveServer(1);
  const RangeChains::Departure departure = chains.RemoveServer(2);
  EXPECT_EQ(departure.alone, (std::vector<size_t>{1}));
  EXPECT_EQ(chains.HeldAlone(2), (std::vector<size_t>{1}));
  chains.Hand(1, 1);
  EXPECT_TRUE(chains.HeldAlone(2).empty());
  EXPECT_EQ(chains.HeldAlone(1), (std::vector<size_t>{1}));
  // Server 1 restores range 1 itself (a whole replica) and copies range 0.
  RangeChains::Additions added = chains.Repair({0, 1});
  EXPECT_EQ(added[1], (std::vector<std::pair<size_t, int>>{{0, 0}}));
  EXPECT_EQ(chains.WholeReplicas(1), (std::vector<size_t>{1}));
  added = chains.Repair({0, 1, 2});
  EXPECT_EQ(added[2], (std::vector<std::pair<size_t, int>>{{1, 1}, {2, 0}}));
}

TEST(RangeChains, ARangeWithReplicasIsNotHandedOver) {
  RangeChains chains(3, 1);
  ViewOf(chains, {0, 1, 2}, 1);
  EXPECT_EQ(testing::ErrorOf([&] { chains.Hand(0, 2); }),
            "key range 0 has live replicas: it cannot be handed to server 2");
  EXPECT_EQ(testing::ErrorOf([&] { chains.Hand(7, 2); }),
            "key range 7 does not exist (the job has 3)");
  EXPECT_EQ(chains.HeldAlone(2), std::vector<size_t>{});
}

// Three servers, one backup each: a backup that leaves, then the range's
// promoted primary, leave the range with no replica; that range alone is
// lost, once, and every later view says so (a restarted scheduler too).
TEST(LostRanges, ARangeWhoseLastReplicaLeftIsLostInEveryLaterView) {
  RangeChains chains(3, 1);
  proto::ClusterView view;
  view.set_epoch(1);
  chains.ToView({0, 1, 2}, &view);
  EXPECT_TRUE(chains.RemoveServer(1).alone.empty());
  const RangeChains::Departure second = chains.RemoveServer(2);
  ASSERT_EQ(second.alone, (std::vector<size_t>{1}));
  LostRanges lost;
  EXPECT_TRUE(lost.Lose(1, 2, 3, 1000.5));
  EXPECT_FALSE(lost.Lose(1, 0, 4, 2000));  // the first loss is the one reported
  lost.Rebuilt(1, "initial values");
  lost.Rebuilt(1, "checkpoint 7");  // rebuilt once: a later copy of it is no rebuild
  ASSERT_EQ(lost.ranges().size(), 1u);
  const LostRange& range = lost.ranges().at(1);
  EXPECT_EQ(range.rank, 2);
  EXPECT_EQ(range.epoch, 3u);
  EXPECT_EQ(range.since, 1000.5);
  EXPECT_EQ(range.rebuilt_from, "initial values");
  view.set_epoch(4);
  chains.ToView({0}, &view);
  lost.MarkView(&view);
  ASSERT_EQ(view.ranges_size(), 3);
  EXPECT_FALSE(view.ranges(0).lost());
  EXPECT_TRUE(view.ranges(1).lost());
  EXPECT_FALSE(view.ranges(2).lost());
  proto::NodeInfo* server = view.add_nodes();
  server->set_role(proto::SERVER);
  server->set_rank(0);
  LostRanges restarted;
  restarted.Adopt(view);
  EXPECT_TRUE(restarted.Lost(1));
  EXPECT_FALSE(restarted.Lost(0));
  EXPECT_FALSE(restarted.Lost(2));
  // The view that would have marked it never went out: a range waiting alone
  // for a server the view lacks is lost all the same.
  view.mutable_ranges(1)->set_lost(false);
  LostRanges unmarked;
  unmarked.Adopt(view);
  EXPECT_TRUE(unmarked.Lost(1));
  EXPECT_EQ(unmarked.ranges().at(1).rank, 2);
  EXPECT_FALSE(unmarked.Lost(0));
  EXPECT_EQ(LostRangeIndices({range}), (std::vector<size_t>{1}));
}

// A range lost, rebuilt, then lost again: the second loss is a loss of its
// own, declared with its own server, view and time (it went unsaid).
TEST(LostRanges, ARangeLostAgainAfterItsRebuildIsDeclaredAgain) {
  LostRanges lost;
  EXPECT_TRUE(lost.Lose(1, 2, 3, 1000.5, 40));
  EXPECT_FALSE(lost.Lose(1, 0, 4, 1001));  // still waiting for its rebuild: the same loss
  lost.Rebuilt(1, "checkpoint 7");
  EXPECT_TRUE(lost.Lose(1, 0, 9, 2000, 12, 0.5));
  const LostRange& range = lost.ranges().at(1);
  EXPECT_EQ(range.losses, 2);
  EXPECT_EQ(range.rank, 0);
  EXPECT_EQ(range.epoch, 9u);
  EXPECT_EQ(range.since, 2000);
  EXPECT_EQ(range.pushes, 12);
  EXPECT_EQ(range.rebuilt_from, "");  // waiting for its second rebuild
}

}  // namespace
}  // namespace keel
