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
  EXPECT_EQ(metrics.size(), 7u);
  EXPECT_NEAR(metrics.at("objective_loss"), -(std::log(0.7) + std::log(0.3) + std::log(0.5)) / 3.0,
              1e-6);
  EXPECT_DOUBLE_EQ(metrics.at("multiclass_accuracy"), 2.0 / 3.0);
}

// Six examples of three classes. Each row's predicted class (the most
// probable) and the label's rank r (1-based, highest probability first, ties
// to the lower class id):
//   label 0: [0.7 0.2 0.1] predicted 0, r = 1
//   label 1: [0.5 0.3 0.2] predicted 0, r = 2
//   label 1: [0.1 0.6 0.3] predicted 1, r = 1
//   label 0: [0.2 0.5 0.3] predicted 1, r = 3
//   label 0: [0.6 0.1 0.3] predicted 0, r = 1
//   label 2: [0.3 0.4 0.3] predicted 1, r = 3 (class 0 ties it and goes first)
// Confusion matrix (rows actual, columns predicted):
//   actual 0: 2 1 0    actual 1: 1 1 0    actual 2: 0 1 0
// TP = (2, 1, 0), predicted = (3, 3, 0), actual = (3, 2, 1):
// precision (2/3, 1/3, 0), recall (2/3, 1/2, 0).
const std::vector<float> kThreeClassProbabilities = {
    0.7f, 0.2f, 0.1f,  //
    0.5f, 0.3f, 0.2f,  //
    0.1f, 0.6f, 0.3f,  //
    0.2f, 0.5f, 0.3f,  //
    0.6f, 0.1f, 0.3f,  //
    0.3f, 0.4f, 0.3f,  //
};
const std::vector<float> kThreeClassLabels = {0, 1, 1, 0, 0, 2};

TEST(MetricsMulticlass, MacroPrecisionAndRecallAverageThePerClassFigures) {
  const MetricSet metrics = MulticlassMetrics(kThreeClassProbabilities, kThreeClassLabels, 3);
  EXPECT_DOUBLE_EQ(metrics.at("multiclass_accuracy"), 3.0 / 6.0);
  // Class 2 is never predicted: its precision counts as 0.
  EXPECT_DOUBLE_EQ(metrics.at("macro_precision"), (2.0 / 3.0 + 1.0 / 3.0 + 0.0) / 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("macro_recall"), (2.0 / 3.0 + 1.0 / 2.0 + 0.0) / 3.0);
}

TEST(MetricsMulticlass, MacroFBetaAveragesEachClassesFScore) {
  // F1 per class: 2/3 (P = R), 2 (1/3)(1/2) / (1/3 + 1/2) = 2/5, and 0.
  const MetricSet f1 = MulticlassMetrics(kThreeClassProbabilities, kThreeClassLabels, 3);
  EXPECT_DOUBLE_EQ(f1.at("macro_f_beta"), (2.0 / 3.0 + 2.0 / 5.0) / 3.0);
  // F2 = 5 P R / (4 P + R) per class: 2/3, (5/6) / (11/6) = 5/11, and 0.
  const MetricSet f2 = MulticlassMetrics(kThreeClassProbabilities, kThreeClassLabels, 3, 3, 2.0);
  EXPECT_DOUBLE_EQ(f2.at("macro_f_beta"), (2.0 / 3.0 + 5.0 / 11.0) / 3.0);
}

TEST(MetricsMulticlass, TopKAccuracyCountsLabelsRankedKOrBetter) {
  // Ranks 1, 2, 1, 3, 1, 3.
  auto top = [](int k) {
    return MulticlassMetrics(kThreeClassProbabilities, kThreeClassLabels, 3, k)
        .at("multiclass_top_k_accuracy");
  };
  EXPECT_DOUBLE_EQ(top(1), 3.0 / 6.0);
  EXPECT_DOUBLE_EQ(top(2), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(top(3), 1.0);
  EXPECT_DOUBLE_EQ(top(10), 1.0);  // k beyond the classes: every label is in
}

TEST(MetricsMulticlass, TopKTiesGoToTheLowerClassIdAsThePredictionDoes) {
  // Classes 0 and 1 tie at 0.4: class 0 ranks 1, class 1 ranks 2.
  const std::vector<float> tied = {0.4f, 0.4f, 0.2f};
  const MetricSet label_one = MulticlassMetrics(tied, {1}, 3, 1);
  EXPECT_EQ(label_one.at("multiclass_accuracy"), 0.0);
  EXPECT_EQ(label_one.at("multiclass_top_k_accuracy"), 0.0);
  EXPECT_EQ(MulticlassMetrics(tied, {1}, 3, 2).at("multiclass_top_k_accuracy"), 1.0);
  EXPECT_EQ(MulticlassMetrics(tied, {0}, 3, 1).at("multiclass_top_k_accuracy"), 1.0);
}

TEST(MetricsMulticlass, DcgIsTheMeanOfOneOverLog2OfOnePlusTheLabelsRank) {
  // Ranks 1, 2, 1, 3, 1, 3: gains 1, 1/log2(3), 1, 1/2, 1, 1/2.
  const MetricSet metrics = MulticlassMetrics(kThreeClassProbabilities, kThreeClassLabels, 3);
  EXPECT_NEAR(metrics.at("dcg"), (4.0 + 1.0 / std::log2(3.0)) / 6.0, 1e-12);
  // Every prediction right: 1.
  EXPECT_DOUBLE_EQ(MulticlassMetrics({0.9f, 0.1f, 0.2f, 0.8f}, {0, 1}, 2).at("dcg"), 1.0);
}

TEST(MetricsMulticlass, ClassesNeitherSeenNorPredictedAreLeftOutOfTheMacroMeans) {
  // The three-class example with a fourth class of probability 0 that no
  // label names: the same macro figures as with three classes.
  std::vector<float> four;
  for (size_t i = 0; i < kThreeClassProbabilities.size(); ++i) {
    four.push_back(kThreeClassProbabilities[i]);
    if (i % 3 == 2) four.push_back(0.0f);
  }
  const MetricSet metrics = MulticlassMetrics(four, kThreeClassLabels, 4);
  EXPECT_DOUBLE_EQ(metrics.at("macro_precision"), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("macro_recall"), 7.0 / 18.0);
  EXPECT_DOUBLE_EQ(metrics.at("macro_f_beta"), 16.0 / 45.0);
}

TEST(MetricsMulticlass, RejectsNaNProbabilitiesAndBadTopKOrBeta) {
  const std::vector<float> with_nan = {0.5f, std::numeric_limits<float>::quiet_NaN()};
  ExpectErrorMentioning([&] { MulticlassMetrics(with_nan, {0}, 2); },
                        {"MulticlassMetrics", "class 1", "example 0", "NaN"});
  ExpectErrorMentioning(
      [] {
        MulticlassMetrics({0.5f, 0.5f}, {0}, 2, 0);
      },
      {"MulticlassMetrics", "top_k 0"});
  ExpectErrorMentioning(
      [] {
        MulticlassMetrics({0.5f, 0.5f}, {0}, 2, 1, -1.0);
      },
      {"MulticlassMetrics", "beta -1"});
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
