#include "kv/parameter_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <new>
#include <random>
#include <set>
#include <unordered_map>

#include "base/error.h"

namespace keel {
namespace {

TEST(ParameterTable, CreatesRowsOnFirstTouchWithTheInitializer) {
  ParameterTable table(2, 1, [](Key key, float* weights, int width) {
    for (int i = 0; i < width; ++i) weights[i] = static_cast<float>(key) + i;
  });
  EXPECT_EQ(table.Find(7), nullptr);
  float* row = table.FindOrInsert(7);
  EXPECT_EQ(row[0], 7.0f);
  EXPECT_EQ(row[1], 8.0f);
  EXPECT_EQ(row[2], 0.0f);  // optimizer state starts at zero
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.FindOrInsert(7), table.Find(7));
  EXPECT_EQ(table.size(), 1u);
}

TEST(ParameterTable, HoldsAtMostTwiceItsKeysAndRowsOnceGrown) {
  // A row of one weight and two floats of state (FTRL's): the bound is the
  // key and three floats. Past its first size the table stays within 2x of
  // it at every size (load 1/2 to 3/4, slots not padded).
  ParameterTable table(1, 2);
  const double bound = sizeof(Key) + 3 * sizeof(float);
  std::mt19937_64 random(3);
  size_t checked = 0;
  for (size_t i = 1; i <= 300000; ++i) {
    table.FindOrInsert(MixKey(random()));
    if (i >= 4096 && i % 997 == 0) {
      ASSERT_LE(static_cast<double>(table.memory_bytes()), 2.0 * bound * static_cast<double>(i))
          << i << " keys in " << table.capacity() << " slots";
      ++checked;
    }
  }
  EXPECT_GT(checked, 200u);
}

TEST(ParameterTable, FindsKeysOutsideItsRangeAtEverySize) {
  // A server's table of one key range: keys outside it land anywhere, but
  // are kept and found like the others, through growth.
  ParameterTable table(1, 0, nullptr, /*first_key=*/Key{1} << 40, /*last_key=*/Key{1} << 41);
  std::vector<Key> keys;
  for (Key k = 0; k < 5000; ++k) {
    keys.push_back((Key{1} << 40) + k * 1000003);  // inside
    keys.push_back(k * 7919);                      // below
    keys.push_back(~Key{0} - 1 - k * 104729);      // above
  }
  for (size_t i = 0; i < keys.size(); ++i) table.FindOrInsert(keys[i])[0] = static_cast<float>(i);
  ASSERT_EQ(table.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const float* row = table.Find(keys[i]);
    ASSERT_NE(row, nullptr) << "key " << keys[i];
    EXPECT_EQ(row[0], static_cast<float>(i));
  }
  std::vector<float> pulled(keys.size());
  std::vector<Key> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  table.Pull(sorted.data(), sorted.size(), pulled.data());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(pulled[i], *table.Find(sorted[i]));
}

TEST(ParameterTable, KeepsEveryRowThroughGrowth) {
  ParameterTable table(3, 0);
  std::mt19937_64 random(11);
  std::unordered_map<Key, float> expected;
  const size_t initial_capacity = table.capacity();
  for (int i = 0; i < 200000; ++i) {
    const Key key = random();
    float* row = table.FindOrInsert(key);
    row[0] = static_cast<float>(i);
    row[2] = -static_cast<float>(i);
    expected[key] = static_cast<float>(i);
  }
  EXPECT_EQ(table.size(), expected.size());
  EXPECT_GT(table.capacity(), initial_capacity);
  EXPECT_LE(table.size() * 4, table.capacity() * 3);
  for (const auto& [key, value] : expected) {
    const float* row = table.Find(key);
    ASSERT_NE(row, nullptr);
    ASSERT_EQ(row[0], value);
    ASSERT_EQ(row[2], -value);
  }
  size_t visited = 0;
  table.ForEach([&](Key key, const float* row) {
    ++visited;
    EXPECT_EQ(row[0], expected.at(key));
  });
  EXPECT_EQ(visited, expected.size());
}

TEST(ParameterTable, HandlesTheExtremeKeys) {
  ParameterTable table(1, 0);
  table.FindOrInsert(0)[0] = 1;
  table.FindOrInsert(~Key{0})[0] = 2;
  EXPECT_EQ(table.Find(0)[0], 1);
  EXPECT_EQ(table.Find(~Key{0})[0], 2);
}

TEST(ParameterTable, PushAppliesTheOptimizerAndPullReadsWeights) {
  OptimizerOptions options;
  options.learning_rate = 1.0f;
  auto sgd = MakeOptimizer(options);
  ParameterTable table(2, 0);
  std::vector<Key> keys = {3, 9, 12};
  const std::vector<float> gradients = {1, 2, 3, 4, 5, 6};
  table.Push(keys.data(), keys.size(), gradients.data(), sgd.get());
  table.Push(keys.data(), keys.size(), gradients.data(), sgd.get());
  std::vector<float> out(6);
  table.Pull(keys.data(), keys.size(), out.data());
  EXPECT_EQ(out, (std::vector<float>{-2, -4, -6, -8, -10, -12}));
  std::vector<Key> fresh = {4};
  std::vector<float> zero(2, 99);
  table.Pull(fresh.data(), 1, zero.data());
  EXPECT_EQ(zero, (std::vector<float>{0, 0}));
}

TEST(ParameterTable, HoldsLongRows) {
  const int width = 1 << 20;
  ParameterTable table(width, 0);
  float* row = table.FindOrInsert(1);
  row[width - 1] = 5;
  EXPECT_EQ(table.Find(1)[width - 1], 5);
}

// An initializer that fails (as an allocation can) on key 13.
void FailOnKey13(Key key, float* weights, int width) {
  if (key == 13) throw std::bad_alloc();
  for (int i = 0; i < width; ++i) weights[i] = 1;
}

TEST(ParameterTable, ARowWhoseCreationFailedDoesNotExist) {
  ParameterTable table(2, 1, FailOnKey13);
  EXPECT_THROW(table.FindOrInsert(13), std::bad_alloc);
  EXPECT_EQ(table.Find(13), nullptr);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.FindOrInsert(12)[0], 1.0f);  // the table still works
}

