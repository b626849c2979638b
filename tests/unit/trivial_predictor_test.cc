// The trivial predictor (a constant from the training labels) and the guard
// that compares a model's figures with its figures.
#include "worker/trivial_predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace keel {
namespace {

Batch Labels(const std::vector<float>& labels) {
  Batch batch;
  for (const float label : labels) batch.AddRow(label, nullptr, nullptr, 0);
  return batch;
}

TEST(TrivialPredictor, ABinaryClassifiersConstantIsTheBaseRate) {
  Hyperparameters h;
  const TrivialPredictor trivial = FitTrivialPredictor(Labels({1, 0, 0, 0}), h);
  ASSERT_TRUE(trivial.known);
  EXPECT_DOUBLE_EQ(trivial.class_shares[1], 1.5 / 5.0);  // half a row added to each class
  const MetricSet figures = TrivialMetrics(trivial, h, {0, 0, 1, 0});
  EXPECT_DOUBLE_EQ(figures.at("binary_classification_accuracy"), 0.75);  // always 0
  const double p = 0.3;
  EXPECT_NEAR(figures.at("objective_loss"), -(3 * std::log(1 - p) + std::log(p)) / 4, 1e-6);
  // A loss other than the logistic: its objective_loss is not a cross-entropy.
  h.loss = "hinge_loss";
  EXPECT_EQ(TrivialMetrics(trivial, h, {0, 1}).count("objective_loss"), 0u);
}

TEST(TrivialPredictor, AMulticlassConstantPredictsTheMajorityClass) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  const TrivialPredictor trivial = FitTrivialPredictor(Labels({2, 2, 2, 0, 1}), h);
  const MetricSet figures = TrivialMetrics(trivial, h, {2, 0, 2, 1});
  EXPECT_DOUBLE_EQ(figures.at("multiclass_accuracy"), 0.5);
  EXPECT_GT(figures.at("objective_loss"), 0.0);
}

TEST(TrivialPredictor, ARegressorsConstantIsTheLabelMean) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  const TrivialPredictor trivial = FitTrivialPredictor(Labels({10, 20, 30}), h);
  EXPECT_DOUBLE_EQ(trivial.label_mean, 20.0);
  const MetricSet figures = TrivialMetrics(trivial, h, {10, 30});
  EXPECT_DOUBLE_EQ(figures.at("mse"), 100.0);
  EXPECT_DOUBLE_EQ(figures.at("objective_loss"), 100.0);
}

TEST(TrivialPredictor, WithoutASampleNothingIsCompared) {
  const Hyperparameters h;
  const TrivialPredictor trivial = FitTrivialPredictor(Batch(), h);
  EXPECT_FALSE(trivial.known);
  EXPECT_TRUE(TrivialMetrics(trivial, h, {0, 1}).empty());
}

TEST(WorseThanTrivial, NamesEachFigureWorseAccuraciesWhenLowerLossesWhenHigher) {
  const MetricSet trivial = {{"binary_classification_accuracy", 0.7}, {"objective_loss", 0.6}};
  EXPECT_TRUE(WorseThanTrivial({{"binary_classification_accuracy", 0.8},
                                {"objective_loss", 0.4},
                                {"roc_auc_score", 0.9}},
                               trivial)
                  .empty());
  const std::vector<std::string> worse =
      WorseThanTrivial({{"binary_classification_accuracy", 0.6}, {"objective_loss", 0.9}}, trivial);
  ASSERT_EQ(worse.size(), 2u);
  EXPECT_EQ(worse[0], "binary_classification_accuracy 0.6000 (a constant: 0.7000)");
  EXPECT_EQ(worse[1], "objective_loss 0.9000 (a constant: 0.6000)");
  // Equal is not worse, and a figure the model lacks is not compared.
  EXPECT_TRUE(WorseThanTrivial({{"binary_classification_accuracy", 0.7}}, trivial).empty());
}

}  // namespace
}  // namespace keel
