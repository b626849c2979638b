// SageMaker Linear Learner's losses beyond logistic, squared and softmax
// (models/losses.h), how a job's settings select one (worker/hyperparameters.h),
// and the metrics a loss implies (worker/evaluator.h).
#include "models/losses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "test_util.h"
#include "worker/evaluator.h"
#include "worker/hyperparameters.h"

namespace keel {
namespace {

LossFunction Loss(LossKind kind) { return LossFunction(kind); }

// A `kind` loss with its `parameter` set to `value`.
LossFunction With(LossKind kind, float LossFunction::*parameter, float value) {
  LossFunction loss(kind);
  loss.*parameter = value;
  return loss;
}

LossFunction Hinge(float margin) { return With(LossKind::kHinge, &LossFunction::margin, margin); }
LossFunction Quantile(float quantile) {
  return With(LossKind::kQuantile, &LossFunction::quantile, quantile);
}
LossFunction Insensitive(LossKind kind, float insensitivity) {
  return With(kind, &LossFunction::insensitivity, insensitivity);
}
LossFunction Huber(float delta) {
  return With(LossKind::kHuber, &LossFunction::huber_delta, delta);
}

struct Evaluation {
  float loss;
  float gradient;
  float prediction;
};

Evaluation Evaluate(const LossFunction& loss, float score, float label) {
  Evaluation e{};
  e.loss = ExampleLoss(loss, &score, 1, label, &e.gradient, &e.prediction);
  return e;
}

// --- Values at hand-computed points ---

TEST(Losses, AbsoluteLossIsTheAbsoluteError) {
  EXPECT_FLOAT_EQ(Evaluate(Loss(LossKind::kAbsolute), 2.5f, 1.0f).loss, 1.5f);
  EXPECT_FLOAT_EQ(Evaluate(Loss(LossKind::kAbsolute), -1.0f, 1.0f).loss, 2.0f);
  EXPECT_FLOAT_EQ(Evaluate(Loss(LossKind::kAbsolute), 2.5f, 1.0f).gradient, 1.0f);
  EXPECT_FLOAT_EQ(Evaluate(Loss(LossKind::kAbsolute), -1.0f, 1.0f).gradient, -1.0f);
}

TEST(Losses, HingeLossChargesScoresInsideTheMarginOnTheLabelsSide) {
  // Label 1 wants score >= margin, label 0 wants score <= -margin.
  EXPECT_FLOAT_EQ(Evaluate(Hinge(1.0f), 0.25f, 1.0f).loss, 0.75f);
  EXPECT_FLOAT_EQ(Evaluate(Hinge(1.0f), 0.25f, 1.0f).gradient, -1.0f);
  EXPECT_FLOAT_EQ(Evaluate(Hinge(1.0f), 2.0f, 1.0f).loss, 0.0f);
  EXPECT_FLOAT_EQ(Evaluate(Hinge(1.0f), 2.0f, 1.0f).gradient, 0.0f);
  EXPECT_FLOAT_EQ(Evaluate(Hinge(1.0f), 0.25f, 0.0f).loss, 1.25f);
  EXPECT_FLOAT_EQ(Evaluate(Hinge(1.0f), 0.25f, 0.0f).gradient, 1.0f);
  EXPECT_FLOAT_EQ(Evaluate(Hinge(1.0f), -3.0f, 0.0f).loss, 0.0f);
  EXPECT_FLOAT_EQ(Evaluate(Hinge(2.0f), 1.0f, 1.0f).loss, 1.0f);
}

TEST(Losses, EpsInsensitiveSquaredLossIsHalfTheSquaredExcessOverTheBand) {
  const LossFunction loss = Insensitive(LossKind::kEpsInsensitiveSquared, 0.5f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 2.0f, 1.0f).loss, 0.125f);  // excess 0.5
  EXPECT_FLOAT_EQ(Evaluate(loss, 2.0f, 1.0f).gradient, 0.5f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 0.0f, 1.0f).loss, 0.125f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 0.0f, 1.0f).gradient, -0.5f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 1.25f, 1.0f).loss, 0.0f);  // inside the band
  EXPECT_FLOAT_EQ(Evaluate(loss, 1.25f, 1.0f).gradient, 0.0f);
}

