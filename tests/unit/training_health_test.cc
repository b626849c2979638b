// Training health: the rules on constructed sequences of minibatches (each
// rule fires, and does not fire where it should not), and the figures a job
// records per epoch.
#include "worker/training_health.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/json_reader.h"
#include "test_util.h"
#include "worker/health_rules.h"

namespace keel {
namespace {

using testing::Contains;

// A minibatch whose weight gradient has norm `norm` (one value) and no bias.
MinibatchGradients WeightNorm(double norm) {
  MinibatchGradients gradients;
  const float value = static_cast<float>(norm);
  gradients[0] = MeasureGradients(&value, 1);
  return gradients;
}

// The message of the Error `check` throws; "" if it throws none.
template <typename Check>
std::string ErrorOf(Check check) {
  try {
    check();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HealthRules, ANonFiniteLossStopsNamingTheEpochTableAndFigure) {
  HealthRules rules;
  const std::string error =
      ErrorOf([&] { rules.CheckMinibatch(3, {std::nan("")}, WeightNorm(0.5)); });
  EXPECT_TRUE(Contains(error,
                       "training health: epoch 3, table weights: train:objective_loss is "
                       "nan (non-finite loss"))
      << error;
  EXPECT_TRUE(Contains(error, "--health_rules=off")) << error;
}

TEST(HealthRules, ALossHeldAtTheLargestFloatCountsAsNonFinite) {
  HealthRules rules;
  const double held = std::numeric_limits<float>::max();
  EXPECT_TRUE(Contains(ErrorOf([&] { rules.CheckMinibatch(1, {held}, WeightNorm(0.5)); }),
                       "train:objective_loss is 3.40282e+38"));
}

TEST(HealthRules, AnyModelsNonFiniteLossStopsAndNamesTheModel) {
  HealthRules rules;
  const double infinity = std::numeric_limits<double>::infinity();
  const std::string error = ErrorOf([&] {
    rules.CheckMinibatch(2, {0.6, 0.7, infinity, 0.5}, WeightNorm(0.5));
  });
  EXPECT_TRUE(Contains(error, "epoch 2, table weights: train:objective_loss of model 2 is inf"))
      << error;
}

TEST(HealthRules, OfSeveralModelsOneWhoseLossIsNotFiniteIsLeftOutAndTheOthersGoOn) {
  HealthRules rules;
  const double infinity = std::numeric_limits<double>::infinity();
  const std::vector<MinibatchGradients> gradients(3, WeightNorm(0.5));
  const auto fired = rules.CheckModels(2, {0.6, infinity, 0.5}, gradients, {false, false, false});
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].model, 1);
  EXPECT_TRUE(
      Contains(fired[0].why, "epoch 2, table weights: train:objective_loss of model 1 is inf"))
      << fired[0].why;
  // Left out, it is judged no more.
  EXPECT_TRUE(rules.CheckModels(2, {0.6, infinity, 0.5}, gradients, {false, true, false}).empty());
}

TEST(HealthRules, ARuleFiringForTheLastModelStillTrainedStopsTheJob) {
  HealthRules rules;
  const double nan = std::nan("");
  const std::string error = ErrorOf([&] {
    rules.CheckModels(4, {nan, 0.5, nan}, std::vector<MinibatchGradients>(3, WeightNorm(0.5)),
                      {false, true, false});
  });
  // Model 0 is left out; model 2, the last one then, stops the job.
  EXPECT_TRUE(Contains(error, "train:objective_loss of model 2 is nan")) << error;
  EXPECT_TRUE(Contains(error, "--health_rules=off")) << error;
}

TEST(HealthRules, OfSeveralModelsEachGradientIsJudgedAgainstItsOwnMedian) {
  HealthRules rules;
  // Model 0's gradients are a thousand times model 1's, and steady.
  for (int minibatch = 0; minibatch < 30; ++minibatch) {
    ASSERT_TRUE(rules.CheckModels(1, {0.5, 0.5}, {WeightNorm(2000), WeightNorm(2)}, {}).empty());
  }
  // Model 1's jumps to model 0's size: 1000x its own median, an explosion.
  const auto fired = rules.CheckModels(1, {0.5, 0.5}, {WeightNorm(2000), WeightNorm(2001)}, {});
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].model, 1);
  EXPECT_TRUE(Contains(fired[0].why, "gradient_norm of model 1 2001 is above 1000 x the median 2"))
      << fired[0].why;
}

TEST(HealthRules, OfSeveralModelsNothingIsLeftOutWithTheRulesOff) {
  HealthRuleOptions off;
  off.on = false;
  HealthRules rules(off);
  EXPECT_TRUE(
      rules.CheckModels(1, {std::nan(""), 0.5}, std::vector<MinibatchGradients>(2), {}).empty());
}

