// Staleness-aware steps: the scale of a push's step, the optimizers' scaled
// steps, and the server's measure of a push's staleness.
#include "server/push_staleness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kv/optimizer.h"

namespace keel {
namespace {

constexpr double kTolerance = 1e-6;

TEST(StalenessStepScale, KeepsTheWholeStepUpToStalenessOne) {
  EXPECT_EQ(StalenessStepScale(0), 1.0f);
  EXPECT_EQ(StalenessStepScale(1), 1.0f);
}

TEST(StalenessStepScale, IsOneOverTheSquareRootOfTheStaleness) {
  EXPECT_NEAR(StalenessStepScale(4), 0.5, kTolerance);
  EXPECT_NEAR(StalenessStepScale(16), 0.25, kTolerance);
  EXPECT_NEAR(StalenessStepScale(3), 0.5773502691896258, kTolerance);
}

TEST(StalenessStepScale, IsNeverAboveOneForAHostileValue) {
  EXPECT_EQ(StalenessStepScale(-1000), 1.0f);
  EXPECT_EQ(StalenessStepScale(std::numeric_limits<int64_t>::min()), 1.0f);
  const float latest = StalenessStepScale(std::numeric_limits<int64_t>::max());
  EXPECT_GT(latest, 0.0f);
  EXPECT_LE(latest, 1.0f);
}

OptimizerOptions Options(const std::string& name, float learning_rate) {
  OptimizerOptions options;
  options.name = name;
  options.learning_rate = learning_rate;
  return options;
}

TEST(ScaledSteps, SgdTakesTheScaledStep) {
  auto sgd = MakeOptimizer(Options("sgd", 0.5f));
  float row[2] = {1.0f, -2.0f};
  const float gradient[2] = {2.0f, -4.0f};
  float* rows[1] = {row};
  sgd->UpdateRows(rows, gradient, 1, 2, 0.25f);
  EXPECT_NEAR(row[0], 1.0 - 0.125 * 2.0, kTolerance);
  EXPECT_NEAR(row[1], -2.0 + 0.125 * 4.0, kTolerance);
}

TEST(ScaledSteps, AdamsFirstStepIsTheScaledRate) {
  // Adam's first step is lr * g / (|g| + epsilon'): the rate, against the gradient.
  auto adam = MakeOptimizer(Options("adam", 0.1f));
  std::vector<float> row(1 + adam->StateWidth(1), 0.0f);
  const float gradient = 3.0f;
  float* rows[1] = {row.data()};
  adam->UpdateRows(rows, &gradient, 1, 1, 0.5f);
  EXPECT_NEAR(row[0], -0.05, 1e-6);
}

TEST(ScaledSteps, TheScaleMultipliesTheScheduledRate) {
  OptimizerOptions options = Options("sgd", 1.0f);
  options.schedule.enabled = true;
  options.schedule.step = 1;
  options.schedule.factor = 0.5f;
  options.schedule.minimum_rate = 1e-6f;
  auto sgd = MakeOptimizer(options);
  std::vector<float> row(1 + sgd->StateWidth(1), 0.0f);
  const float gradient = 1.0f;
  float* rows[1] = {row.data()};
  sgd->UpdateRows(rows, &gradient, 1, 1, 1.0f);   // rate 1: w = -1
  sgd->UpdateRows(rows, &gradient, 1, 1, 0.25f);  // rate 1 x 0.5 (one decrease) x 0.25
  EXPECT_NEAR(row[0], -1.0 - 0.125, kTolerance);
}

TEST(ScaledSteps, FtrlWeighsTheGradientInstead) {
  // FTRL's weight is a closed form of its summed gradients: a scaled push is
  // the push of the scaled gradient.
  auto scaled = MakeOptimizer(Options("ftrl", 0.1f));
  auto reference = MakeOptimizer(Options("ftrl", 0.1f));
  std::vector<float> a(1 + scaled->StateWidth(1), 0.0f), b = a;
  const float gradient = 2.0f, quarter = 0.5f;
  float* rows_a[1] = {a.data()};
  float* rows_b[1] = {b.data()};
  scaled->UpdateRows(rows_a, &gradient, 1, 1, 0.25f);
  reference->UpdateRows(rows_b, &quarter, 1, 1);
  EXPECT_EQ(a, b);
}

TEST(PushStaleness, IsThePushesAppliedSinceThePullThatReadTheRows) {
  PushStaleness staleness;
  staleness.RecordPull(/*worker=*/7, /*table=*/0, /*clock=*/5, /*version=*/10);
  EXPECT_EQ(staleness.Of(7, 0, 5, 10), 0);
  EXPECT_EQ(staleness.Of(7, 0, 5, 13), 3);
}

TEST(PushStaleness, CountsTheWorkersOwnPushesInBetweenAsOneAtMost) {
  PushStaleness staleness;
  staleness.RecordPull(/*worker=*/7, /*table=*/0, /*clock=*/5, /*version=*/10);
  // Applied since: two of worker 7's own (its pipeline's depth) and three of
  // worker 8's.
  staleness.RecordPush(7, 0);
  staleness.RecordPush(8, 0);  // worker 8 never pulled: nothing kept for it
  staleness.RecordPush(7, 0);
  EXPECT_EQ(staleness.Of(7, 0, 5, 15), 3 + 1);
  // Another table's pushes are not this one's.
  staleness.RecordPull(7, 1, 5, 0);
  EXPECT_EQ(staleness.Of(7, 1, 5, 4), 4);
  // Only its own pushes: the one update of a pipeline one minibatch deep.
  staleness.RecordPull(7, 0, 6, 15);
  staleness.RecordPush(7, 0);
  staleness.RecordPush(7, 0);
  EXPECT_EQ(staleness.Of(7, 0, 6, 17), 1);
}

TEST(PushStaleness, KeepsTheFirstPullOfAClock) {
  PushStaleness staleness;
  staleness.RecordPull(7, 0, 5, 10);
  staleness.RecordPull(7, 0, 5, 12);
  EXPECT_EQ(staleness.Of(7, 0, 5, 14), 4);
}

TEST(PushStaleness, IsPerWorkerAndTable) {
  PushStaleness staleness;
  staleness.RecordPull(7, 0, 5, 10);
  staleness.RecordPull(8, 0, 5, 2);
  staleness.RecordPull(7, 1, 5, 20);
  EXPECT_EQ(staleness.Of(7, 0, 5, 30), 20);
  EXPECT_EQ(staleness.Of(8, 0, 5, 30), 28);
  EXPECT_EQ(staleness.Of(7, 1, 5, 30), 10);
}

TEST(PushStaleness, AReadClockNeverPulledCountsAsZero) {
  PushStaleness staleness;
  staleness.RecordPull(7, 0, 5, 10);
  EXPECT_EQ(staleness.Of(7, 0, 6, 100), 0);                                    // a future clock
  EXPECT_EQ(staleness.Of(7, 0, std::numeric_limits<int64_t>::min(), 100), 0);  // garbage
  EXPECT_EQ(staleness.Of(9, 0, 5, 100), 0);  // another worker's pull
}

TEST(PushStaleness, ForgetsAllButTheNewestClocks) {
  PushStaleness staleness;
  for (int64_t clock = 0; clock <= static_cast<int64_t>(PushStaleness::kRemembered); ++clock) {
    staleness.RecordPull(7, 0, clock, static_cast<uint64_t>(clock));
  }
  EXPECT_EQ(staleness.Of(7, 0, 0, 100), 0);   // forgotten: not scaled
  EXPECT_EQ(staleness.Of(7, 0, 1, 100), 99);  // the oldest kept
}

TEST(PushStaleness, ClampsAnyStalenessIntoItsRange) {
  EXPECT_EQ(PushStaleness::Clamp(-5), 0);
  EXPECT_EQ(PushStaleness::Clamp(std::numeric_limits<int64_t>::max()),
            PushStaleness::kMaxStaleness);
  PushStaleness staleness;
  staleness.RecordPull(7, 0, 5, 0);
  EXPECT_EQ(staleness.Of(7, 0, 5, std::numeric_limits<uint64_t>::max()),
            PushStaleness::kMaxStaleness);
}

}  // namespace
}  // namespace keel