TEST(Losses, EpsInsensitiveAbsoluteLossIsTheExcessOverTheBand) {
  const LossFunction loss = Insensitive(LossKind::kEpsInsensitiveAbsolute, 0.5f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 2.0f, 1.0f).loss, 0.5f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 2.0f, 1.0f).gradient, 1.0f);
  EXPECT_FLOAT_EQ(Evaluate(loss, -1.0f, 1.0f).loss, 1.5f);
  EXPECT_FLOAT_EQ(Evaluate(loss, -1.0f, 1.0f).gradient, -1.0f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 1.4f, 1.0f).loss, 0.0f);
  EXPECT_FLOAT_EQ(Evaluate(loss, 1.4f, 1.0f).gradient, 0.0f);
}

TEST(Losses, QuantileLossWeighsUnderAndOverPredictionByQAndOneMinusQ) {
  EXPECT_FLOAT_EQ(Evaluate(Quantile(0.9f), 1.0f, 2.0f).loss, 0.9f);  // under by 1
  EXPECT_FLOAT_EQ(Evaluate(Quantile(0.9f), 1.0f, 2.0f).gradient, -0.9f);
  EXPECT_NEAR(Evaluate(Quantile(0.9f), 4.0f, 2.0f).loss, 0.2f, 1e-6);  // over by 2
  EXPECT_NEAR(Evaluate(Quantile(0.9f), 4.0f, 2.0f).gradient, 0.1f, 1e-6);
}

TEST(Losses, QuantileLossIsLeastAtTheLabelsQuantile) {
  // Labels 1..100: the 0.9-quantile lies between 90 and 91, where the summed
  // gradient (10 labels above at -0.9, 90 below at +0.1) is zero.
  const LossFunction loss = Quantile(0.9f);
  auto total = [&loss](float score) {
    double sum = 0;
    for (int label = 1; label <= 100; ++label) sum += Evaluate(loss, score, label).loss;
    return sum;
  };
  EXPECT_LT(total(90.5f), total(85.0f));
  EXPECT_LT(total(90.5f), total(95.0f));
  EXPECT_LT(total(90.5f), total(50.0f));  // the median is not the answer
  double gradient = 0;
  for (int label = 1; label <= 100; ++label) gradient += Evaluate(loss, 90.5f, label).gradient;
  EXPECT_NEAR(gradient, 0.0, 1e-4);
}

TEST(Losses, HuberLossIsSquaredNearTheLabelAndAbsoluteBeyondDelta) {
  EXPECT_FLOAT_EQ(Evaluate(Huber(1.0f), 1.5f, 1.0f).loss, 0.125f);
  EXPECT_FLOAT_EQ(Evaluate(Huber(1.0f), 1.5f, 1.0f).gradient, 0.5f);
  EXPECT_FLOAT_EQ(Evaluate(Huber(1.0f), 4.0f, 1.0f).loss, 2.5f);  // 1 * (3 - 0.5)
  EXPECT_FLOAT_EQ(Evaluate(Huber(1.0f), 4.0f, 1.0f).gradient, 1.0f);
  EXPECT_FLOAT_EQ(Evaluate(Huber(1.0f), -2.0f, 1.0f).loss, 2.5f);
  EXPECT_FLOAT_EQ(Evaluate(Huber(1.0f), -2.0f, 1.0f).gradient, -1.0f);
  EXPECT_FLOAT_EQ(Evaluate(Huber(2.0f), 4.0f, 1.0f).loss, 4.0f);  // 2 * (3 - 1)
  EXPECT_FLOAT_EQ(Evaluate(Huber(2.0f), 4.0f, 1.0f).gradient, 2.0f);
}

TEST(Losses, TheChosenSubgradientAtEachKinkIsZero) {
  EXPECT_EQ(Evaluate(Loss(LossKind::kAbsolute), 1.0f, 1.0f).gradient, 0.0f);
  EXPECT_EQ(Evaluate(Hinge(1.0f), 1.0f, 1.0f).gradient, 0.0f);
  EXPECT_EQ(Evaluate(Hinge(1.0f), -1.0f, 0.0f).gradient, 0.0f);
  EXPECT_EQ(Evaluate(Insensitive(LossKind::kEpsInsensitiveAbsolute, 0.5f), 1.5f, 1.0f).gradient,
            0.0f);
  EXPECT_EQ(Evaluate(Insensitive(LossKind::kEpsInsensitiveAbsolute, 0.5f), 0.5f, 1.0f).gradient,
            0.0f);
  EXPECT_EQ(Evaluate(Quantile(0.3f), 2.0f, 2.0f).gradient, 0.0f);
}