TEST(HealthRules, LargeFiniteLossesDoNotFire) {
  HealthRules rules;
  EXPECT_NO_THROW(rules.CheckMinibatch(1, {1e30, 0.0, 1e-30}, WeightNorm(0.5)));
}

TEST(HealthRules, ANonFiniteGradientValueIsAnExplodingTensor) {
  HealthRules rules;
  MinibatchGradients gradients = WeightNorm(0.5);
  const float bias[4] = {0.1f, std::numeric_limits<float>::infinity(), 0.2f, std::nanf("")};
  gradients[1] = MeasureGradients(bias, 4);
  const std::string error = ErrorOf([&] { rules.CheckMinibatch(4, {0.5}, gradients); });
  EXPECT_TRUE(Contains(error,
                       "training health: epoch 4, table bias: nonfinite_share 0.5 (2 of 4 "
                       "gradient values"))
      << error;
  EXPECT_TRUE(Contains(error, "exploding tensor")) << error;
}

TEST(HealthRules, AGradientNormGrowingGeometricallyFiresWithinTensOfMinibatches) {
  HealthRules rules;
  for (int i = 0; i < 50; ++i) rules.CheckMinibatch(1, {0.5}, WeightNorm(2.0 + 0.01 * i));
  // Diverging: the norm doubles every minibatch from here.
  double norm = 2.5;
  int fired_after = -1;
  std::string error;
  for (int i = 1; i <= 40 && fired_after < 0; ++i) {
    norm *= 2;
    error = ErrorOf([&] { rules.CheckMinibatch(2, {0.5}, WeightNorm(norm)); });
    if (!error.empty()) fired_after = i;
  }
  // 2.5 x 2^i > 1000 x the median (about 2.3) from i = 10 on.
  EXPECT_EQ(fired_after, 10) << error;
  EXPECT_TRUE(Contains(error,
                       "training health: epoch 2, table weights: gradient_norm 2560 is "
                       "above 1000 x the median"))
      << error;
  EXPECT_TRUE(Contains(error, "exploding gradient")) << error;
}

TEST(HealthRules, NoisyAndShrinkingGradientNormsDoNotFire) {
  // A healthy job: norms shrink as training converges, with minibatch noise
  // of a factor of 10 either way and an occasional 30x outlier.
  HealthRules rules;
  std::mt19937 random(7);
  std::uniform_real_distribution<double> decades(-1, 1);
  for (int i = 0; i < 20000; ++i) {
    const double trend = 10.0 / std::sqrt(1.0 + i);
    const double outlier = i % 997 == 0 ? 30 : 1;
    ASSERT_NO_THROW(rules.CheckMinibatch(
        1 + i / 1000, {0.5}, WeightNorm(trend * std::pow(10, decades(random)) * outlier)))
        << "minibatch " << i;
  }
}

TEST(HealthRules, NormsAtOrBelowTheFloorNeverExplode) {
  // A fitted bias: its gradient near zero, then noise far above that median
  // but still small.
  HealthRules rules;
  for (int i = 0; i < 100; ++i) rules.CheckMinibatch(1, {0.5}, WeightNorm(1e-7));
  EXPECT_NO_THROW(rules.CheckMinibatch(1, {0.5}, WeightNorm(0.9)));
  EXPECT_FALSE(ErrorOf([&] { rules.CheckMinibatch(1, {0.5}, WeightNorm(1.5)); }).empty());
}

TEST(HealthRules, TheFirstMinibatchesAreNotJudged) {
  // Too few norms for a median: a jump among the first 20 minibatches passes.
  HealthRules rules;
  for (int i = 0; i < 19; ++i) rules.CheckMinibatch(1, {0.5}, WeightNorm(i == 10 ? 1e6 : 0.01));
  EXPECT_NO_THROW(rules.CheckMinibatch(1, {0.5}, WeightNorm(1e6)));
}

TEST(HealthRules, TheLargestRatioToTheMedianIsReportedOnceAndReset) {
  HealthRules rules;
  for (int i = 0; i < 30; ++i) rules.CheckMinibatch(1, {0.5}, WeightNorm(2));
  rules.CheckMinibatch(1, {0.5}, WeightNorm(50));
  rules.CheckMinibatch(1, {0.5}, WeightNorm(10));
  const std::array<double, kHealthTables> ratios = rules.TakeLargestRatios();
  EXPECT_DOUBLE_EQ(ratios[0], 25.0);
  EXPECT_EQ(ratios[1], 0.0);  // no bias gradient
  EXPECT_EQ(rules.TakeLargestRatios()[0], 0.0);
}

