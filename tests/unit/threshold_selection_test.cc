// Threshold selection and model scoring on small sets whose answers are
// worked out by hand in the comments.
#include "models/threshold_selection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/metrics.h"
#include "worker/hyperparameters.h"
#include "worker/model_selection.h"

namespace keel {
namespace {

ThresholdCriterion Criterion(SelectionCriterion kind, double beta = 1.0,
                             double target_precision = 0.8, double target_recall = 0.8) {
  ThresholdCriterion criterion;
  criterion.criterion = kind;
  criterion.beta = beta;
  criterion.target_precision = target_precision;
  criterion.target_recall = target_recall;
  return criterion;
}

// Eight examples, best first: 0.9 is positive, 0.8 negative, 0.7 positive,
// the rest negative (2 positives, 6 negatives). Putting the top k positive:
//   k  tp fp  accuracy  precision  recall  F1     F0.5
//   1  1  0   7/8       1          1/2     2/3    5/6
//   2  1  1   6/8       1/2        1/2     1/2
//   3  2  1   7/8       2/3        1       4/5    5/7
//   k >= 4: tp 2, more false positives, every figure but recall lower.
const std::vector<float> kRanked = {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f, 0.3f, 0.2f};
const std::vector<float> kRankedLabels = {1, 0, 1, 0, 0, 0, 0, 0};

TEST(ChooseThreshold, AccuracyMovesTheThresholdBetweenTheClasses) {
  // At 0.5 only 0.9 is called positive: 3 of 5 right. Every positive is above
  // every negative, so a threshold between 0.2 and 0.3 gets all 5 right.
  const ThresholdChoice choice = ChooseThreshold({0.9f, 0.4f, 0.3f, 0.2f, 0.1f}, {1, 1, 1, 0, 0},
                                                 Criterion(SelectionCriterion::kAccuracy), 0.5);
  EXPECT_EQ(choice.value, 1.0);
  EXPECT_GT(choice.threshold, 0.2f);
  EXPECT_LT(choice.threshold, 0.3f);
  EXPECT_NEAR(choice.threshold, 0.25, 1e-7);  // the midpoint
  EXPECT_TRUE(choice.target_met);
}

TEST(ChooseThreshold, KeepsTheDefaultWhenItIsAmongTheBest) {
  // Any threshold in [0.4, 0.6) labels all four right; 0.5 is one of them.
  const ThresholdChoice choice = ChooseThreshold({0.9f, 0.6f, 0.4f, 0.1f}, {1, 1, 0, 0},
                                                 Criterion(SelectionCriterion::kAccuracy), 0.5);
  EXPECT_EQ(choice.value, 1.0);
  EXPECT_EQ(choice.threshold, 0.5);
}

TEST(ChooseThreshold, ADefaultEqualToAPredictionLabelsItNegative) {
  // At 0.5 the positive predicted 0.5 is called negative (it must exceed the
  // threshold): 1 of 2. Only thresholds in [0.4, 0.5) get both right.
  const ThresholdChoice choice =
      ChooseThreshold({0.5f, 0.4f}, {1, 0}, Criterion(SelectionCriterion::kAccuracy), 0.5);
  EXPECT_EQ(choice.value, 1.0);
  EXPECT_NEAR(choice.threshold, 0.45, 1e-7);
}

TEST(ChooseThreshold, EqualPredictionsFallOnTheSameSide) {
  // Three examples at 0.6 (two positive, one negative) and two negatives at
  // 0.3. Splitting the 0.6s would get all five right, but a threshold cannot:
  // the best is 0.6s positive, 4 of 5 right, for thresholds in [0.3, 0.6).
  const ThresholdChoice choice = ChooseThreshold({0.6f, 0.6f, 0.6f, 0.3f, 0.3f}, {1, 1, 0, 0, 0},
                                                 Criterion(SelectionCriterion::kAccuracy), 0.9);
  EXPECT_EQ(choice.value, 0.8);
  EXPECT_NEAR(choice.threshold, 0.45, 1e-7);  // 0.9 is outside: the midpoint
}

TEST(ChooseThreshold, AccuracyTiesGoToTheSplitNearestTheDefault) {
  // k = 1 (thresholds [0.8, 0.9)) and k = 3 ([0.6, 0.7)) both get 7 of 8
  // right; [0.6, 0.7) is nearer 0.5.
  const ThresholdChoice choice =
      ChooseThreshold(kRanked, kRankedLabels, Criterion(SelectionCriterion::kAccuracy), 0.5);
  EXPECT_EQ(choice.value, 7.0 / 8);
  EXPECT_NEAR(choice.threshold, 0.65, 1e-7);
  // From above, [0.8, 0.9) is the nearer one.
  EXPECT_NEAR(
      ChooseThreshold(kRanked, kRankedLabels, Criterion(SelectionCriterion::kAccuracy), 0.95)
          .threshold,
      0.85, 1e-7);
}

TEST(ChooseThreshold, FBetaMaximisesTheFScoreOfItsBeta) {
  const ThresholdChoice f1 =
      ChooseThreshold(kRanked, kRankedLabels, Criterion(SelectionCriterion::kFBeta, 1.0), 0.5);
  EXPECT_NEAR(f1.value, 0.8, 1e-12);  // k = 3
  EXPECT_NEAR(f1.threshold, 0.65, 1e-7);
  // beta = 0.5 weighs precision more: k = 1, F = 1.25 / 1.5.
  const ThresholdChoice f_half =
      ChooseThreshold(kRanked, kRankedLabels, Criterion(SelectionCriterion::kFBeta, 0.5), 0.5);
  EXPECT_NEAR(f_half.value, 5.0 / 6, 1e-12);
  EXPECT_NEAR(f_half.threshold, 0.85, 1e-7);
}

TEST(ChooseThreshold, PrecisionAtTargetRecallHoldsTheRecall) {
  // Recall >= 1/2 from k = 1 on; the best precision there is k = 1's, 1.
  const ThresholdChoice half =
      ChooseThreshold(kRanked, kRankedLabels,
                      Criterion(SelectionCriterion::kPrecisionAtTargetRecall, 1, 0.8, 0.5), 0.5);
  EXPECT_EQ(half.value, 1.0);
  EXPECT_NEAR(half.threshold, 0.85, 1e-7);
  EXPECT_TRUE(half.target_met);
  // Recall 1 needs k >= 3; the best precision there is k = 3's, 2/3.
  const ThresholdChoice all =
      ChooseThreshold(kRanked, kRankedLabels,
                      Criterion(SelectionCriterion::kPrecisionAtTargetRecall, 1, 0.8, 1.0), 0.5);
  EXPECT_NEAR(all.value, 2.0 / 3, 1e-12);
  EXPECT_NEAR(all.threshold, 0.65, 1e-7);
}

TEST(ChooseThreshold, RecallAtTargetPrecisionHoldsThePrecision) {
  // Precision >= 0.6 at k = 1 (recall 1/2) and k = 3 (recall 1): k = 3.
  const ThresholdChoice loose =
      ChooseThreshold(kRanked, kRankedLabels,
                      Criterion(SelectionCriterion::kRecallAtTargetPrecision, 1, 0.6, 0.8), 0.5);
  EXPECT_EQ(loose.value, 1.0);
  EXPECT_NEAR(loose.threshold, 0.65, 1e-7);
  // Precision >= 0.8 only at k = 1.
  const ThresholdChoice strict =
      ChooseThreshold(kRanked, kRankedLabels,
                      Criterion(SelectionCriterion::kRecallAtTargetPrecision, 1, 0.8, 0.8), 0.5);
  EXPECT_EQ(strict.value, 0.5);
  EXPECT_NEAR(strict.threshold, 0.85, 1e-7);
}

TEST(ChooseThreshold, TargetFiguresEqualToTheTargetMeetIt) {
  // Five positives and one negative (0.5). The top four: recall exactly 0.8,
  // precision 1. Were 0.8 not to meet a target of 0.8, the best precision
  // would be at recall 1 (all six positive): 5/6.
  const ThresholdChoice choice =
      ChooseThreshold({0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.2f}, {1, 1, 1, 1, 0, 1},
                      Criterion(SelectionCriterion::kPrecisionAtTargetRecall, 1, 0.8, 0.8), 0.5);
  EXPECT_TRUE(choice.target_met);
  EXPECT_EQ(choice.value, 1.0);
  EXPECT_EQ(choice.threshold, 0.5);
}

TEST(ChooseThreshold, AnUnreachablePrecisionTargetComesClosestAndSaysSo) {
  // Best first: 0, 1, 0, 1. Precision at k = 1..4: 0, 1/2, 1/3, 1/2; never
  // 0.8. The closest is 1/2, at k = 2 (recall 1/2) and k = 4 (recall 1): k = 4,
  // all positive, whose threshold (the default, 0.95, lying above it) is the
  // largest double below 0.6.
  const ThresholdChoice choice =
      ChooseThreshold({0.9f, 0.8f, 0.7f, 0.6f}, {0, 1, 0, 1},
                      Criterion(SelectionCriterion::kRecallAtTargetPrecision, 1, 0.8, 0.8), 0.95);
  EXPECT_FALSE(choice.target_met);
  EXPECT_EQ(choice.value, 0.0);
  EXPECT_EQ(choice.threshold,
            std::nextafter(static_cast<double>(0.6f), -std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(PredictedPositive(0.6f, choice.threshold));
}

TEST(ChooseThreshold, ARecallTargetWithoutPositivesIsUnreachable) {
  // Recall is 0 everywhere; every split ties, so the default stays.
  const ThresholdChoice choice =
      ChooseThreshold({0.9f, 0.1f}, {0, 0},
                      Criterion(SelectionCriterion::kPrecisionAtTargetRecall, 1, 0.8, 0.8), 0.5);
  EXPECT_FALSE(choice.target_met);
  EXPECT_EQ(choice.value, 0.0);
  EXPECT_EQ(choice.threshold, 0.5);
}

TEST(ChooseThreshold, NonePositiveUsesTheHighestPrediction) {
  // Only negatives: accuracy 1 needs nothing positive; from a default of 0.1
  // the nearest such threshold is the highest prediction itself.
  const ThresholdChoice choice =
      ChooseThreshold({0.3f, 0.7f}, {0, 0}, Criterion(SelectionCriterion::kAccuracy), 0.1);
  EXPECT_EQ(choice.value, 1.0);
  EXPECT_EQ(choice.threshold, static_cast<double>(0.7f));
  EXPECT_FALSE(PredictedPositive(0.7f, choice.threshold));
}

TEST(ChooseThreshold, WorksOnHingeMarginsAroundZero) {
  // Margins: -1 negative, -0.5 and 1 positive. At 0, 2 of 3 right; any
  // threshold in [-1, -0.5) gets all 3.
  const ThresholdChoice choice = ChooseThreshold({-0.5f, -1.0f, 1.0f}, {1, 0, 1},
                                                 Criterion(SelectionCriterion::kAccuracy), 0.0);
  EXPECT_EQ(choice.value, 1.0);
  EXPECT_NEAR(choice.threshold, -0.75, 1e-7);
}

TEST(ChooseThreshold, LossFunctionLeavesTheDefault) {
  const ThresholdChoice choice =
      ChooseThreshold(kRanked, kRankedLabels, Criterion(SelectionCriterion::kLossFunction), 0.5);
  EXPECT_EQ(choice.threshold, 0.5);
  EXPECT_TRUE(std::isnan(choice.value));
}

TEST(ChooseThreshold, AgreesWithTheMetricsOverEveryThresholdOnARandomSet) {
  // A brute-force reference: the metrics at every distinct prediction and
  // below the lowest. Predictions on a coarse grid make many ties.
  std::mt19937 random(11);
  std::vector<float> predictions, labels;
  for (int i = 0; i < 300; ++i) {
    const float p = static_cast<float>(random() % 21) / 20.0f;
    predictions.push_back(p);
    labels.push_back(std::uniform_real_distribution<double>(0, 1)(random) < p ? 1.0f : 0.0f);
  }
  std::vector<double> thresholds(predictions.begin(), predictions.end());
  thresholds.push_back(-1.0);
  for (const double beta : {0.5, 1.0, 2.0}) {
    double best_accuracy = 0, best_f = 0;
    for (const double t : thresholds) {
      const MetricSet m = BinaryClassificationMetrics(predictions, labels, t, beta);
      best_accuracy = std::max(best_accuracy, m.at("binary_classification_accuracy"));
      best_f = std::max(best_f, m.at("binary_f_beta"));
    }
    const ThresholdChoice accuracy =
        ChooseThreshold(predictions, labels, Criterion(SelectionCriterion::kAccuracy, beta), 0.5);
    const ThresholdChoice f =
        ChooseThreshold(predictions, labels, Criterion(SelectionCriterion::kFBeta, beta), 0.5);
    EXPECT_NEAR(accuracy.value, best_accuracy, 1e-12);
    EXPECT_NEAR(f.value, best_f, 1e-12) << "beta " << beta;
    // The figures at the threshold returned are the ones claimed.
    EXPECT_NEAR(BinaryClassificationMetrics(predictions, labels, accuracy.threshold, beta)
                    .at("binary_classification_accuracy"),
                accuracy.value, 1e-12);
    EXPECT_NEAR(
        BinaryClassificationMetrics(predictions, labels, f.threshold, beta).at("binary_f_beta"),
        f.value, 1e-12);
  }
}

// Runs `call`, expecting keel::Error whose message contains `part`.
template <typename Call>
void ExpectErrorMentioning(const Call& call, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "expected keel::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
  }
}

TEST(ChooseThreshold, RefusesBadInputNamingTheExample) {
  const ThresholdCriterion accuracy = Criterion(SelectionCriterion::kAccuracy);
  ExpectErrorMentioning(
      [&] {
        ChooseThreshold({0.5f}, {1, 0}, accuracy, 0.5);
      },
      "ChooseThreshold: 1 predictions but 2 labels");
  ExpectErrorMentioning([&] { ChooseThreshold({}, {}, accuracy, 0.5); },
                        "ChooseThreshold: no examples");
  ExpectErrorMentioning(
      [&] {
        ChooseThreshold({0.5f, 0.2f}, {1, 2}, accuracy, 0.5);
      },
      "example 1 has label 2");
  ExpectErrorMentioning(
      [&] {
        ChooseThreshold({std::nanf(""), 0.2f}, {1, 0}, accuracy, 0.5);
      },
      "example 0 has a NaN prediction");
}

TEST(SelectionCriterion, ParsesSageMakersNamesAndRefusesOthersNamingTheFlag) {
  for (const std::string name : {"accuracy", "f_beta", "precision_at_target_recall",
                                 "recall_at_target_precision", "loss_function"}) {
    EXPECT_EQ(SelectionCriterionName(ParseSelectionCriterion(name)), name);
  }
  ExpectErrorMentioning([] { ParseSelectionCriterion("f1"); },
                        "--binary_classifier_model_selection_criteria 'f1' is not");
}

TEST(SelectionCriterion, TargetsOutsideZeroToOneAreRefusedNamingTheFlag) {
  Hyperparameters h;
  h.target_recall = 1.5;
  ExpectErrorMentioning([&] { h.Validate(); }, "--target_recall 1.5");
  h.target_recall = 0.8;
  h.target_precision = -0.1;
  ExpectErrorMentioning([&] { h.Validate(); }, "--target_precision -0.1");
  h.target_precision = 0.8;
  h.num_calibration_samples = 0;
  ExpectErrorMentioning([&] { h.Validate(); }, "--num_calibration_samples");
}

TEST(SelectionCriterion, DefaultsAreSageMakers) {
  const Hyperparameters h;
  EXPECT_EQ(h.selection_criterion, SelectionCriterion::kAccuracy);
  EXPECT_EQ(h.target_precision, 0.8);
  EXPECT_EQ(h.target_recall, 0.8);
  EXPECT_EQ(h.num_calibration_samples, 10000000u);
}

// --- ScoreModel ---

TEST(ScoreModel, ABinaryLinearLearnerScoresItsCriterionAtTheTunedThreshold) {
  Hyperparameters h;  // linear learner, binary, accuracy
  const ModelScore score = ScoreModel(h, {0.9f, 0.4f, 0.3f, 0.2f, 0.1f}, {1, 1, 1, 0, 0});
  EXPECT_EQ(score.score, 1.0);
  EXPECT_NEAR(score.threshold, 0.25, 1e-7);
  h.selection_criterion = SelectionCriterion::kFBeta;
  h.f_beta = 0.5;
  EXPECT_NEAR(ScoreModel(h, kRanked, kRankedLabels).score, 5.0 / 6, 1e-12);
}

TEST(ScoreModel, AnUnreachableTargetScoresZero) {
  Hyperparameters h;
  h.selection_criterion = SelectionCriterion::kRecallAtTargetPrecision;
  const ModelScore score = ScoreModel(h, {0.9f, 0.8f, 0.7f, 0.6f}, {0, 1, 0, 1});
  EXPECT_EQ(score.score, 0.0);
  EXPECT_FALSE(score.target_met);
}

TEST(ScoreModel, LossFunctionScoresTheNegatedCrossEntropyAtTheDefaultThreshold) {
  Hyperparameters h;
  h.selection_criterion = SelectionCriterion::kLossFunction;
  const ModelScore score = ScoreModel(h, {0.8f, 0.4f}, {1, 0});
  // -(-log 0.8 - log 0.6) / 2
  EXPECT_NEAR(score.score, (std::log(0.8) + std::log(0.6)) / 2, 1e-6);
  EXPECT_EQ(score.threshold, 0.5);
}

TEST(ScoreModel, AFactorizationMachineIsScoredByItsLoss) {
  Hyperparameters h;
  h.job = JobKind::kFactorizationMachines;
  const ModelScore score = ScoreModel(h, {0.8f, 0.4f}, {1, 0});
  EXPECT_NEAR(score.score, (std::log(0.8) + std::log(0.6)) / 2, 1e-6);
  EXPECT_EQ(score.threshold, 0.5);
}

TEST(ScoreModel, ARegressorScoresTheNegatedMeanSquaredError) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  EXPECT_NEAR(ScoreModel(h, {1.0f, 3.0f}, {2.0f, 2.0f}).score, -1.0, 1e-12);
  // Under another loss, its mean training loss, as objective_loss reports it.
  h.loss = "absolute_loss";
  EXPECT_NEAR(ScoreModel(h, {1.0f, 3.0f}, {2.0f, 2.0f}, 1.0).score, -1.0, 1e-12);
}

TEST(ScoreModel, AMulticlassClassifierScoresTheNegatedCrossEntropy) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  // Each label has probability 1/2: -log 2 per row.
  const ModelScore score = ScoreModel(h, {0.5f, 0.25f, 0.25f, 0.25f, 0.5f, 0.25f}, {0.0f, 1.0f});
  EXPECT_NEAR(score.score, -std::log(2.0), 1e-6);
}

TEST(ThresholdMetrics, NameTheChannelTheThresholdAndTheCriterion) {
  Hyperparameters h;
  const MetricSet accuracy = ThresholdMetrics("validation", h, {0.25, 0.75, true});
  EXPECT_EQ(accuracy, (MetricSet{{"validation:threshold", 0.25}, {"validation:accuracy", 0.75}}));
  h.selection_criterion = SelectionCriterion::kPrecisionAtTargetRecall;
  const MetricSet target = ThresholdMetrics("train", h, {0.4, 0.0, false});
  EXPECT_EQ(target, (MetricSet{{"train:threshold", 0.4},
                               {"train:precision_at_target_recall", 0.0},
                               {"train:threshold_target_met", 0.0}}));
}

}  // namespace
}  // namespace keel