TEST(Losses, EveryLossIsZeroAtAPerfectPrediction) {
  for (LossKind kind :
       {LossKind::kAbsolute, LossKind::kEpsInsensitiveSquared, LossKind::kEpsInsensitiveAbsolute,
        LossKind::kQuantile, LossKind::kHuber, LossKind::kSquared}) {
    EXPECT_EQ(Evaluate(Loss(kind), 3.0f, 3.0f).loss, 0.0f) << static_cast<int>(kind);
  }
}

TEST(Losses, PredictionsAreTheScoreExceptForTheLogisticProbability) {
  for (LossKind kind :
       {LossKind::kHinge, LossKind::kSquared, LossKind::kAbsolute, LossKind::kEpsInsensitiveSquared,
        LossKind::kEpsInsensitiveAbsolute, LossKind::kQuantile, LossKind::kHuber}) {
    EXPECT_EQ(Evaluate(Loss(kind), -2.5f, 1.0f).prediction, -2.5f) << static_cast<int>(kind);
  }
  EXPECT_FLOAT_EQ(Evaluate(Loss(LossKind::kLogistic), 0.0f, 1.0f).prediction, 0.5f);
}

// The logistic loss, its gradient and its probability take one exponential
// between them; each is bit for bit the separate formula: 1 / (1 + e^-z) for
// z >= 0 (-0 included), e^z / (1 + e^z) below, and the loss
// max(z, 0) - z y + log1p(e^-|z|) (Log1pOfUnit's).
TEST(Losses, LogisticSharesOneExponentialWithTheSameValuesAsEachFormula) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> scores = {0.0f,
                               -0.0f,
                               1e-30f,
                               -1e-30f,
                               88.7f,
                               -88.7f,
                               104.0f,
                               -104.0f,
                               1e30f,
                               -1e30f,
                               std::numeric_limits<float>::max(),
                               inf,
                               -inf};
  for (int i = -4000; i <= 4000; ++i) scores.push_back(static_cast<float>(i) * 0.01337f);
  for (const float z : scores) {
    for (const float y : {0.0f, 1.0f}) {
      const float probability = z >= 0.0f ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z));
      const float loss = fmaxf(z, 0.0f) - z * y + Log1pOfUnit(expf(-fabsf(z)));
      const Evaluation e = Evaluate(Loss(LossKind::kLogistic), z, y);
      EXPECT_EQ(e.prediction, probability) << z;
      EXPECT_EQ(e.gradient, probability - y) << z;
      if (std::isnan(loss)) {
        EXPECT_TRUE(std::isnan(e.loss)) << z;  // an infinite score: inf - inf
      } else {
        EXPECT_EQ(e.loss, loss) << z << " " << y;
      }
      EXPECT_EQ(Sigmoid(z), probability) << z;
      EXPECT_EQ(LogisticGradient(z, y), probability - y) << z;
    }
  }
}

TEST(Losses, Log1pOfUnitIsWithinTwoUlpOfTheExactValueOverZeroToOne) {
  // Every 61st float of [0, 1] (subnormals included) and both ends, against
  // ln(1 + e) in double.
  const float one = 1.0f;
  uint32_t last = 0;
  std::memcpy(&last, &one, sizeof last);
  std::vector<uint32_t> every;
  for (uint32_t bits = 0; bits < last; bits += 61) every.push_back(bits);
  every.push_back(last);
  double worst = 0.0;
  for (const uint32_t b : every) {
    float e;
    std::memcpy(&e, &b, sizeof e);
    const double exact = std::log1p(static_cast<double>(e));
    const float got = Log1pOfUnit(e);
    if (exact == 0.0) {
      ASSERT_EQ(got, 0.0f);
      continue;
    }
    const float nearest = static_cast<float>(exact);
    const double ulp = std::nextafter(nearest, 2.0f) - nearest;
    worst = std::max(worst, std::fabs(got - exact) / ulp);
    ASSERT_LE(std::fabs(got - exact), 2.0 * ulp) << e;
  }
  EXPECT_GT(worst, 0.0);  // it is an approximation: some value is not the nearest float
  EXPECT_EQ(Log1pOfUnit(1.0f), static_cast<float>(std::log(2.0)));
}

