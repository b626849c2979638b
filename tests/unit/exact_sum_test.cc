// The exact_sum job's bookkeeping: ledgers, the sums they allow, and the
// comparison of a table dump against them.
#include <gtest/gtest.h>

#include <cmath>

#include "base/files.h"
#include "base/json_reader.h"
#include "test_util.h"
#include "worker/exact_sum_check.h"
#include "worker/exact_sum_ledger.h"

namespace keel {
namespace {

using testing::Contains;

ExactSumWorkload SmallWorkload() {
  ExactSumWorkload workload;
  workload.features = 256;
  workload.shared_features = 16;
  workload.epochs = 2;
  workload.minibatches = 5;
  return workload;
}

// What the servers hold after applying each of `pushes` once (SGD at rate 1:
// each weight is minus its sum), as a dump: sorted keys and their weights.
struct Dump {
  std::vector<Key> keys;
  std::vector<float> weights;
};

Dump DumpAfter(const ExactSumWorkload& workload, const std::vector<PushId>& pushes) {
  std::map<Key, float> rows;
  for (const PushId& push : pushes) {
    for (uint64_t feature : ExactSumFeatures(workload, push)) {
      rows[MixKey(feature)] -= ExactSumGradient(push, feature);
    }
  }
  Dump dump;
  for (const auto& [key, weight] : rows) {
    dump.keys.push_back(key);
    dump.weights.push_back(weight);
  }
  return dump;
}

// Every push of `ranks` workers' shares of the whole workload.
std::vector<PushId> AllPushes(const ExactSumWorkload& workload, int ranks) {
  std::vector<PushId> pushes;
  for (int rank = 0; rank < ranks; ++rank) {
    for (int epoch = 1; epoch <= workload.epochs; ++epoch) {
      for (int b = 0; b < workload.minibatches; ++b) pushes.push_back({rank, epoch, b});
    }
  }
  return pushes;
}

ExpectedSums AcknowledgedOnce(const ExactSumWorkload& workload, const std::vector<PushId>& pushes) {
  ExpectedSums expected(workload);
  for (const PushId& push : pushes) expected.AddAcknowledged(push);
  return expected;
}

TEST(ExactSumWorkload, EveryPushHoldsTheSharedKeysAndAThirdOfTheOthers) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<uint64_t> features = ExactSumFeatures(workload, {1, 2, 3});
  for (uint64_t f = 0; f < workload.shared_features; ++f) {
    EXPECT_EQ(features[f], f);
  }
  const size_t others = features.size() - workload.shared_features;
  const size_t third = (workload.features - workload.shared_features) / 3;
  EXPECT_GE(others, third);
  EXPECT_LE(others, third + 1);
}

TEST(ExactSumWorkload, KeysReachEveryRangeOfFourServers) {
  const ExactSumWorkload workload = SmallWorkload();
  const RangeMap ranges = RangeMap::Even(4);
  std::vector<int> keys_per_range(4, 0);
  for (uint64_t feature : ExactSumFeatures(workload, {0, 1, 0})) {
    ++keys_per_range[ranges.RangeOf(MixKey(feature))];
  }
  for (int count : keys_per_range) EXPECT_GT(count, 0);
}

TEST(ExactSumWorkload, GradientsAreSmallPositiveIntegers) {
  for (int rank = 0; rank < 3; ++rank) {
    for (uint64_t feature = 0; feature < 50; ++feature) {
      const float g = ExactSumGradient({rank, 2, 7}, feature);
      EXPECT_EQ(g, std::floor(g));
      EXPECT_GE(g, 1.0f);
      EXPECT_LE(g, static_cast<float>(kMaxExactSumGradient));
    }
  }
}

TEST(ExactSumWorkload, RefusesSumsThatFloatCannotHoldExactly) {
  ExactSumWorkload workload = SmallWorkload();
  workload.epochs = 1000;
  workload.minibatches = 1000;
  const std::string error = testing::ErrorOf([&] { CheckExactSumWorkload(workload, 4); });
  EXPECT_TRUE(Contains(error, "--exact_sum_minibatches=1000")) << error;
  EXPECT_TRUE(Contains(error, "exact in float")) << error;
}

TEST(ExpectedSums, AcknowledgedPushesMakeTheLeastAndTheMostEqual) {
  const ExactSumWorkload workload = SmallWorkload();
  const ExpectedSums expected = AcknowledgedOnce(workload, AllPushes(workload, 2));
  for (uint64_t f = 0; f < workload.features; ++f) EXPECT_EQ(expected.least(f), expected.most(f));
  // A shared feature is in every push: 2 workers x 2 epochs x 5 minibatches.
  uint64_t sum = 0;
  for (const PushId& push : AllPushes(workload, 2)) {
    sum += static_cast<uint64_t>(ExactSumGradient(push, 3));
  }
  EXPECT_EQ(expected.least(3), sum);
  EXPECT_EQ(expected.acknowledged(), 20u);
}

TEST(ExpectedSums, AnUnacknowledgedPushWidensOnlyTheMost) {
  const ExactSumWorkload workload = SmallWorkload();
  ExpectedSums expected(workload);
  expected.AddAcknowledged({0, 1, 0});
  expected.AddUnacknowledged({0, 1, 1});
  const uint64_t acknowledged = static_cast<uint64_t>(ExactSumGradient({0, 1, 0}, 5));
  const uint64_t in_flight = static_cast<uint64_t>(ExactSumGradient({0, 1, 1}, 5));
  EXPECT_EQ(expected.least(5), acknowledged);
  EXPECT_EQ(expected.most(5), acknowledged + in_flight);
}

TEST(ExpectedSums, APushAcknowledgedToTwoProcessesCountsTwiceAndIsCountedAsRepeated) {
  // Worker 1 pushed minibatch 2 and had it acknowledged, then was killed
  // before its progress report said so; its replacement pushed it again.
  const ExactSumWorkload workload = SmallWorkload();
  const ProcessLedger departed =
      ParseLedger("sent 1 1 2\nacked 1 1 2\nsent 1 1 3\n", "node-4.ledger");
  const ProcessLedger replacement =
      ParseLedger("sent 1 1 2\nacked 1 1 2\nsent 1 1 3\nacked 1 1 3\n", "node-7.ledger");
  ExpectedSums expected(workload);
  expected.AddLedgers({departed, replacement});
  EXPECT_EQ(expected.acknowledged(), 3u);
  EXPECT_EQ(expected.unacknowledged(), 1u);
  EXPECT_EQ(expected.repeated(), 1u);
  const uint64_t g2 = static_cast<uint64_t>(ExactSumGradient({1, 1, 2}, 0));
  const uint64_t g3 = static_cast<uint64_t>(ExactSumGradient({1, 1, 3}, 0));
  EXPECT_EQ(expected.least(0), 2 * g2 + g3);  // feature 0 is shared: in every push
  EXPECT_EQ(expected.most(0), 2 * g2 + 2 * g3);
}

TEST(Ledger, ReadsBackWhatTheWriterAppendedAcrossTwoWriters) {
  const testing::TempFolder folder("ledger");
  const std::string path = LedgerPath(folder.path(), 3);
  {
    LedgerWriter writer(path);
    writer.Sent({0, 1, 0});
    writer.Acknowledged({0, 1, 0});
  }
  LedgerWriter(path).Sent({0, 1, 1});  // a second writer appends
  const std::vector<ProcessLedger> ledgers = ReadLedgers(folder.path());
  ASSERT_EQ(ledgers.size(), 1u);
  EXPECT_EQ(ledgers[0].source, path);
  EXPECT_EQ(ledgers[0].sent, (std::vector<PushId>{{0, 1, 0}, {0, 1, 1}}));
  EXPECT_EQ(ledgers[0].acknowledged, (std::vector<PushId>{{0, 1, 0}}));
}

TEST(Ledger, ALastLineWithoutItsNewlineIsNotThere) {
  const ProcessLedger ledger = ParseLedger("sent 0 1 0\nacked 0 1", "node-1.ledger");
  EXPECT_EQ(ledger.sent.size(), 1u);
  EXPECT_TRUE(ledger.acknowledged.empty());
}

TEST(Ledger, AMalformedLineIsRefusedNamingTheFileAndLine) {
  const std::string error =
      testing::ErrorOf([] { ParseLedger("sent 0 1 0\npushed 0 1 1\n", "node-2.ledger"); });
  EXPECT_TRUE(Contains(error, "node-2.ledger:2")) << error;
  EXPECT_TRUE(Contains(error, "pushed 0 1 1")) << error;
}

TEST(Ledger, AnAcknowledgementOfAPushNeverSentIsRefused) {
  const std::string error = testing::ErrorOf([] { ParseLedger("acked 0 1 4\n", "node-2.ledger"); });
  EXPECT_TRUE(Contains(error, "node-2.ledger:1")) << error;
  EXPECT_TRUE(Contains(error, "never sent")) << error;
}

TEST(Ledger, RemoveLedgersLeavesOtherFiles) {
  const testing::TempFolder folder("ledger");
  LedgerWriter(LedgerPath(folder.path(), 1)).Sent({0, 1, 0});
  testing::WriteFile(folder.path() + "/notes.txt", "keep\n");
  RemoveLedgers(folder.path());
  EXPECT_TRUE(ReadLedgers(folder.path()).empty());
  EXPECT_EQ(ReadFile(folder.path() + "/notes.txt"), "keep\n");
}

TEST(CompareSums, ADumpOfEveryPushAppliedOncePasses) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> pushes = AllPushes(workload, 2);
  const Dump dump = DumpAfter(workload, pushes);
  const ExactSumReport report =
      CompareSums(AcknowledgedOnce(workload, pushes), dump.keys, dump.weights, RangeMap::Even(2));
  EXPECT_TRUE(report.ok());
  EXPECT_TRUE(report.violations.empty());
  EXPECT_EQ(report.keys_checked, workload.features);
  ASSERT_EQ(report.ranges.size(), 2u);
  EXPECT_EQ(report.ranges[0].keys_checked + report.ranges[1].keys_checked, workload.features);
}