TEST(HealthRules, OffNothingFires) {
  HealthRules rules(HealthRuleOptions{false});
  MinibatchGradients gradients = WeightNorm(0.5);
  const float nan = std::nanf("");
  gradients[1] = MeasureGradients(&nan, 1);
  EXPECT_NO_THROW(rules.CheckMinibatch(1, {std::nan("")}, gradients));
  for (int i = 0; i < 100; ++i) rules.CheckMinibatch(1, {0.5}, WeightNorm(1));
  EXPECT_NO_THROW(rules.CheckMinibatch(1, {0.5}, WeightNorm(1e30)));
}

TEST(NormWindow, ItsMedianIsTheMiddleOfItsLastNormsSorted) {
  // Against the median taken the plain way: the last `window` norms copied
  // and their middle (index size / 2) selected. Norms with ties, in a window
  // of 256 and one of 5.
  std::mt19937 random(7);
  std::uniform_int_distribution<int> draw(0, 40);
  for (const size_t window : {size_t{256}, size_t{5}}) {
    NormWindow norms;
    std::vector<double> all;
    for (int i = 0; i < 1000; ++i) {
      const double norm = draw(random) * 0.25;
      norms.Add(norm, window);
      all.push_back(norm);
      std::vector<double> last(
          all.end() - static_cast<std::ptrdiff_t>(std::min(all.size(), window)), all.end());
      std::nth_element(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(last.size() / 2),
                       last.end());
      ASSERT_EQ(norms.size(), last.size()) << "norm " << i;
      ASSERT_EQ(norms.Median(), last[last.size() / 2]) << "norm " << i << ", window " << window;
    }
  }
  NormWindow norms;
  norms.Add(1.0, 4);
  norms.Add(std::nan(""), 4);  // not remembered
  EXPECT_EQ(norms.size(), 1u);
}

TEST(TrainingHealth, MeasureGradientsSumsFiniteSquaresAndCountsTheRest) {
  const float values[5] = {3, std::numeric_limits<float>::infinity(), 4, std::nanf(""), 0};
  const GradientFigures figures = MeasureGradients(values, 5);
  EXPECT_EQ(figures.values, 5u);
  EXPECT_EQ(figures.non_finite, 2u);
  EXPECT_DOUBLE_EQ(figures.norm(), 5.0);
}

// Model k's figures from MeasureModelColumns against MeasureGradients of its
// own columns' values, row after row.
void ExpectEachModelMeasuredAlone(const std::vector<float>& values, size_t width, size_t models) {
  const std::vector<GradientFigures> figures = MeasureModelColumns(values, width, models);
  ASSERT_EQ(figures.size(), models);
  const size_t columns = width / models, rows = values.size() / width;
  for (size_t k = 0; k < models; ++k) {
    std::vector<float> own;
    for (size_t row = 0; row < rows; ++row) {
      for (size_t c = 0; c < columns; ++c) own.push_back(values[row * width + columns * k + c]);
    }
    const GradientFigures expected = MeasureGradients(own.data(), own.size());
    EXPECT_EQ(figures[k].values, expected.values) << "model " << k << " of width " << width;
    EXPECT_EQ(figures[k].non_finite, expected.non_finite) << "model " << k << " of width " << width;
    EXPECT_NEAR(figures[k].square_sum, expected.square_sum, 1e-9 * expected.square_sum)
        << "model " << k << " of width " << width;
  }
}