TEST(Losses, LogisticModelLossesGiveWhatExampleLossGivesEachModel) {
  const float weights[2] = {0.5f, 3.0f};
  for (const float* class_weights : {static_cast<const float*>(nullptr), weights}) {
    LossFunction loss(LossKind::kLogistic);
    loss.class_weights = class_weights;
    std::vector<float> scores;
    for (int i = -60; i <= 60; ++i) scores.push_back(static_cast<float>(i) * 0.731f);
    scores.push_back(std::numeric_limits<float>::max());
    scores.push_back(-0.0f);
    const int models = static_cast<int>(scores.size());
    for (const float y : {0.0f, 1.0f}) {
      std::vector<float> gradients(models), predictions(models), losses(models);
      LogisticModelLosses(loss, scores.data(), models, y, gradients.data(), predictions.data(),
                          losses.data());
      std::vector<float> no_prediction_gradients(models), no_prediction_losses(models);
      LogisticModelLosses(loss, scores.data(), models, y, no_prediction_gradients.data(), nullptr,
                          no_prediction_losses.data());
      for (int m = 0; m < models; ++m) {
        float gradient = 0.0f, prediction = 0.0f;
        const float value = ExampleLoss(loss, &scores[m], 1, y, &gradient, &prediction);
        EXPECT_EQ(losses[m], value) << scores[m];
        EXPECT_EQ(gradients[m], gradient) << scores[m];
        EXPECT_EQ(predictions[m], prediction) << scores[m];
        EXPECT_EQ(no_prediction_losses[m], value) << scores[m];
        EXPECT_EQ(no_prediction_gradients[m], gradient) << scores[m];
      }
    }
  }
}

TEST(Losses, EveryLossAndGradientIsFiniteForAnyFiniteScore) {
  const float big = std::numeric_limits<float>::max();
  const std::vector<LossFunction> losses = {Loss(LossKind::kLogistic),
                                            Loss(LossKind::kSquared),
                                            Loss(LossKind::kAbsolute),
                                            Hinge(1.0f),
                                            Quantile(0.2f),
                                            Huber(1.0f),
                                            Insensitive(LossKind::kEpsInsensitiveSquared, 0.01f),
                                            Insensitive(LossKind::kEpsInsensitiveAbsolute, 0.01f)};
  for (const LossFunction& loss : losses) {
    for (float score : {-big, -1e30f, -1e20f, 0.0f, 1e20f, 1e30f, big}) {
      // Classification losses take 0/1 labels; regression losses any real.
      const bool binary = loss.kind == LossKind::kLogistic || loss.kind == LossKind::kHinge;
      for (float label : {0.0f, 1.0f, -1e30f, 1e30f}) {
        if (binary && label != 0.0f && label != 1.0f) continue;
        const Evaluation e = Evaluate(loss, score, label);
        EXPECT_TRUE(std::isfinite(e.loss) && std::isfinite(e.gradient))
            << "loss " << static_cast<int>(loss.kind) << " score " << score << " label " << label
            << ": " << e.loss << ", " << e.gradient;
      }
    }
  }
}

// --- Gradients against central finite differences ---

struct Case {
  const char* name;
  LossFunction loss;
  float label;
  std::vector<float> kinks;  // where the gradient jumps: no difference straddles one
};

double CentralDifference(const LossFunction& loss, float score, float label, float step) {
  const float plus = score + step, minus = score - step;
  return (static_cast<double>(Evaluate(loss, plus, label).loss) -
          Evaluate(loss, minus, label).loss) /
         (static_cast<double>(plus) - static_cast<double>(minus));
}

// Scores on a grid from -50 to 50, large ones, and points at several
// distances either side of every kink.
std::vector<float> ScoresAround(const std::vector<float>& kinks) {
  std::vector<float> scores = {-1e4f, -1e3f, 1e3f, 1e4f};
  for (int i = -200; i <= 200; ++i) scores.push_back(0.25f * i + 0.01f);
  for (float kink : kinks) {
    for (float offset : {0.003f, 0.01f, 0.05f, 0.2f, 1.0f}) {
      scores.push_back(kink - offset);
      scores.push_back(kink + offset);
    }
  }
  return scores;
}