TEST(CompareSums, AMissingPushIsALostUpdateNamingTheKeyAndTheRange) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> pushes = AllPushes(workload, 2);
  std::vector<PushId> applied = pushes;
  applied.erase(applied.begin() + 3);  // a server dropped one acknowledged push
  const Dump dump = DumpAfter(workload, applied);
  const RangeMap ranges = RangeMap::Even(2);
  const ExactSumReport report =
      CompareSums(AcknowledgedOnce(workload, pushes), dump.keys, dump.weights, ranges);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.lost, ExactSumFeatures(workload, pushes[3]).size());
  EXPECT_EQ(report.doubled, 0u);
  const SumViolation& first = report.violations[0];
  EXPECT_EQ(first.kind, SumViolation::kLost);
  EXPECT_EQ(first.range, ranges.RangeOf(first.key));
  const std::string text = DescribeViolation(first, report);
  EXPECT_TRUE(Contains(text, "feature " + std::to_string(first.feature))) << text;
  EXPECT_TRUE(Contains(text, "in range " + std::to_string(first.range))) << text;
  EXPECT_TRUE(Contains(text, "lost updates")) << text;
}

// Lost updates inside a range the scheduler announced lost are counted as
// announced, not as violations; the same loss elsewhere, and doubled updates
// anywhere, still are.
TEST(CompareSums, LossInsideAnAnnouncedRangeIsCountedAsAnnouncedAndNotAsAViolation) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> pushes = AllPushes(workload, 2);
  const RangeMap ranges = RangeMap::Even(2);
  Dump dump = DumpAfter(workload, pushes);
  // Every row of range 1 lost its updates (rebuilt from its initial values).
  for (size_t i = 0; i < dump.keys.size(); ++i) {
    if (ranges.RangeOf(dump.keys[i]) == 1) dump.weights[i] = 0;
  }
  const ExpectedSums expected = AcknowledgedOnce(workload, pushes);
  const ExactSumReport silent = CompareSums(expected, dump.keys, dump.weights, ranges);
  EXPECT_FALSE(silent.ok());
  ASSERT_GT(silent.lost, 0u);
  const ExactSumReport announced = CompareSums(expected, dump.keys, dump.weights, ranges, {1});
  EXPECT_TRUE(announced.ok());
  EXPECT_TRUE(announced.violations.empty());
  EXPECT_EQ(announced.lost, 0u);
  EXPECT_EQ(announced.announced_lost, silent.lost);
  EXPECT_EQ(announced.ranges[1].lost, silent.lost);
  EXPECT_TRUE(announced.ranges[1].announced_lost);
  EXPECT_FALSE(announced.ranges[0].announced_lost);
  const auto json = testing::ParseJsonObject(ExactSumJson(announced));
  EXPECT_EQ(json.at("announced_lost"), std::to_string(silent.lost));
  // Announcing the other range excuses nothing.
  EXPECT_FALSE(CompareSums(expected, dump.keys, dump.weights, ranges, {0}).ok());
  // A doubled update in the announced range is still a violation.
  for (size_t i = 0; i < dump.keys.size(); ++i) {
    if (ranges.RangeOf(dump.keys[i]) == 1) {
      dump.weights[i] = -1e6f;
      break;
    }
  }
  const ExactSumReport doubled = CompareSums(expected, dump.keys, dump.weights, ranges, {1});
  EXPECT_FALSE(doubled.ok());
  EXPECT_EQ(doubled.doubled, 1u);
}