TEST(ParameterTable, ASharedRowWhoseCreationFailedDoesNotExist) {
  const int width = static_cast<int>(ParameterTable::kSharedRowBytes / sizeof(float));
  ParameterTable table(width, 0, FailOnKey13);
  ASSERT_TRUE(table.shares_rows());
  EXPECT_THROW(table.FindOrInsert(13), std::bad_alloc);
  EXPECT_EQ(table.Find(13), nullptr);
  EXPECT_EQ(table.size(), 0u);
  int visited = 0;
  table.ForEach([&](Key, const float*) { ++visited; });
  EXPECT_EQ(visited, 0);
}

TEST(ParameterTable, PullAnswersNewKeysWithTheInitializerWithoutCreatingRows) {
  ParameterTable table(2, 1, [](Key key, float* weights, int width) {
    for (int i = 0; i < width; ++i) weights[i] = static_cast<float>(key) + i;
  });
  const std::vector<Key> keys = {4, 9};
  std::vector<float> out(4, 99);
  table.Pull(keys.data(), keys.size(), out.data());
  EXPECT_EQ(out, (std::vector<float>{4, 5, 9, 10}));
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.Find(4), nullptr);
}

TEST(ParameterTable, PullOfANewSharedRowCreatesNoRow) {
  const int width = static_cast<int>(ParameterTable::kSharedRowBytes / sizeof(float));
  ParameterTable table(width, 0, [](Key, float* weights, int n) {
    for (int i = 0; i < n; ++i) weights[i] = 3;
  });
  SharedArray<const float> row = table.SharedWeights(5);
  ASSERT_EQ(row.size(), static_cast<size_t>(width));
  EXPECT_EQ(row[width - 1], 3.0f);
  EXPECT_EQ(table.size(), 0u);
}

