#include "scheduler/barriers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv/node.h"

namespace keel {
namespace {

Members Workers(std::initializer_list<int> ids) {
  Members members;
  for (int id : ids) {
    Member member;
    member.info.set_id(id);
    member.info.set_role(proto::WORKER);
    members[id] = member;
  }
  return members;
}

proto::Meta Arrival(int id, const std::string& tag) {
  proto::Meta meta;
  meta.set_sender(id);
  meta.set_barrier_group(kWorkerGroup);
  meta.set_barrier_id(100 + id);
  meta.set_barrier_tag(tag);
  return meta;
}

class BarrierTableTest : public ::testing::Test {
 protected:
  BarrierTable table_{[this](int node, Message& message) {
    released_.push_back(node);
    EXPECT_EQ(message.meta.barrier_id(), static_cast<uint64_t>(100 + node));
  }};
  std::vector<int> released_;
};

TEST_F(BarrierTableTest, ReleasesTheGroupWhenEveryMemberWaitsAtOneTag) {
  const Members members = Workers({1, 2});
  table_.Arrive(Arrival(1, "epoch 3"), members, /*whole=*/true);
  EXPECT_TRUE(released_.empty());
  table_.Arrive(Arrival(2, "epoch 3"), members, /*whole=*/true);
  EXPECT_EQ(released_, (std::vector<int>{1, 2}));
}

// A restarted scheduler before its first view knows only the workers that
// registered with it again: worker 1 alone at the barrier is not the whole
// group, worker 2 may be on its way there. Before, worker 1 was released
// alone.
TEST_F(BarrierTableTest, BeforeTheMembershipIsWholeNobodyIsReleased) {
  table_.Arrive(Arrival(1, "epoch 3"), Workers({1}), /*whole=*/false);
  table_.Forget(5, Workers({1}), /*whole=*/false);
  EXPECT_TRUE(released_.empty()) << "a worker passed a barrier its group had not reached";
  // Worker 2 registers, the view goes out, and worker 2 arrives.
  table_.ReleaseReady(Workers({1, 2}));
  EXPECT_TRUE(released_.empty());
  table_.Arrive(Arrival(2, "epoch 3"), Workers({1, 2}), /*whole=*/true);
  EXPECT_EQ(released_, (std::vector<int>{1, 2}));
}

TEST_F(BarrierTableTest, TheFirstViewReleasesABarrierEveryMemberReachedBeforeIt) {
  table_.Arrive(Arrival(1, "epoch 3"), Workers({1}), /*whole=*/false);
  table_.Arrive(Arrival(2, "epoch 3"), Workers({1, 2}), /*whole=*/false);
  EXPECT_TRUE(released_.empty());
  table_.ReleaseReady(Workers({1, 2}));
  EXPECT_EQ(released_, (std::vector<int>{1, 2}));
}

TEST_F(BarrierTableTest, ALeavingMemberReleasesTheOthersOnceTheMembershipIsWhole) {
  table_.Arrive(Arrival(1, "epoch 3"), Workers({1, 2}), /*whole=*/true);
  table_.Forget(2, Workers({1}), /*whole=*/true);
  EXPECT_EQ(released_, (std::vector<int>{1}));
}

// The earlier scheduler released the group and died before worker 1's
// release went out: worker 1 sends its request again to the restarted one,
// and worker 2, registering after it, brings the tag as passed.
TEST_F(BarrierTableTest, ATagPassedUnderTheEarlierSchedulerReleasesANodeWaitingThere) {
  table_.Arrive(Arrival(1, "epoch 3"), Workers({1}), /*whole=*/false);
  table_.Passed(kWorkerGroup, "epoch 3");
  EXPECT_EQ(released_, (std::vector<int>{1}));
  // Nothing left waiting: the next barrier is not held by a stale arrival.
  table_.ReleaseReady(Workers({1, 2}));
  table_.Arrive(Arrival(2, "epoch 4"), Workers({1, 2}), /*whole=*/true);
  EXPECT_EQ(released_, (std::vector<int>{1}));
}

TEST_F(BarrierTableTest, ATagTheGroupPassedReleasesALateComerAtOnce) {
  table_.Passed(kWorkerGroup, "epoch 2");
  table_.Arrive(Arrival(1, "epoch 2"), Workers({1, 2}), /*whole=*/false);
  EXPECT_EQ(released_, (std::vector<int>{1}));
}

}  // namespace
}  // namespace keel
