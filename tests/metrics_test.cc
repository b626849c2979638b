// Evaluation metrics on small sets computed by hand.
#include "models/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"

namespace keel {
namespace {

// Runs `call`, expecting keel::Error whose message contains every one of `parts`.
template <typename Call>
void ExpectErrorMentioning(const Call& call, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "expected keel::Error";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

// --- RocAuc ---

TEST(MetricsRocAuc, PerfectRankingIsOne) {
  EXPECT_DOUBLE_EQ(RocAuc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
}

TEST(MetricsRocAuc, InvertedRankingIsZero) {
  EXPECT_DOUBLE_EQ(RocAuc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
}

TEST(MetricsRocAuc, IsTheFractionOfCorrectlyOrderedPairs) {
  // Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 pairs in order.
  EXPECT_DOUBLE_EQ(RocAuc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
}

TEST(MetricsRocAuc, TiesCountOneHalf) {
  // Pairs: 0.5 > 0.2, 0.5 = 0.5 (one half), 0.9 > 0.2, 0.9 > 0.5.
  EXPECT_DOUBLE_EQ(RocAuc({0.2f, 0.5f, 0.5f, 0.9f}, {0, 1, 0, 1}), 3.5 / 4.0);
  EXPECT_DOUBLE_EQ(RocAuc({0.3f, 0.3f, 0.3f, 0.3f, 0.3f}, {0, 1, 0, 1, 1}), 0.5);
}

TEST(MetricsRocAuc, OneClassOnlyIsOneHalf) {
  EXPECT_DOUBLE_EQ(RocAuc({0.1f, 0.9f, 0.4f}, {1, 1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(RocAuc({0.1f, 0.9f, 0.4f}, {0, 0, 0}), 0.5);
  EXPECT_DOUBLE_EQ(RocAuc({}, {}), 0.5);
}

TEST(MetricsRocAuc, RejectsLabelsOtherThanZeroAndOne) {
  ExpectErrorMentioning([] { RocAuc({0.1f, 0.9f}, {0, 2}); }, {"RocAuc", "label 2", "example 1"});
}

TEST(MetricsRocAuc, RejectsNaNScores) {
  ExpectErrorMentioning(
      [] {
        RocAuc({0.1f, std::numeric_limits<float>::quiet_NaN()}, {0, 1});
      },
      {"RocAuc", "example 1", "NaN"});
}

TEST(MetricsRocAuc, RejectsMismatchedSizes) {
  ExpectErrorMentioning(
      [] {
        RocAuc({0.1f, 0.9f}, {0, 1, 1});
      },
      {"RocAuc", "2 scores", "3 labels"});
}

// --- Binary classification ---

// Predicted positive at 0.5: (0.9, 0.8, 0.7) against labels (1, 0, 1, 1, 1):
// TP = 2, FP = 1, FN = 2, TN = 0.
const std::vector<float> kBinaryProbabilities = {0.9f, 0.8f, 0.7f, 0.4f, 0.2f};
const std::vector<float> kBinaryLabels = {1, 0, 1, 1, 1};

TEST(MetricsBinary, ComputesEveryMetricOnAHandExample) {
  const MetricSet metrics = BinaryClassificationMetrics(kBinaryProbabilities, kBinaryLabels);
  EXPECT_EQ(metrics.size(), 6u);
  const double loss =
      -(std::log(0.9) + std::log(0.2) + std::log(0.7) + std::log(0.4) + std::log(0.2)) / 5.0;
  EXPECT_NEAR(metrics.at("objective_loss"), loss, 1e-6);
  EXPECT_DOUBLE_EQ(metrics.at("binary_classification_accuracy"), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(metrics.at("precision"), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("recall"), 1.0 / 2.0);
  EXPECT_DOUBLE_EQ(metrics.at("binary_f_beta"), 4.0 / 7.0);
  // Only the positive 0.9 outranks the negative 0.8.
  EXPECT_DOUBLE_EQ(metrics.at("roc_auc_score"), 1.0 / 4.0);
}

TEST(MetricsBinary, BetaWeighsRecall) {
  // F_2 = 5 P R / (4 P + R) with P = 2/3, R = 1/2.
  const MetricSet metrics =
      BinaryClassificationMetrics(kBinaryProbabilities, kBinaryLabels, 0.5, 2.0);
  EXPECT_DOUBLE_EQ(metrics.at("binary_f_beta"), 10.0 / 19.0);
}

TEST(MetricsBinary, ThresholdMovesTheDecision) {
  // At 0.3 the 0.4 is predicted positive too: TP = 3, FP = 1, FN = 1.
  const MetricSet metrics = BinaryClassificationMetrics(kBinaryProbabilities, kBinaryLabels, 0.3);
  EXPECT_DOUBLE_EQ(metrics.at("binary_classification_accuracy"), 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(metrics.at("precision"), 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(metrics.at("recall"), 3.0 / 4.0);
}

TEST(MetricsBinary, NoPredictedPositivesGiveZeroPrecisionNotNaN) {
  const MetricSet metrics = BinaryClassificationMetrics({0.1f, 0.2f}, {1, 0});
  EXPECT_EQ(metrics.at("precision"), 0.0);
  EXPECT_EQ(metrics.at("recall"), 0.0);
  EXPECT_EQ(metrics.at("binary_f_beta"), 0.0);
  EXPECT_DOUBLE_EQ(metrics.at("binary_classification_accuracy"), 0.5);
}

TEST(MetricsBinary, SaturatedWrongPredictionHasFiniteLoss) {
  const MetricSet metrics = BinaryClassificationMetrics({0.0f, 1.0f}, {1, 0});
  EXPECT_TRUE(std::isfinite(metrics.at("objective_loss")));
  EXPECT_GT(metrics.at("objective_loss"), 10.0);
}

TEST(MetricsBinary, RejectsBadInput) {
  ExpectErrorMentioning([] { BinaryClassificationMetrics({0.5f}, {0.5f}); },
                        {"BinaryClassificationMetrics", "label 0.5", "example 0"});
  ExpectErrorMentioning(
      [] {
        BinaryClassificationMetrics({0.5f}, {1, 0});
      },
      {"BinaryClassificationMetrics", "1 probabilities", "2 labels"});
  ExpectErrorMentioning([] { BinaryClassificationMetrics({}, {}); },
                        {"BinaryClassificationMetrics", "no examples"});
  ExpectErrorMentioning([] { BinaryClassificationMetrics({0.5f}, {1}, 0.5, 0.0); },
                        {"BinaryClassificationMetrics", "beta 0"});
}

// --- Regression ---

TEST(MetricsRegression, ComputesEveryMetricOnAHandExample) {
  // Errors 0, -1, 2.
  const MetricSet metrics = RegressionMetrics({1.0f, 2.0f, 4.0f}, {1.0f, 3.0f, 2.0f});
  EXPECT_EQ(metrics.size(), 4u);
  EXPECT_DOUBLE_EQ(metrics.at("objective_loss"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("mse"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("rmse"), std::sqrt(5.0 / 3.0));
  EXPECT_DOUBLE_EQ(metrics.at("absolute_loss"), 1.0);
}

TEST(MetricsRegression, RejectsBadInput) {
  ExpectErrorMentioning(
      [] {
        RegressionMetrics({1.0f, 2.0f}, {1.0f});
      },
      {"RegressionMetrics", "2 predictions", "1 labels"});
  ExpectErrorMentioning([] { RegressionMetrics({}, {}); }, {"RegressionMetrics", "no examples"});
}

// --- Multiclass ---

TEST(MetricsMulticlass, ComputesEveryMetricOnAHandExample) {
  const std::vector<float> probabilities = {
      0.7f, 0.2f, 0.1f,  // label 0: right
      0.1f, 0.3f, 0.6f,  // label 1: wrong
      0.2f, 0.5f, 0.3f,  // label 1: right
  };
  const MetricSet metrics = MulticlassMetrics(probabilities, {0, 1, 1}, 3);
  EXPECT_EQ(metrics.size(), 2u);
  EXPECT_NEAR(metrics.at("objective_loss"), -(std::log(0.7) + std::log(0.3) + std::log(0.5)) / 3.0,
              1e-6);
  EXPECT_DOUBLE_EQ(metrics.at("multiclass_accuracy"), 2.0 / 3.0);
}

TEST(MetricsMulticlass, RejectsLabelsThatAreNotClassIds) {
  const std::vector<float> probabilities = {0.5f, 0.5f, 0.5f, 0.5f};
  ExpectErrorMentioning(
      [&] {
        MulticlassMetrics(probabilities, {0, 2}, 2);
      },
      {"MulticlassMetrics", "label 2", "example 1", "[0, 2)"});
  ExpectErrorMentioning(
      [&] {
        MulticlassMetrics(probabilities, {0.5f, 1}, 2);
      },
      {"MulticlassMetrics", "label 0.5", "example 0"});
}

TEST(MetricsMulticlass, RejectsMismatchedSizes) {
  ExpectErrorMentioning(
      [] {
        MulticlassMetrics({0.5f, 0.5f, 0.5f}, {0, 1}, 2);
      },
      {"MulticlassMetrics", "3 probabilities", "2 labels x 2 classes"});
  ExpectErrorMentioning([] { MulticlassMetrics({}, {}, 0); }, {"MulticlassMetrics", "0 classes"});
}

}  // namespace
}  // namespace keel
