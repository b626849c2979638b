#include "kv/keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <set>

#include "base/error.h"

namespace keel {
namespace {

TEST(MixKey, UnmixInvertsMixOnSamples) {
  std::mt19937_64 random(7);
  std::vector<uint64_t> samples = {
      0, 1, 2, 3, std::numeric_limits<uint64_t>::max(), uint64_t{1} << 63, 0x123456789abcdefULL};
  for (int i = 0; i < 100000; ++i) samples.push_back(random());
  for (uint64_t i = 0; i < 100000; ++i) samples.push_back(i);
  for (uint64_t x : samples) {
    ASSERT_EQ(UnmixKey(MixKey(x)), x) << x;
    ASSERT_EQ(MixKey(UnmixKey(x)), x) << x;
  }
}

TEST(MixKey, DistinctInputsGiveDistinctKeys) {
  std::set<Key> keys;
  for (uint64_t i = 0; i < 200000; ++i) keys.insert(MixKey(i));
  EXPECT_EQ(keys.size(), 200000u);
}

TEST(MixKey, SpreadsContiguousIndicesEvenlyOverRanges) {
  const RangeMap map = RangeMap::Even(8);
  std::vector<int> load(8, 0);
  for (uint64_t i = 0; i < 80000; ++i) ++load[map.RangeOf(MixKey(i))];
  for (int count : load) {
    EXPECT_GT(count, 9500);
    EXPECT_LT(count, 10500);
  }
}

TEST(MixedKeySet, IsSortedAndUnique) {
  const std::vector<Key> keys = MixedKeySet({5, 3, 5, 9, 3, 1});
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  std::set<uint64_t> back;
  for (Key key : keys) back.insert(UnmixKey(key));
  EXPECT_EQ(back, (std::set<uint64_t>{1, 3, 5, 9}));
}

TEST(RangeMap, EvenRangesCoverTheKeySpace) {
  const RangeMap map = RangeMap::Even(3);
  ASSERT_EQ(map.num_ranges(), 3u);
  EXPECT_EQ(map.begin(0), 0u);
  EXPECT_EQ(map.last(0) + 1, map.begin(1));
  EXPECT_EQ(map.last(1) + 1, map.begin(2));
  EXPECT_EQ(map.last(2), std::numeric_limits<Key>::max());
  EXPECT_EQ(map.RangeOf(0), 0u);
  EXPECT_EQ(map.RangeOf(map.begin(1)), 1u);
  EXPECT_EQ(map.RangeOf(map.begin(1) - 1), 0u);
  EXPECT_EQ(map.RangeOf(std::numeric_limits<Key>::max()), 2u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(map.server(r), r);
}

TEST(RangeMap, SplitAgreesWithRangeOf) {
  const RangeMap map = RangeMap::Even(4);
  std::mt19937_64 random(3);
  std::vector<Key> keys(10000);
  for (Key& key : keys) key = random();
  keys.push_back(0);
  keys.push_back(map.begin(2));
  keys.push_back(map.begin(2) - 1);
  keys.push_back(std::numeric_limits<Key>::max());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const std::vector<size_t> bounds = map.Split(keys.data(), keys.size());
  ASSERT_EQ(bounds.size(), 5u);
  EXPECT_EQ(bounds.front(), 0u);
  EXPECT_EQ(bounds.back(), keys.size());
  for (size_t r = 0; r < 4; ++r) {
    for (size_t i = bounds[r]; i < bounds[r + 1]; ++i) ASSERT_EQ(map.RangeOf(keys[i]), r);
  }
}

TEST(RangeMap, SplitOfKeysInOneRangeLeavesOthersEmpty) {
  const RangeMap map = RangeMap::Even(3);
  std::vector<Key> keys = {map.begin(1), map.begin(1) + 5, map.begin(1) + 9};
  const std::vector<size_t> bounds = map.Split(keys.data(), keys.size());
  EXPECT_EQ(bounds, (std::vector<size_t>{0, 0, 3, 3}));
}

TEST(RangeMap, RoundTripsThroughTheView) {
  const RangeMap map = RangeMap::Even(5);
  proto::ClusterView view;
  map.ToProto(view.mutable_ranges());
  const RangeMap back = RangeMap::FromProto(view.ranges());
  ASSERT_EQ(back.num_ranges(), 5u);
  for (size_t r = 0; r < 5; ++r) {
    EXPECT_EQ(back.begin(r), map.begin(r));
    EXPECT_EQ(back.server(r), map.server(r));
  }
}

TEST(RangeMap, RejectsMalformedViews) {
  proto::ClusterView view;
  EXPECT_THROW(RangeMap::FromProto(view.ranges()), Error);  // no ranges
  auto* first = view.add_ranges();
  first->set_begin(10);  // does not start at 0
  EXPECT_THROW(RangeMap::FromProto(view.ranges()), Error);
  first->set_begin(0);
  auto* second = view.add_ranges();
  second->set_begin(0);  // not after the first
  EXPECT_THROW(RangeMap::FromProto(view.ranges()), Error);
  EXPECT_THROW(RangeMap::Even(0), Error);
}

TEST(RangeMap, ReplicatedRangesAreBackedUpByTheNextServers) {
  const RangeMap map = RangeMap::Even(3, 2);
  EXPECT_EQ(map.Chain(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(map.Chain(2), (std::vector<int>{2, 0, 1}));
  EXPECT_TRUE(map.Holds(1, 0));
  EXPECT_EQ(map.Successor(1, 2), 0);
  EXPECT_EQ(map.Successor(1, 0), -1);  // the last replica acknowledges
  EXPECT_EQ(map.Predecessor(1, 2), 1);
  EXPECT_EQ(map.Predecessor(1, 1), -1);  // the primary
  EXPECT_EQ(RangeMap::Even(3).Chain(1), (std::vector<int>{1}));
}

TEST(RangeMap, ReplicationNeedsOtherServers) {
  EXPECT_NO_THROW(RangeMap::Even(2, 1));
  EXPECT_THROW(RangeMap::Even(2, 2), Error);
  EXPECT_THROW(RangeMap::Even(2, -1), Error);
}

TEST(RangeMap, ChainsRoundTripThroughTheViewAndMayChange) {
  const RangeMap map = RangeMap::Even(3, 1).WithChain(0, {1});  // server 0 left: 1 promoted
  proto::ClusterView view;
  map.ToProto(view.mutable_ranges());
  const RangeMap back = RangeMap::FromProto(view.ranges());
  EXPECT_EQ(back.Chain(0), (std::vector<int>{1}));
  EXPECT_EQ(back.Chain(1), (std::vector<int>{1, 2}));
  EXPECT_EQ(back.server(0), 1);
}

TEST(RangeMap, RejectsAChainThatNamesAServerTwice) {
  proto::ClusterView view;
  RangeMap::Even(2, 1).ToProto(view.mutable_ranges());
  view.mutable_ranges(0)->add_backups(0);  // the primary again
  EXPECT_THROW(RangeMap::FromProto(view.ranges()), Error);
  view.mutable_ranges(0)->set_backups(1, -3);
  EXPECT_THROW(RangeMap::FromProto(view.ranges()), Error);
}

}  // namespace
}  // namespace keel