TEST(Losses, EveryGradientMatchesCentralDifferencesAwayFromItsKinks) {
  const std::vector<Case> cases = {
      {"absolute", Loss(LossKind::kAbsolute), 1.5f, {1.5f}},
      {"hinge, label 1", Hinge(1.0f), 1.0f, {1.0f}},
      {"hinge, label 0", Hinge(1.0f), 0.0f, {-1.0f}},
      {"hinge, margin 2.5", Hinge(2.5f), 1.0f, {2.5f}},
      {"eps squared", Insensitive(LossKind::kEpsInsensitiveSquared, 0.5f), 2.0f, {1.5f, 2.5f}},
      {"eps absolute", Insensitive(LossKind::kEpsInsensitiveAbsolute, 0.5f), 2.0f, {1.5f, 2.5f}},
      {"quantile 0.5", Quantile(0.5f), -3.0f, {-3.0f}},
      {"quantile 0.9", Quantile(0.9f), 4.0f, {4.0f}},
      {"quantile 0.05", Quantile(0.05f), 0.0f, {0.0f}},
      {"huber 1", Huber(1.0f), 2.0f, {1.0f, 3.0f}},
      {"huber 3", Huber(3.0f), -1.0f, {-4.0f, 2.0f}},
  };
  for (const Case& c : cases) {
    for (float score : ScoresAround(c.kinks)) {
      const float step = 1e-3f * std::max(1.0f, std::abs(score));
      const bool straddles = std::any_of(c.kinks.begin(), c.kinks.end(), [&](float kink) {
        return std::abs(score - kink) <= 2 * step;
      });
      if (straddles) continue;
      const double numeric = CentralDifference(c.loss, score, c.label, step);
      const float analytic = Evaluate(c.loss, score, c.label).gradient;
      EXPECT_NEAR(analytic, numeric, 1e-2 * std::max(std::abs(numeric), 0.1))
          << c.name << " at score " << score;
    }
  }
}

// --- Which loss the settings select ---

TEST(LossSelection, AutoIsTheConventionalLossOfEachPredictorType) {
  EXPECT_EQ(LossKindOf(PredictorType::kBinaryClassifier, "auto"), LossKind::kLogistic);
  EXPECT_EQ(LossKindOf(PredictorType::kRegressor, "auto"), LossKind::kSquared);
  EXPECT_EQ(LossKindOf(PredictorType::kMulticlassClassifier, "auto"), LossKind::kSoftmax);
}

TEST(LossSelection, EveryLossIsFoundBySageMakersName) {
  const std::vector<std::pair<PredictorType, std::string>> names = {
      {PredictorType::kBinaryClassifier, "logistic"},
      {PredictorType::kBinaryClassifier, "hinge_loss"},
      {PredictorType::kRegressor, "squared_loss"},
      {PredictorType::kRegressor, "absolute_loss"},
      {PredictorType::kRegressor, "eps_insensitive_squared_loss"},
      {PredictorType::kRegressor, "eps_insensitive_absolute_loss"},
      {PredictorType::kRegressor, "quantile_loss"},
      {PredictorType::kRegressor, "huber_loss"},
      {PredictorType::kMulticlassClassifier, "softmax_loss"}};
  for (const auto& [type, name] : names) EXPECT_EQ(LossName(LossKindOf(type, name)), name);
}