TEST(CompareSums, AKeyCorruptedInTheDumpIsNamedWithItsRange) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> pushes = AllPushes(workload, 2);
  Dump dump = DumpAfter(workload, pushes);
  dump.weights[10] -= 2;  // two more than was pushed
  const RangeMap ranges = RangeMap::Even(2);
  const ExactSumReport report =
      CompareSums(AcknowledgedOnce(workload, pushes), dump.keys, dump.weights, ranges);
  ASSERT_EQ(report.violations.size(), 1u);
  const SumViolation& violation = report.violations[0];
  EXPECT_EQ(violation.kind, SumViolation::kDoubled);
  EXPECT_EQ(violation.key, dump.keys[10]);
  EXPECT_EQ(violation.feature, UnmixKey(dump.keys[10]));
  EXPECT_EQ(report.ranges[ranges.RangeOf(dump.keys[10])].doubled, 1u);
  const std::string text = DescribeViolation(violation, report);
  char key[24];
  snprintf(key, sizeof(key), "0x%016llx", static_cast<unsigned long long>(dump.keys[10]));
  EXPECT_TRUE(Contains(text, std::string("key ") + key)) << text;
  EXPECT_TRUE(Contains(text, "range " + std::to_string(ranges.RangeOf(dump.keys[10])))) << text;
  EXPECT_TRUE(Contains(text, "doubled updates")) << text;
}

