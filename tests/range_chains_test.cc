#include "scheduler/range_chains.h"

#include <gtest/gtest.h>

#include "base/error.h"
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

}  // namespace
}  // namespace keel
