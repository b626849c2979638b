// The push filter (worker/push_filter.h): rows below the threshold are kept
// as remainders and added to the key's next gradient, a flush gives every
// remainder back, and nothing is lost: after a flush the rows pushed add up
// to the gradients given. And --push_filter_threshold's checks.
#include "worker/push_filter.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cli/role_flags.h"
#include "cli/wire_flags.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

struct Sent {
  std::vector<Key> keys;
  std::vector<float> values;
  bool whole = false;
};

Sent Filter(PushFilter* filter, const std::vector<Key>& keys, const std::vector<float>& values) {
  Sent sent;
  sent.whole = filter->Filter(SharedArray<const Key>(keys), values, &sent.keys, &sent.values);
  return sent;
}

TEST(PushFilter, RowsBelowTheThresholdAreKeptAndAddedToTheKeysNextGradient) {
  PushFilter filter(PushFilterOptions{1.0f}, 1);
  // 0.5 stays; 2 goes; -1 goes (the magnitude counts, the bound included).
  Sent sent = Filter(&filter, {1, 2, 3}, {0.5f, 2.0f, -1.0f});
  EXPECT_EQ(sent.keys, (std::vector<Key>{2, 3}));
  EXPECT_EQ(sent.values, (std::vector<float>{2.0f, -1.0f}));
  EXPECT_FALSE(sent.whole);
  EXPECT_EQ(filter.remainder_rows(), 1u);
  // Key 1's 0.25 joins its remainder 0.5: 0.75 stays; then 0.25 more reaches 1.
  sent = Filter(&filter, {1}, {0.25f});
  EXPECT_TRUE(sent.keys.empty());
  sent = Filter(&filter, {1, 4}, {0.25f, 0.125f});
  EXPECT_EQ(sent.keys, (std::vector<Key>{1}));
  EXPECT_EQ(sent.values, (std::vector<float>{1.0f}));
  EXPECT_EQ(filter.remainder_rows(), 1u);  // key 4's
}

TEST(PushFilter, ARemainderCancelledByALaterGradientIsNotSent) {
  PushFilter filter(PushFilterOptions{1.0f}, 1);
  Filter(&filter, {7}, {0.75f});
  // -0.75 + 0.75: nothing left to say, and still below the threshold.
  EXPECT_TRUE(Filter(&filter, {7}, {-0.75f}).keys.empty());
  std::vector<Key> keys;
  std::vector<float> values;
  filter.Flush(&keys, &values);
  EXPECT_EQ(values, (std::vector<float>{0.0f}));
}

TEST(PushFilter, AWideRowGoesWholeWhenOneOfItsValuesPasses) {
  PushFilter filter(PushFilterOptions{1.0f}, 3);
  Sent sent = Filter(&filter, {1, 2}, {0.5f, 0.5f, 0.5f, 0.125f, -2.0f, 0.25f});
  EXPECT_EQ(sent.keys, (std::vector<Key>{2}));
  EXPECT_EQ(sent.values, (std::vector<float>{0.125f, -2.0f, 0.25f}));
  sent = Filter(&filter, {1}, {0.0f, 0.0f, 0.5f});
  EXPECT_EQ(sent.values, (std::vector<float>{0.5f, 0.5f, 1.0f}));
  EXPECT_EQ(filter.remainder_rows(), 0u);
}

TEST(PushFilter, AFlushSendsEveryRemainderSortedAndHoldsNothingAfter) {
  PushFilter filter(PushFilterOptions{10.0f}, 2);
  Filter(&filter, {30, 10, 20}, {1, 2, 3, 4, 5, 6});
  Filter(&filter, {10, 40}, {1, 1, 1, 1});
  std::vector<Key> keys;
  std::vector<float> values;
  filter.Flush(&keys, &values);
  EXPECT_EQ(keys, (std::vector<Key>{10, 20, 30, 40}));
  EXPECT_EQ(values, (std::vector<float>{4, 5, 5, 6, 1, 2, 1, 1}));
  EXPECT_EQ(filter.remainder_rows(), 0u);
  filter.Flush(&keys, &values);
  EXPECT_TRUE(keys.empty());
  EXPECT_TRUE(values.empty());
  // Kept again after a flush, from zero.
  EXPECT_TRUE(Filter(&filter, {10}, {1, 1}).keys.empty());
  EXPECT_EQ(filter.remainder_rows(), 1u);
}