TEST(CompareSums, ARowMissingFromTheDumpIsLost) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> pushes = AllPushes(workload, 1);
  Dump dump = DumpAfter(workload, pushes);
  const Key gone = dump.keys[0];
  dump.keys.erase(dump.keys.begin());
  dump.weights.erase(dump.weights.begin());
  const ExactSumReport report =
      CompareSums(AcknowledgedOnce(workload, pushes), dump.keys, dump.weights, RangeMap::Even(3));
  ASSERT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.violations[0].key, gone);
  EXPECT_EQ(report.violations[0].kind, SumViolation::kLost);
  EXPECT_EQ(report.violations[0].sum, 0.0);
}

TEST(CompareSums, ARowNoPushMadeIsDoubled) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> pushes = AllPushes(workload, 1);
  Dump dump = DumpAfter(workload, pushes);
  const Key stray = MixKey(workload.features + 5);
  const auto at = std::lower_bound(dump.keys.begin(), dump.keys.end(), stray);
  dump.weights.insert(dump.weights.begin() + (at - dump.keys.begin()), -3.0f);
  dump.keys.insert(at, stray);
  const ExactSumReport report =
      CompareSums(AcknowledgedOnce(workload, pushes), dump.keys, dump.weights, RangeMap::Even(2));
  ASSERT_EQ(report.violations.size(), 1u);
  EXPECT_EQ(report.violations[0].key, stray);
  EXPECT_EQ(report.violations[0].kind, SumViolation::kDoubled);
  EXPECT_EQ(report.keys_checked, workload.features + 1);
}

