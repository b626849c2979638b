#include "scheduler/resharding.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "scheduler/cluster_state.h"
#include "scheduler/membership_log.h"

namespace keel {
namespace {

// Two servers (node ids 10 and 11, ranks 0 and 1), no backups, four key
// ranges, and a Resharding over them whose hooks record what it asks of the
// scheduler; a published view makes the chains as the scheduler does.
class ReshardingTest : public testing::Test {
 protected:
  ReshardingTest()
      : cluster_(2, 1, 0, 4),
        membership_(""),
        resharding_(&cluster_, &membership_,
                    {[this](int id, Message& message) {
                       sent_.push_back({id, message.meta.command()});
                     },
                     [this](const Message&, Message& reply) { answers_.push_back(reply.meta); },
                     [this] { Publish(); }, [this](int id) { forgotten_.push_back(id); },
                     [this] { ++notified_; }},
                    /*secured=*/false) {
    for (int rank : {0, 1}) {
      Member member;
      member.info.set_id(10 + rank);
      member.info.set_role(proto::SERVER);
      member.info.set_rank(rank);
      cluster_.members[10 + rank] = member;
      cluster_.server_ranks.insert(rank);
    }
  }

  void Publish() {
    cluster_.view.set_epoch(cluster_.view.epoch() + 1);
    cluster_.published = true;
    cluster_.chains.ToView(cluster_.server_ranks, &cluster_.view);
    ++published_;
  }

  ClusterState cluster_;
  MembershipLog membership_;
  Resharding resharding_;
  std::vector<std::pair<int, proto::Command>> sent_;
  std::vector<proto::Meta> answers_;
  std::vector<int> forgotten_;
  int published_ = 0;
  int notified_ = 0;
};

TEST_F(ReshardingTest, ADrainIsRefusedBeforeTheJobStartsAndAfterItEnds) {
  EXPECT_EQ(resharding_.Drain(1, "a test", /*loopback=*/true), "the job has not started");
  Publish();
  cluster_.shut_down = true;
  EXPECT_EQ(resharding_.Drain(1, "a test", /*loopback=*/true), "the job is over");
  EXPECT_TRUE(resharding_.draining().empty());
  EXPECT_EQ(published_, 1);
}

TEST_F(ReshardingTest, WithoutASecretOnlyTheSchedulersOwnHostMayDrain) {
  Publish();
  EXPECT_EQ(resharding_.Drain(1, "a test", /*loopback=*/false),
            "without a cluster secret (plain TCP) only a client on the scheduler's own host may "
            "drain servers: start the cluster with --secret_file to drain from elsewhere");
  Message request;
  request.meta.set_command(proto::DRAIN);
  request.meta.set_drain_rank(1);
  request.meta.set_sequence(7);
  request.peer_host = "10.1.2.3";
  resharding_.OnRequest(request);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].command(), proto::DRAIN);
  EXPECT_EQ(answers_[0].sequence(), 7u);
  EXPECT_EQ(answers_[0].drain_rank(), 1);
  EXPECT_NE(answers_[0].error().find("only a client on the scheduler's own host"),
            std::string::npos);
  EXPECT_TRUE(resharding_.draining().empty());
}

TEST_F(ReshardingTest, AnUnknownServerIsNotDrained) {
  Publish();
  EXPECT_EQ(resharding_.Drain(5, "a test", /*loopback=*/true), "server 5 is not in the cluster");
}

TEST_F(ReshardingTest, ADrainedServerLeavesOnceItsRangesMoved) {
  Publish();
  ASSERT_EQ(resharding_.Drain(1, "a test", /*loopback=*/true), "");
  EXPECT_EQ(resharding_.draining(), std::set<int>{1});
  EXPECT_EQ(published_, 2);  // the moves start
  // Asked again: under way, no new view.
  EXPECT_EQ(resharding_.Drain(1, "a test", /*loopback=*/true), "");
  EXPECT_EQ(published_, 2);
  EXPECT_TRUE(sent_.empty());

  // Server 0 pre-copies each range of server 1, joins its chain and copies
  // what changed since.
  std::vector<size_t> moving;
  for (size_t range = 0; range < 4; ++range) {
    if (cluster_.view.ranges(static_cast<int>(range)).precopy_size() > 0) moving.push_back(range);
  }
  ASSERT_EQ(moving.size(), 2u);
  for (size_t range : moving) cluster_.chains.Precopied(range, 0);
  Publish();
  for (size_t range : moving) cluster_.chains.Synced(range, 0);
  resharding_.AdvanceMoves();

  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].first, 11);
  EXPECT_EQ(sent_[0].second, proto::SHUTDOWN);
  EXPECT_EQ(forgotten_, std::vector<int>{11});
  EXPECT_EQ(notified_, 1);
  EXPECT_FALSE(cluster_.members.count(11));
  EXPECT_EQ(cluster_.removed.at(11), "it was drained");
  EXPECT_EQ(cluster_.server_ranks, std::set<int>{0});
  EXPECT_EQ(cluster_.num_servers, 1);
  EXPECT_TRUE(resharding_.draining().empty());
  for (const proto::KeyRange& range : cluster_.view.ranges()) EXPECT_EQ(range.server_rank(), 0);
}

}  // namespace
}  // namespace keel