TEST(PushFilter, AFlushIntoAMinibatchsRowsMergesEveryRemainderInKeyOrder) {
  PushFilter filter(PushFilterOptions{1.0f}, 1);
  Filter(&filter, {2, 6}, {0.5f, 0.25f});
  Sent sent = Filter(&filter, {1, 4, 6}, {3.0f, 0.125f, 5.0f});
  EXPECT_EQ(sent.keys, (std::vector<Key>{1, 6}));
  filter.FlushInto(&sent.keys, &sent.values);
  EXPECT_EQ(sent.keys, (std::vector<Key>{1, 2, 4, 6}));
  EXPECT_EQ(sent.values, (std::vector<float>{3.0f, 0.5f, 0.125f, 5.25f}));
  EXPECT_EQ(filter.remainder_rows(), 0u);
  // A key both sent and held back is a caller's error, not a silent double.
  Filter(&filter, {3}, {0.5f});
  std::vector<Key> keys = {3};
  std::vector<float> values = {1.0f};
  EXPECT_TRUE(Contains(ErrorOf([&] { filter.FlushInto(&keys, &values); }), "both sent and held"));
}

TEST(PushFilter, NothingIsLostTheRowsPushedAddUpToTheGradientsAfterAFlush) {
  // Gradients in eighths: every sum is exact in float, so the totals must
  // match to the bit.
  constexpr int kWidth = 2;
  PushFilter filter(PushFilterOptions{1.0f}, kWidth);
  std::mt19937 random(5);
  std::uniform_int_distribution<int> eighths(-8, 8);
  std::map<Key, std::vector<double>> given, pushed;
  const auto add = [](std::map<Key, std::vector<double>>* to, const std::vector<Key>& keys,
                      const std::vector<float>& values) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto& row = (*to)[keys[i]];
      row.resize(kWidth, 0.0);
      for (int j = 0; j < kWidth; ++j) row[j] += values[i * kWidth + j];
    }
  };
  size_t held_back = 0;
  for (int batch = 0; batch < 200; ++batch) {
    std::vector<Key> keys;
    for (Key key = 0; key < 100; ++key) {
      if (random() % 3 == 0) keys.push_back(key);
    }
    std::vector<float> values;
    for (size_t i = 0; i < keys.size() * kWidth; ++i) values.push_back(eighths(random) / 8.0f);
    const Sent sent = Filter(&filter, keys, values);
    held_back += keys.size() - sent.keys.size();
    add(&given, keys, values);
    add(&pushed, sent.keys, sent.values);
  }
  EXPECT_GT(held_back, 1000u) << "the filter held nothing back: the test shows nothing";
  EXPECT_NE(pushed, given);  // before the flush, the remainders are missing
  std::vector<Key> keys;
  std::vector<float> values;
  filter.Flush(&keys, &values);
  add(&pushed, keys, values);
  EXPECT_EQ(pushed, given);
  EXPECT_EQ(filter.rows_given(), filter.rows_sent() + held_back);
}

TEST(PushFilter, AtMostMaxRowsAreKeptANewRowPastTheBoundGoesAsItIs) {
  PushFilterOptions options = PushFilterOptions{1.0f};
  options.max_rows = 2;
  PushFilter filter(options, 1);
  Sent sent = Filter(&filter, {1, 2, 3, 4}, {0.5f, 0.5f, 0.5f, 0.5f});
  EXPECT_EQ(sent.keys, (std::vector<Key>{3, 4}));
  EXPECT_EQ(filter.remainder_rows(), 2u);
  // A key already kept still adds to its remainder when the store is full.
  sent = Filter(&filter, {1, 5}, {0.25f, 0.25f});
  EXPECT_EQ(sent.keys, (std::vector<Key>{5}));
  std::vector<Key> keys;
  std::vector<float> values;
  filter.Flush(&keys, &values);
  EXPECT_EQ(keys, (std::vector<Key>{1, 2}));
  EXPECT_EQ(values, (std::vector<float>{0.75f, 0.5f}));
}