TEST(ParameterTable, RejectsNonPositiveWidths) {
  EXPECT_THROW(ParameterTable(0, 0), Error);
  EXPECT_THROW(ParameterTable(1, -1), Error);
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

TEST(ParameterTable, PushOfManyNewKeysSurvivesGrowthMidBatch) {
  OptimizerOptions options;
  options.learning_rate = 1.0f;
  auto sgd = MakeOptimizer(options);
  for (int width : {1, 3}) {
    ParameterTable table(width, 0);
    std::vector<Key> keys(50000);
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 977 + 5;
    std::vector<float> gradients(keys.size() * width);
    for (size_t i = 0; i < gradients.size(); ++i) gradients[i] = static_cast<float>(i % 13);
    table.Push(keys.data(), keys.size(), gradients.data(), sgd.get());
    std::vector<float> out(gradients.size());
    table.Pull(keys.data(), keys.size(), out.data());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], -gradients[i]) << i;
  }
}

// Keys that fill a sixteenth of the table's key range, sorted (as a slice of
// a range copy arrives), into a table not reserved for them: the ordered
// layout would pile them into long runs that every growth lays out again.
// The work stays a small multiple of the keys however many there are.
TEST(ParameterTable, ClusteredKeysCostProbesLinearInTheRows) {
  for (const size_t count : {20000, 80000}) {
    ParameterTable table(1, 1, nullptr, 0, (Key{1} << 40) - 1);
    std::vector<Key> keys(count);
    std::mt19937_64 random(count);
    for (Key& key : keys) key = random() % (Key{1} << 36);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (size_t i = 0; i < keys.size(); ++i) table.FindOrInsert(keys[i])[0] = static_cast<float>(i);
    EXPECT_LE(table.probes(), 8 * keys.size()) << keys.size() << " keys";
    EXPECT_FALSE(table.ordered());
    for (size_t i = 0; i < keys.size(); ++i)
      ASSERT_EQ(table.Find(keys[i])[0], static_cast<float>(i));
  }
}

// Mixed keys keep the ordered layout, and cost a few probes each (about 4.5
// in sorted batches at load 1/2 to 3/4).
TEST(ParameterTable, MixedKeysStayOrderedAtFewProbesEach) {
  ParameterTable table(1, 1);
  std::mt19937_64 random(8);
  std::vector<Key> batch(1000);
  for (int round = 0; round < 300; ++round) {
    for (Key& key : batch) key = MixKey(random());
    std::sort(batch.begin(), batch.end());
    for (Key key : batch) table.FindOrInsert(key);
  }
  EXPECT_TRUE(table.ordered());
  EXPECT_LE(table.probes(), 8 * table.size());
}

TEST(ParameterTable, PushToASharedRowBeingReadCopiesItFirst) {
  OptimizerOptions options;
  options.learning_rate = 1.0f;
  auto sgd = MakeOptimizer(options);
  const int width = ParameterTable::kSharedRowBytes / sizeof(float);
  ParameterTable table(width, 0);
  ASSERT_TRUE(table.shares_rows());
  SharedArray<const float> before = table.SharedWeights(9);
  std::vector<float> gradient(width, 1.0f);
  Key key = 9;
  table.Push(&key, 1, gradient.data(), sgd.get());
  EXPECT_EQ(before[0], 0.0f);  // the view in flight is unchanged
  EXPECT_EQ(table.SharedWeights(9)[0], -1.0f);
  EXPECT_EQ(table.Find(9)[width - 1], -1.0f);
}

