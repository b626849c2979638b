#include "kv/rtt_estimator.h"

#include <gtest/gtest.h>

namespace keel {
namespace {

constexpr double kMin = 0.001;
constexpr double kMax = 10;

TEST(RttEstimator, BeforeAnySampleTheTimeoutIsTheFirstEstimate) {
  RttEstimator estimator(0.1, kMin, kMax);
  EXPECT_FALSE(estimator.has_sample());
  EXPECT_DOUBLE_EQ(estimator.Timeout(), 0.1);
}

TEST(RttEstimator, TheFirstSampleSetsTheAverageAndHalfOfItAsVariance) {
  RttEstimator estimator(0.1, kMin, kMax);
  estimator.OnAnswer(0.01, 1);
  EXPECT_TRUE(estimator.has_sample());
  EXPECT_DOUBLE_EQ(estimator.smoothed_s(), 0.01);
  EXPECT_DOUBLE_EQ(estimator.variance_s(), 0.005);
  EXPECT_DOUBLE_EQ(estimator.Timeout(), 0.01 + 4 * 0.005);
}

TEST(RttEstimator, LaterSamplesMoveTheAverageByAnEighth) {
  RttEstimator estimator(0.1, kMin, kMax);
  estimator.OnAnswer(0.01, 1);
  estimator.OnAnswer(0.02, 1);
  EXPECT_DOUBLE_EQ(estimator.smoothed_s(), 7.0 / 8 * 0.01 + 1.0 / 8 * 0.02);
}

TEST(RttEstimator, TheVarianceMovesAQuarterTowardsEachSamplesDeviation) {
  RttEstimator estimator(0.1, kMin, kMax);
  estimator.OnAnswer(0.01, 1);
  estimator.OnAnswer(0.02, 1);  // deviates 0.01 from the average before it
  const double variance = 3.0 / 4 * 0.005 + 1.0 / 4 * 0.01;
  EXPECT_DOUBLE_EQ(estimator.variance_s(), variance);
  EXPECT_DOUBLE_EQ(estimator.Timeout(), estimator.smoothed_s() + 4 * variance);
}

TEST(RttEstimator, SteadyRoundTripsShrinkTheTimeoutTowardsTheRoundTrip) {
  RttEstimator estimator(1, 1e-6, kMax);
  for (int i = 0; i < 200; ++i) estimator.OnAnswer(0.002, 1);
  EXPECT_NEAR(estimator.smoothed_s(), 0.002, 1e-12);
  EXPECT_LT(estimator.variance_s(), 1e-9);
  // The variance term never falls below the clock's granularity.
  EXPECT_DOUBLE_EQ(estimator.Timeout(), 0.002 + RttEstimator::kGranularitySeconds);
}

TEST(RttEstimator, TimeoutsStayWithinTheBounds) {
  RttEstimator estimator(0.1, 0.005, 0.5);
  estimator.OnAnswer(0.0001, 1);
  EXPECT_DOUBLE_EQ(estimator.Timeout(), 0.005);
  EXPECT_DOUBLE_EQ(estimator.Timeout(20), 0.5);
  RttEstimator slow(0.1, 0.005, 0.5);
  slow.OnAnswer(3, 1);
  EXPECT_DOUBLE_EQ(slow.Timeout(), 0.5);
  RttEstimator first_too_long(7, 0.005, 0.5);
  EXPECT_DOUBLE_EQ(first_too_long.Timeout(), 0.5);
}

TEST(RttEstimator, APartSentMoreThanOnceGivesNoSample) {
  RttEstimator estimator(0.1, kMin, kMax);
  estimator.OnAnswer(0.05, 2);
  EXPECT_FALSE(estimator.has_sample());
  estimator.OnAnswer(0.01, 1);
  estimator.OnAnswer(5, 3);
  EXPECT_DOUBLE_EQ(estimator.smoothed_s(), 0.01);
  EXPECT_DOUBLE_EQ(estimator.variance_s(), 0.005);
}

TEST(RttEstimator, EachResendOfAPartDoublesItsWait) {
  RttEstimator estimator(0.1, kMin, kMax);
  EXPECT_DOUBLE_EQ(estimator.Timeout(1), 0.1);
  EXPECT_DOUBLE_EQ(estimator.Timeout(2), 0.2);
  EXPECT_DOUBLE_EQ(estimator.Timeout(3), 0.4);
  estimator.OnAnswer(0.01, 1);
  EXPECT_DOUBLE_EQ(estimator.Timeout(3), 4 * 0.03);
  EXPECT_DOUBLE_EQ(estimator.Timeout(1000), kMax);
}

TEST(RttEstimator, ATimeoutBacksOffLaterPartsUntilASample) {
  RttEstimator estimator(0.1, kMin, kMax);
  estimator.OnAnswer(0.01, 1);
  estimator.OnTimeout(1);
  EXPECT_DOUBLE_EQ(estimator.Timeout(1), 2 * 0.03);
  // Parts timing out together on their first send back off once.
  estimator.OnTimeout(1);
  EXPECT_DOUBLE_EQ(estimator.Timeout(1), 2 * 0.03);
  estimator.OnTimeout(3);
  EXPECT_DOUBLE_EQ(estimator.Timeout(1), 8 * 0.03);
  // A part's own doubling and the backoff do not add up.
  EXPECT_DOUBLE_EQ(estimator.Timeout(2), 8 * 0.03);
  // A resent part's answer is no sample and ends no backoff.
  estimator.OnAnswer(0.01, 2);
  EXPECT_DOUBLE_EQ(estimator.Timeout(1), 8 * 0.03);
  estimator.OnAnswer(0.01, 1);
  EXPECT_LT(estimator.Timeout(1), 0.03);
}

}  // namespace
}  // namespace keel