std::string ErrorOf(PredictorType type, const std::string& loss) {
  try {
    LossKindOf(type, loss);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LossSelection, ALossThatDoesNotFitThePredictorTypeIsRefusedNamingBoth) {
  const std::string message = ErrorOf(PredictorType::kRegressor, "hinge_loss");
  EXPECT_NE(message.find("--loss hinge_loss"), std::string::npos) << message;
  EXPECT_NE(message.find("--predictor_type regressor"), std::string::npos) << message;
  EXPECT_NE(message.find("huber_loss"), std::string::npos) << message;  // what would fit
  EXPECT_NE(ErrorOf(PredictorType::kBinaryClassifier, "squared_loss"), "");
  EXPECT_NE(ErrorOf(PredictorType::kBinaryClassifier, "softmax_loss"), "");
  EXPECT_NE(ErrorOf(PredictorType::kMulticlassClassifier, "logistic"), "");
  EXPECT_NE(ErrorOf(PredictorType::kMulticlassClassifier, "hinge_loss"), "");
  EXPECT_NE(ErrorOf(PredictorType::kRegressor, "logistic"), "");
}

TEST(LossSelection, AnUnknownLossIsRefusedNamingIt) {
  const std::string message = ErrorOf(PredictorType::kRegressor, "l1");
  EXPECT_NE(message.find("--loss 'l1'"), std::string::npos) << message;
}

std::string ValidationError(const Hyperparameters& h) {
  return testing::ErrorOrEmpty([&] { h.Validate(); });
}

TEST(LossSelection, LossParametersOutsideSageMakersRangesAreRefusedNamingTheFlag) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  EXPECT_EQ(ValidationError(h), "");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float quantile : {0.0f, 1.0f, -0.5f, nan}) {
    Hyperparameters bad = h;
    bad.quantile = quantile;
    EXPECT_NE(ValidationError(bad).find("--quantile"), std::string::npos) << quantile;
  }
  for (float value : {0.0f, -1.0f, nan, std::numeric_limits<float>::infinity()}) {
    Hyperparameters bad = h;
    bad.margin = value;
    EXPECT_NE(ValidationError(bad).find("--margin"), std::string::npos) << value;
    bad = h;
    bad.loss_insensitivity = value;
    EXPECT_NE(ValidationError(bad).find("--loss_insensitivity"), std::string::npos) << value;
    bad = h;
    bad.huber_delta = value;
    EXPECT_NE(ValidationError(bad).find("--huber_delta"), std::string::npos) << value;
  }
  Hyperparameters mismatch = h;
  mismatch.loss = "logistic";
  EXPECT_NE(ValidationError(mismatch).find("does not fit"), std::string::npos);
}

TEST(LossSelection, TheLossFunctionCarriesTheSettingsParameters) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  h.loss = "huber_loss";
  h.huber_delta = 2.5f;
  h.quantile = 0.7f;
  const LossFunction loss = h.loss_function();
  EXPECT_EQ(loss.kind, LossKind::kHuber);
  EXPECT_EQ(loss.huber_delta, 2.5f);
  EXPECT_EQ(loss.quantile, 0.7f);
}

// --- The metrics a loss implies ---

TEST(LossMetrics, AHingeClassifiersMarginsAreLabelledBySignAndItsObjectiveIsTheHingeLoss) {
  Hyperparameters h;
  h.loss = "hinge_loss";
  // Margins -0.2 and 0.3: a 0.5 threshold would call both negative.
  const MetricSet metrics = PredictionMetrics(h, {-0.2f, 0.3f}, {0.0f, 1.0f}, 0.75);
  EXPECT_DOUBLE_EQ(metrics.at("binary_classification_accuracy"), 1.0);
  EXPECT_DOUBLE_EQ(metrics.at("objective_loss"), 0.75);
  EXPECT_DOUBLE_EQ(metrics.at("roc_auc_score"), 1.0);
}

TEST(LossMetrics, ARegressorsObjectiveIsItsTrainingLossAndTheErrorsStayReported) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  h.loss = "absolute_loss";
  const MetricSet metrics = PredictionMetrics(h, {1.0f, 4.0f}, {2.0f, 2.0f}, 1.5);
  EXPECT_DOUBLE_EQ(metrics.at("objective_loss"), 1.5);
  EXPECT_DOUBLE_EQ(metrics.at("mse"), 2.5);  // (1 + 4) / 2
  EXPECT_DOUBLE_EQ(metrics.at("absolute_loss"), 1.5);
}

TEST(LossMetrics, TheDefaultLossesKeepTheirConventionalObjective) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;  // squared_loss: objective_loss is the MSE
  const MetricSet metrics = PredictionMetrics(h, {1.0f, 4.0f}, {2.0f, 2.0f}, 1.25);
  EXPECT_DOUBLE_EQ(metrics.at("objective_loss"), 2.5);
}

}  // namespace
}  // namespace keel