TEST(CompareSums, AnUnacknowledgedPushMayBeAppliedOrNot) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> acknowledged = {{0, 1, 0}, {0, 1, 1}};
  const PushId in_flight{0, 1, 2};
  ExpectedSums expected = AcknowledgedOnce(workload, acknowledged);
  expected.AddUnacknowledged(in_flight);
  std::vector<PushId> with = acknowledged;
  with.push_back(in_flight);
  for (const auto& applied : {acknowledged, with}) {
    const Dump dump = DumpAfter(workload, applied);
    EXPECT_TRUE(CompareSums(expected, dump.keys, dump.weights, RangeMap::Even(2)).ok());
  }
  std::vector<PushId> twice = with;
  twice.push_back(in_flight);
  const Dump dump = DumpAfter(workload, twice);
  EXPECT_FALSE(CompareSums(expected, dump.keys, dump.weights, RangeMap::Even(2)).ok());
}

TEST(ExactSumJson, CarriesTheCountsEachRangeAndTheViolatingKeys) {
  const ExactSumWorkload workload = SmallWorkload();
  const std::vector<PushId> pushes = AllPushes(workload, 1);
  Dump dump = DumpAfter(workload, pushes);
  dump.weights[0] += 1;
  const ExactSumReport report =
      CompareSums(AcknowledgedOnce(workload, pushes), dump.keys, dump.weights, RangeMap::Even(2));
  const auto json = testing::ParseJsonObject(ExactSumJson(report));
  EXPECT_EQ(json.at("ok"), "false");
  EXPECT_EQ(json.at("keys_checked"), std::to_string(workload.features));
  EXPECT_EQ(json.at("violations"), "1");
  EXPECT_EQ(json.at("lost"), "1");
  EXPECT_TRUE(Contains(json.at("ranges"), "\"range\":1")) << json.at("ranges");
  EXPECT_TRUE(Contains(json.at("violating_keys"), "\"kind\":\"lost\""))
      << json.at("violating_keys");
}

// A dumped weight can be NaN or infinite (a corrupted row): the report stays
// JSON, the sum null.
TEST(ExactSumJson, ASumThatIsNotFiniteIsNull) {
  ExactSumReport report;
  report.ranges.resize(1);
  report.ranges[0].expected = INFINITY;
  report.violations.resize(2);
  report.violations[0].sum = NAN;
  report.violations[1].sum = -INFINITY;
  const JsonValue json = ParseJson(ExactSumJson(report), "exact_sum.json");
  EXPECT_EQ(json.Find("ranges")->AsArray()[0].Find("expected")->type(), JsonValue::Type::kNull);
  for (const JsonValue& violation : json.Find("violating_keys")->AsArray()) {
    EXPECT_EQ(violation.Find("sum")->type(), JsonValue::Type::kNull);
  }
}

}  // namespace
}  // namespace keel