TEST(PushFilter, AMinibatchMostlyPassingGoesWholeWithItsRemaindersAdded) {
  PushFilterOptions options = PushFilterOptions{1.0f};
  options.whole_share = 0.5;
  PushFilter filter(options, 1);
  // 1 of 4 passes: a subset.
  Sent sent = Filter(&filter, {1, 2, 3, 4}, {2.0f, 0.5f, 0.5f, 0.5f});
  EXPECT_FALSE(sent.whole);
  EXPECT_EQ(sent.keys, (std::vector<Key>{1}));
  // 3 of 4 pass: all four go, key 4's remainder added, none kept.
  sent = Filter(&filter, {1, 2, 3, 4}, {2.0f, 0.5f, 0.5f, 0.25f});
  EXPECT_TRUE(sent.whole);
  EXPECT_EQ(sent.keys, (std::vector<Key>{1, 2, 3, 4}));
  EXPECT_EQ(sent.values, (std::vector<float>{2.0f, 1.0f, 1.0f, 0.75f}));
  EXPECT_EQ(filter.remainder_rows(), 0u);
}

TEST(PushFilter, OffEveryRowGoesAsItIs) {
  PushFilter filter(PushFilterOptions(), 1);
  EXPECT_FALSE(filter.enabled());
  const Sent sent = Filter(&filter, {1, 2}, {0.0f, 1e-9f});
  EXPECT_TRUE(sent.whole);
  EXPECT_EQ(sent.values, (std::vector<float>{0.0f, 1e-9f}));
  EXPECT_EQ(filter.remainder_rows(), 0u);
}

TEST(PushFilter, KeyCachingSharesFollowTheBytesOfAKeyAndARow) {
  // A float32 value against an 8-byte key: a subset pays below a third.
  EXPECT_DOUBLE_EQ(WholeShareWithKeyCache(1, 4), 4.0 / 12.0);
  EXPECT_DOUBLE_EQ(WholeShareWithKeyCache(8, 2), 16.0 / 24.0);
}

TEST(PushFilter, BadOptionsAreRefused) {
  EXPECT_TRUE(Contains(ErrorOf([] { PushFilter(PushFilterOptions{-1.0f}, 1); }), "at least 0"));
  EXPECT_TRUE(Contains(ErrorOf([] { PushFilter(PushFilterOptions{NAN}, 1); }), "finite"));
  EXPECT_TRUE(Contains(ErrorOf([] { PushFilter(PushFilterOptions{1.0f}, 0); }), "width 0"));
}

class PushFilterFlag : public ::testing::Test {
 private:
  gflags::FlagSaver saver_;
};

TEST_F(PushFilterFlag, IsOffByDefaultAndCheckedForRange) {
  EXPECT_EQ(PushFilterThresholdFromFlags("linear_learner"), 0.0f);
  ASSERT_FALSE(gflags::SetCommandLineOption("push_filter_threshold", "0.001").empty());
  EXPECT_EQ(PushFilterThresholdFromFlags("factorization_machines"), 0.001f);
  ASSERT_FALSE(gflags::SetCommandLineOption("push_filter_threshold", "-0.5").empty());
  EXPECT_TRUE(Contains(ErrorOf([] { PushFilterThresholdFromFlags("linear_learner"); }),
                       "--push_filter_threshold=-0.5: must be a finite number, at least 0"));
}

TEST_F(PushFilterFlag, IsRefusedByExactSumBeforeTheWorkerJoins) {
  ASSERT_FALSE(gflags::SetCommandLineOption("push_filter_threshold", "0.01").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("job", "exact_sum").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("model_dir", ::testing::TempDir().c_str()).empty());
  const std::string error = ErrorOf([] { CheckWorkerJobFlags(); });
  EXPECT_TRUE(Contains(error, "--push_filter_threshold=0.01 is refused by --job=exact_sum"))
      << error;
  EXPECT_TRUE(Contains(error, "checks the servers' sums exactly")) << error;
  EXPECT_TRUE(Contains(ErrorOf([] { PushFilterThresholdFromFlags("kv_bench"); }), "kv_bench"));
  ASSERT_FALSE(gflags::SetCommandLineOption("push_filter_threshold", "0").empty());
  EXPECT_EQ(ErrorOf([] { CheckWorkerJobFlags(); }), "no error");
}

}  // namespace
}  // namespace keel