// Random inserts and erasures against a map, in both layouts (ordered keys
// from the table's range; clustered ones that switch it to hashing), with
// growth between: every key kept is found with its row, every key erased
// reads as new, and the size agrees.
void CheckEraseAgainstAMap(bool clustered, int width) {
  ParameterTable table(width, 1, nullptr, 0, clustered ? ~Key{0} : (Key{1} << 20) - 1);
  std::unordered_map<Key, float> expected;
  std::mt19937_64 random(clustered ? 5 : 6);
  for (int step = 0; step < 60000; ++step) {
    const Key key = clustered ? (random() % 4096) * 16 : MixKey(random() % 30000) >> 44;
    if (random() % 3 == 0) {
      const bool had = expected.erase(key) == 1;
      EXPECT_EQ(table.Erase(key), had) << key;
    } else {
      const float value = static_cast<float>(step);
      table.FindOrInsert(key)[width - 1] = value;
      expected[key] = value;
    }
    if (step % 5000 == 0 || step == 59999) {
      ASSERT_EQ(table.size(), expected.size()) << step;
      for (const auto& [k, v] : expected) {
        const float* row = table.Find(k);
        ASSERT_NE(row, nullptr) << k << " at step " << step;
        ASSERT_EQ(row[width - 1], v) << k;
      }
      size_t visited = 0;
      table.ForEach([&](Key k, const float* row) {
        ++visited;
        ASSERT_EQ(expected.at(k), row[width - 1]);
      });
      ASSERT_EQ(visited, expected.size());
    }
  }
  if (clustered) {
    EXPECT_FALSE(table.ordered());
  }
}

TEST(ParameterTable, EraseKeepsEveryOtherKeyReachableInTheOrderedLayout) {
  CheckEraseAgainstAMap(/*clustered=*/false, 1);
}

TEST(ParameterTable, EraseKeepsEveryOtherKeyReachableInTheHashedLayout) {
  CheckEraseAgainstAMap(/*clustered=*/true, 3);
}

TEST(ParameterTable, EraseOfAWideRowAndOfTheExtremeKey) {
  const int width = ParameterTable::kSharedRowBytes / sizeof(float);
  ParameterTable table(width, 0, [](Key, float* weights, int) { weights[0] = 5; });
  table.FindOrInsert(3)[0] = 1;
  table.FindOrInsert(~Key{0})[0] = 2;
  EXPECT_TRUE(table.Erase(~Key{0}));
  EXPECT_FALSE(table.Erase(~Key{0}));
  EXPECT_TRUE(table.Erase(3));
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.Find(3), nullptr);
  EXPECT_EQ(table.SharedWeights(3)[0], 5.0f);  // the initializer's again
  EXPECT_EQ(table.SharedWeights(~Key{0})[0], 5.0f);
}

std::set<Key> ChangedSince(const ParameterTable& table, uint32_t stamp) {
  std::set<Key> keys;
  table.ForEachChangedSince(stamp, [&](Key key, const float*) { keys.insert(key); });
  return keys;
}

TEST(ParameterTable, StampsTellTheRowsChangedSinceAMomentThroughGrowthAndErasure) {
  OptimizerOptions options;
  auto sgd = MakeOptimizer(options);
  ParameterTable table(1, 0);
  table.FindOrInsert(1);
  table.EnableStamps();  // rows held before count as changed
  const uint32_t start = table.stamp() - 1;
  EXPECT_EQ(ChangedSince(table, start), (std::set<Key>{1}));
  const uint32_t copied = table.stamp();
  table.AdvanceStamp();
  EXPECT_TRUE(ChangedSince(table, copied).empty());
  // Enough new keys to grow the slots several times, and one old key pushed.
  std::vector<Key> keys;
  for (Key k = 2; k < 20000; ++k) keys.push_back(MixKey(k));
  keys.push_back(1);
  std::sort(keys.begin(), keys.end());
  std::vector<float> gradients(keys.size(), 1.0f);
  table.Push(keys.data(), keys.size(), gradients.data(), sgd.get());
  EXPECT_EQ(ChangedSince(table, copied).size(), keys.size());
  const uint32_t second = table.stamp();
  table.AdvanceStamp();
  Key some = keys[7];
  table.Push(&some, 1, gradients.data(), sgd.get());
  table.Erase(keys[100]);  // an erased row is no longer reported
  EXPECT_EQ(ChangedSince(table, second), (std::set<Key>{some}));
  EXPECT_EQ(table.StampedBefore(second + 1).size(), keys.size() - 2);
  // Without stamps every row counts as changed.
  ParameterTable plain(1, 0);
  plain.FindOrInsert(4);
  EXPECT_EQ(ChangedSince(plain, 1000), (std::set<Key>{4}));
  EXPECT_TRUE(plain.StampedBefore(1000).empty());
}

}  // namespace
}  // namespace keel