TEST(TrainingHealth, MeasureModelColumnsGivesEachModelWhatMeasureGradientsGivesItsValues) {
  // 3 models of 2 columns (a factorization machine's [w, v]), 50 rows; model
  // 1 holds an infinity and a NaN, model 2 a NaN.
  const size_t models = 3, width = 6, rows = 50;
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> values(rows * width);
  for (float& value : values) value = normal(random);
  values[4 * width + 2] = std::numeric_limits<float>::infinity();
  values[9 * width + 3] = std::nanf("");
  values[30 * width + 5] = std::nanf("");
  ExpectEachModelMeasuredAlone(values, width, models);
  const std::vector<GradientFigures> figures = MeasureModelColumns(values, width, models);
  EXPECT_EQ(figures[0].non_finite, 0u);
  EXPECT_EQ(figures[1].non_finite, 2u);
  EXPECT_EQ(figures[2].non_finite, 1u);
  // Widths summed in blocks of 8 columns, with and without columns after
  // the last block: 8 models of one column (the linear learner's), 10 of 2.
  for (const auto& [wide_models, wide_width] : {std::pair<size_t, size_t>{8, 8}, {10, 20}}) {
    std::vector<float> wide(rows * wide_width);
    for (float& value : wide) value = normal(random);
    wide[7 * wide_width + 1] = std::numeric_limits<float>::infinity();  // in the first block
    wide[12 * wide_width + wide_width - 1] = std::nanf("");             // the last column
    ExpectEachModelMeasuredAlone(wide, wide_width, wide_models);
  }
  // One model of width 1 (the linear learner's), and nothing to measure.
  EXPECT_DOUBLE_EQ(MeasureModelColumns({3, 4}, 1, 1)[0].norm(), 5.0);
  EXPECT_EQ(MeasureModelColumns({}, 8, 8)[7].values, 0u);
  // More models than columns measures nothing; columns past the models' are
  // left out (width 5, 2 models of 2 columns).
  EXPECT_EQ(MeasureModelColumns({1, 2, 3}, 3, 4)[3].values, 0u);
  const std::vector<GradientFigures> two = MeasureModelColumns({1, 2, 3, 4, 100}, 5, 2);
  EXPECT_DOUBLE_EQ(two[0].square_sum, 5.0);
  EXPECT_DOUBLE_EQ(two[1].square_sum, 25.0);
  EXPECT_EQ(two[1].values, 2u);
}

TEST(TrainingHealth, TheReportMeansMinibatchNormsAndCountsTheRowsCreatedSinceBefore) {
  EpochGradients epoch;
  const float first[2] = {3, 4};   // norm 5
  const float second[2] = {0, 1};  // norm 1
  epoch[0].Add(MeasureGradients(first, 2));
  epoch[0].Add(MeasureGradients(second, 2));
  epoch[1].Add(MeasureGradients(second, 1));
  const HealthReport report = MakeHealthReport(epoch, {TableRows{120, 2.5}, TableRows{1, 0.25}},
                                               {TableRows{100, 1.0}, TableRows{1, 0.5}}, {4, 1});
  ASSERT_EQ(report.size(), 2u);
  const TableHealth& weights = report.at("weights");
  EXPECT_DOUBLE_EQ(weights.gradient_norm, 3.0);
  EXPECT_DOUBLE_EQ(weights.weight_norm, 2.5);
  EXPECT_EQ(weights.rows_created, 20u);
  EXPECT_DOUBLE_EQ(weights.nonfinite_share, 0.0);
  EXPECT_EQ(report.at("bias").rows_created, 0u);
  EXPECT_DOUBLE_EQ(report.at("bias").gradient_norm, 0.0);  // {0}: norm 0
}

TEST(TrainingHealth, ATableTheJobLacksIsLeftOut) {
  const HealthReport report = MakeHealthReport({}, {}, {}, {9, 0});
  EXPECT_EQ(report.size(), 1u);
  EXPECT_TRUE(report.count("weights"));
}

TEST(TrainingHealth, TheJsonIsOneObjectPerTableWithTheFourFigures) {
  HealthReport report;
  report["weights"] = TableHealth{12.5, 0.75, 0.0, 1500};
  report["bias"] = TableHealth{0.5, std::nan(""), 0.0, 1};
  const JsonValue json = ParseJson(HealthJson(report), "health");
  const JsonValue* weights = json.Find("weights");
  ASSERT_NE(weights, nullptr);
  EXPECT_EQ(weights->Find("weight_norm")->AsNumber(), 12.5);
  EXPECT_EQ(weights->Find("gradient_norm")->AsNumber(), 0.75);
  EXPECT_EQ(weights->Find("nonfinite_share")->AsNumber(), 0.0);
  EXPECT_EQ(weights->Find("rows_created")->AsUint64(), 1500u);
  // Not finite: written as 0, as history.jsonl writes metrics.
  EXPECT_EQ(json.Find("bias")->Find("gradient_norm")->AsNumber(), 0.0);
  const MetricSet metrics = HealthMetrics(report);
  EXPECT_EQ(metrics.at("health:weights:rows_created"), 1500);
  EXPECT_EQ(metrics.size(), 8u);
}

TEST(TrainingHealth, TheLatestReportIsWhatWasSetLast) {
  LatestHealth latest;
  EXPECT_EQ(latest.Get().epoch, 0);
  latest.Set(2, {{"weights", TableHealth{1, 2, 0, 3}}});
  const LatestHealth::Snapshot snapshot = latest.Get();
  EXPECT_EQ(snapshot.epoch, 2);
  EXPECT_EQ(snapshot.report.at("weights").rows_created, 3u);
}

}  // namespace
}  // namespace keel
