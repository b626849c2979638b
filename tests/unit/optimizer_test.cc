#include "kv/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kv/parameter_table.h"

namespace keel {
namespace {

// Hand-computed steps go through float arithmetic in the optimizer.
constexpr double kTolerance = 1e-6;

OptimizerOptions Options(const std::string& name, float learning_rate) {
  OptimizerOptions options;
  options.name = name;
  options.learning_rate = learning_rate;
  return options;
}

// A zeroed row of `width` weights with room for the optimizer's state.
std::vector<float> NewRow(const Optimizer& optimizer, int width) {
  return std::vector<float>(width + optimizer.StateWidth(width), 0.0f);
}

TEST(SgdOptimizer, TakesOneStepAgainstTheGradient) {
  OptimizerOptions options;
  options.learning_rate = 0.5f;
  auto sgd = MakeOptimizer(options);
  EXPECT_EQ(sgd->StateWidth(3), 0);
  float row[3] = {1.0f, -2.0f, 0.0f};
  const float gradient[3] = {2.0f, 1.0f, -4.0f};
  sgd->Update(row, gradient, 3);
  EXPECT_FLOAT_EQ(row[0], 0.0f);   // 1 - 0.5 * 2
  EXPECT_FLOAT_EQ(row[1], -2.5f);  // -2 - 0.5 * 1
  EXPECT_FLOAT_EQ(row[2], 2.0f);   // 0 + 0.5 * 4
}

TEST(SgdOptimizer, AppliesWeightDecay) {
  OptimizerOptions options;
  options.learning_rate = 0.1f;
  options.l2 = 0.5f;
  auto sgd = MakeOptimizer(options);
  float row[1] = {2.0f};
  const float gradient[1] = {1.0f};
  sgd->Update(row, gradient, 1);
  EXPECT_FLOAT_EQ(row[0], 2.0f - 0.1f * (1.0f + 0.5f * 2.0f));
}

TEST(SgdOptimizer, TwoStepsMatchTheHandComputation) {
  auto sgd = MakeOptimizer(Options("sgd", 0.5f));
  float row[2] = {1.0f, -1.0f};
  const float first[2] = {2.0f, 0.5f};
  const float second[2] = {-1.0f, 0.25f};
  sgd->Update(row, first, 2);
  sgd->Update(row, second, 2);
  EXPECT_NEAR(row[0], 1.0 - 0.5 * 2.0 - 0.5 * -1.0, kTolerance);   // 0.5
  EXPECT_NEAR(row[1], -1.0 - 0.5 * 0.5 - 0.5 * 0.25, kTolerance);  // -1.375
}

TEST(SgdOptimizer, TwoStepsWithL1AndL2MatchTheHandComputation) {
  OptimizerOptions options = Options("sgd", 0.1f);
  options.l1 = 0.2f;
  options.l2 = 0.5f;
  auto sgd = MakeOptimizer(options);
  float row[3] = {1.0f, -0.5f, 0.01f};
  const float first[3] = {2.0f, 0.1f, 0.0f};
  const float second[3] = {-1.0f, 0.3f, 0.0f};
  sgd->Update(row, first, 3);
  // w - lr (g + l2 w), then shrunk towards zero by lr * l1 = 0.02.
  EXPECT_NEAR(row[0], 1.0 - 0.1 * (2.0 + 0.5 * 1.0) - 0.02, kTolerance);    // 0.73
  EXPECT_NEAR(row[1], -0.5 - 0.1 * (0.1 + 0.5 * -0.5) + 0.02, kTolerance);  // -0.465
  EXPECT_EQ(row[2], 0.0f);  // 0.0095 is within the threshold: exactly zero
  sgd->Update(row, second, 3);
  EXPECT_NEAR(row[0], 0.73 - 0.1 * (-1.0 + 0.5 * 0.73) - 0.02, kTolerance);     // 0.7735
  EXPECT_NEAR(row[1], -0.465 - 0.1 * (0.3 + 0.5 * -0.465) + 0.02, kTolerance);  // -0.45175
  EXPECT_EQ(row[2], 0.0f);
}

TEST(SgdOptimizer, UpdateRowsAppliesTheStepToEveryRowOfEveryWidth) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int width : {1, 5, 100}) {
    for (float decay : {0.0f, 0.3f}) {
      SCOPED_TRACE("width " + std::to_string(width) + ", l2 " + std::to_string(decay));
      OptimizerOptions options = Options("sgd", 0.1f);
      options.l2 = decay;
      auto sgd = MakeOptimizer(options);
      const size_t count = 300;
      std::vector<float> weights(count * width), gradients(count * width);
      for (float& w : weights) w = value(random);
      for (float& g : gradients) g = value(random);
      std::vector<float> expected = weights;
      for (size_t i = 0; i < expected.size(); ++i) {
        expected[i] -= 0.1f * (gradients[i] + decay * expected[i]);
      }
      std::vector<float*> rows(count);
      for (size_t i = 0; i < count; ++i) rows[i] = weights.data() + i * width;
      sgd->UpdateRows(rows.data(), gradients.data(), count, width);
      for (size_t i = 0; i < weights.size(); ++i) ASSERT_FLOAT_EQ(weights[i], expected[i]) << i;
    }
  }
}

TEST(SgdOptimizer, ColumnGroupsUseTheirOwnRateAndPenalties) {
  OptimizerOptions options = Options("sgd", 0.1f);
  options.groups.push_back({1, 3, 0.5f, 0.0f, 0.5f});
  auto sgd = MakeOptimizer(options);
  float row[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  const float gradient[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  sgd->Update(row, gradient, 4);
  EXPECT_NEAR(row[0], 1.0 - 0.1 * 1.0, kTolerance);
  EXPECT_NEAR(row[1], 1.0 - 0.5 * (1.0 + 0.5 * 1.0), kTolerance);
  EXPECT_NEAR(row[2], 1.0 - 0.5 * (1.0 + 0.5 * 1.0), kTolerance);
  EXPECT_NEAR(row[3], 1.0 - 0.1 * 1.0, kTolerance);
  // A narrower row keeps the part of the group that fits, whatever width came before.
  float narrow[2] = {1.0f, 1.0f};
  sgd->Update(narrow, gradient, 2);
  EXPECT_NEAR(narrow[0], 0.9, kTolerance);
  EXPECT_NEAR(narrow[1], 0.25, kTolerance);
  sgd->Update(row, gradient, 4);
  EXPECT_NEAR(row[3], 0.9 - 0.1 * 1.0, kTolerance);
}

TEST(AdagradOptimizer, KeepsOneAccumulatorPerWeight) {
  auto adagrad = MakeOptimizer(Options("adagrad", 0.1f));
  EXPECT_STREQ(adagrad->name(), "adagrad");
  EXPECT_EQ(adagrad->StateWidth(7), 7);
  std::vector<float> row = NewRow(*adagrad, 2);
  const float gradient[2] = {3.0f, -1.0f};
  adagrad->Update(row.data(), gradient, 2);
  EXPECT_FLOAT_EQ(row[2], 9.0f);
  EXPECT_FLOAT_EQ(row[3], 1.0f);
}

TEST(AdagradOptimizer, TwoStepsMatchTheHandComputation) {
  auto adagrad = MakeOptimizer(Options("adagrad", 0.1f));
  std::vector<float> row = NewRow(*adagrad, 2);
  row[0] = 1.0f;
  const float first[2] = {3.0f, -1.0f};
  const float second[2] = {4.0f, 0.0f};
  const double epsilon = OptimizerOptions().epsilon;
  adagrad->Update(row.data(), first, 2);
  adagrad->Update(row.data(), second, 2);
  // Accumulators 9 then 25, and 1 then 1.
  EXPECT_NEAR(row[0], 1.0 - 0.1 * 3.0 / (3.0 + epsilon) - 0.1 * 4.0 / (5.0 + epsilon), kTolerance);
  EXPECT_NEAR(row[1], 0.1 / (1.0 + epsilon), kTolerance);  // the zero gradient leaves it
}

TEST(AdagradOptimizer, TwoStepsWithL1AndL2MatchTheHandComputation) {
  OptimizerOptions options = Options("adagrad", 0.1f);
  options.l1 = 0.5f;
  options.l2 = 1.0f;
  auto adagrad = MakeOptimizer(options);
  std::vector<float> row = NewRow(*adagrad, 2);
  row[0] = 1.0f;
  row[1] = 0.01f;
  const float first[2] = {1.0f, 0.0f};
  const float second[2] = {0.125f, 0.0f};
  adagrad->Update(row.data(), first, 2);
  // g' = 1 + 1 * 1 = 2, accumulator 4, rate 0.1 / 2: 1 - 0.05 * 2, shrunk by 0.05 * 0.5.
  EXPECT_NEAR(row[0], 0.875, kTolerance);
  // g' = 0.01, rate 0.1 / 0.01 = 10: 0.01 - 10 * 0.01 = -0.09, within 10 * 0.5 of zero.
  EXPECT_EQ(row[1], 0.0f);
  adagrad->Update(row.data(), second, 2);
  // g' = 0.125 + 0.875 = 1, accumulator 5, rate 0.1 / sqrt(5).
  const double rate = 0.1 / std::sqrt(5.0);
  EXPECT_NEAR(row[0], 0.875 - rate * 1.0 - rate * 0.5, kTolerance);
  EXPECT_EQ(row[1], 0.0f);
}

TEST(AdagradOptimizer, ColumnGroupsUseTheirOwnRate) {
  OptimizerOptions options = Options("adagrad", 0.1f);
  options.groups.push_back({1, 2, 0.5f, 0.0f, 0.0f});
  auto adagrad = MakeOptimizer(options);
  std::vector<float> row = NewRow(*adagrad, 3);
  const float gradient[3] = {2.0f, 2.0f, 2.0f};
  adagrad->Update(row.data(), gradient, 3);
  // The first step moves each weight by its rate: g / sqrt(g^2) = 1.
  EXPECT_NEAR(row[0], -0.1, kTolerance);
  EXPECT_NEAR(row[1], -0.5, kTolerance);
  EXPECT_NEAR(row[2], -0.1, kTolerance);
}

TEST(AdamOptimizer, KeepsTwoMomentsPerWeightAndTheRowsStepCount) {
  auto adam = MakeOptimizer(Options("adam", 0.1f));
  EXPECT_STREQ(adam->name(), "adam");
  EXPECT_EQ(adam->StateWidth(3), 7);
  std::vector<float> row = NewRow(*adam, 1);
  std::vector<float> other = NewRow(*adam, 1);
  const float gradient[1] = {2.0f};
  adam->Update(row.data(), gradient, 1);
  adam->Update(row.data(), gradient, 1);
  adam->Update(other.data(), gradient, 1);
  EXPECT_FLOAT_EQ(row[3], 2.0f);  // state: m, v, t
  EXPECT_FLOAT_EQ(other[3], 1.0f);
}

TEST(AdamOptimizer, BiasCorrectionMakesTheFirstStepTheLearningRate) {
  auto adam = MakeOptimizer(Options("adam", 0.1f));
  std::vector<float> row = NewRow(*adam, 3);
  const float gradient[3] = {2.0f, -0.001f, 50.0f};
  adam->Update(row.data(), gradient, 3);
  // mhat = g and vhat = g^2 whatever the gradient's size: each weight moves by lr.
  EXPECT_NEAR(row[0], -0.1, kTolerance);
  EXPECT_NEAR(row[1], 0.1, 1e-5);  // epsilon matters a little for tiny gradients
  EXPECT_NEAR(row[2], -0.1, kTolerance);
}

// Two Adam steps on one weight, computed the long way.
double TwoAdamSteps(const OptimizerOptions& options, double weight, double first, double second) {
  const double beta1 = options.beta1, beta2 = options.beta2, epsilon = options.epsilon;
  const double rate = options.learning_rate, decay = options.l2;
  double m = 0, v = 0;
  int t = 0;
  for (double g : {first, second}) {
    g += decay * weight;
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    ++t;
    const double mhat = m / (1 - std::pow(beta1, t));
    const double vhat = v / (1 - std::pow(beta2, t));
    weight -= rate * mhat / (std::sqrt(vhat) + epsilon);
  }
  return weight;
}

TEST(AdamOptimizer, TwoStepsMatchTheHandComputation) {
  OptimizerOptions options = Options("adam", 0.1f);
  auto adam = MakeOptimizer(options);
  std::vector<float> row = NewRow(*adam, 1);
  row[0] = 1.0f;
  const float first[1] = {2.0f};
  const float second[1] = {1.0f};
  adam->Update(row.data(), first, 1);
  adam->Update(row.data(), second, 1);
  // m = 0.28, v = 0.004996; mhat = 0.28 / 0.19, vhat = 0.004996 / 0.001999.
  EXPECT_NEAR(row[0], 0.9 - 0.1 * (0.28 / 0.19) / std::sqrt(0.004996 / 0.001999), 1e-5);
  EXPECT_NEAR(row[0], TwoAdamSteps(options, 1.0, 2.0, 1.0), kTolerance);
}

TEST(AdamOptimizer, TwoStepsWithWeightDecayMatchTheHandComputation) {
  OptimizerOptions options = Options("adam", 0.1f);
  options.l2 = 0.5f;
  options.beta1 = 0.8f;
  options.beta2 = 0.99f;
  auto adam = MakeOptimizer(options);
  std::vector<float> row = NewRow(*adam, 1);
  row[0] = 1.0f;
  const float first[1] = {2.0f};
  const float second[1] = {-1.0f};
  adam->Update(row.data(), first, 1);
  adam->Update(row.data(), second, 1);
  EXPECT_NEAR(row[0], TwoAdamSteps(options, 1.0, 2.0, -1.0), kTolerance);
  // Without the decay the second gradient would be -1, not -1 + 0.5 * 0.9.
  OptimizerOptions undecayed = options;
  undecayed.l2 = 0;
  EXPECT_GT(std::fabs(row[0] - TwoAdamSteps(undecayed, 1.0, 2.0, -1.0)), 1e-3);
}

TEST(AdamOptimizer, ColumnGroupsUseTheirOwnRate) {
  OptimizerOptions options = Options("adam", 0.1f);
  options.groups.push_back({0, 1, 0.01f, 0.0f, 0.0f});
  auto adam = MakeOptimizer(options);
  std::vector<float> row = NewRow(*adam, 2);
  const float gradient[2] = {1.0f, 1.0f};
  adam->Update(row.data(), gradient, 2);
  EXPECT_NEAR(row[0], -0.01, kTolerance);
  EXPECT_NEAR(row[1], -0.1, kTolerance);
}

TEST(AdamOptimizer, WorksThroughAParameterTable) {
  const OptimizerOptions options = Options("adam", 0.1f);
  auto adam = MakeOptimizer(options);
  ParameterTable table(2, adam->StateWidth(2));
  const Key keys[2] = {3, 9};
  const float gradients[4] = {1.0f, -1.0f, 0.5f, 2.0f};
  table.Push(keys, 2, gradients, adam.get());
  table.Push(keys, 2, gradients, adam.get());
  // Each key's row took its own gradients twice, from zero weights.
  const float* row = table.Find(9);
  ASSERT_NE(row, nullptr);
  EXPECT_NEAR(row[0], TwoAdamSteps(options, 0.0, 0.5, 0.5), kTolerance);
  EXPECT_NEAR(row[1], TwoAdamSteps(options, 0.0, 2.0, 2.0), kTolerance);
  row = table.Find(3);
  ASSERT_NE(row, nullptr);
  EXPECT_NEAR(row[0], TwoAdamSteps(options, 0.0, 1.0, 1.0), kTolerance);
  EXPECT_NEAR(row[1], TwoAdamSteps(options, 0.0, -1.0, -1.0), kTolerance);
}

TEST(FtrlOptimizer, TwoStepsMatchTheHandComputation) {
  OptimizerOptions options = Options("ftrl", 0.5f);
  auto ftrl = MakeOptimizer(options);
  EXPECT_STREQ(ftrl->name(), "ftrl");
  EXPECT_EQ(ftrl->StateWidth(3), 6);
  std::vector<float> row = NewRow(*ftrl, 1);
  const float first[1] = {1.0f};
  const float second[1] = {-2.0f};
  ftrl->Update(row.data(), first, 1);
  // n = 1, sigma = 1 / 0.5 = 2, z = 1 - 2 * 0 = 1; w = -1 / ((1 + 1) / 0.5).
  EXPECT_NEAR(row[0], -0.25, kTolerance);
  EXPECT_NEAR(row[1], 1.0, kTolerance);  // z
  EXPECT_NEAR(row[2], 1.0, kTolerance);  // n
  ftrl->Update(row.data(), second, 1);
  // n = 5, sigma = (sqrt(5) - 1) / 0.5, z = 1 - 2 - sigma * -0.25.
  const double z = -1.0 + 0.25 * (std::sqrt(5.0) - 1.0) / 0.5;
  EXPECT_NEAR(row[0], -z / ((1.0 + std::sqrt(5.0)) / 0.5), kTolerance);  // 0.0590
  EXPECT_NEAR(row[1], z, kTolerance);
  EXPECT_NEAR(row[2], 5.0, kTolerance);
}

TEST(FtrlOptimizer, TwoStepsWithL1AndL2MatchTheHandComputation) {
  OptimizerOptions options = Options("ftrl", 0.5f);
  options.l1 = 0.2f;
  options.l2 = 1.0f;
  options.ftrl_beta = 1.0f;
  auto ftrl = MakeOptimizer(options);
  std::vector<float> row = NewRow(*ftrl, 1);
  const float first[1] = {1.0f};
  const float second[1] = {-2.0f};
  ftrl->Update(row.data(), first, 1);
  // z = 1: w = -(1 - 0.2) / ((1 + 1) / 0.5 + 1).
  EXPECT_NEAR(row[0], -0.16, kTolerance);
  ftrl->Update(row.data(), second, 1);
  const double z = 1.0 - 2.0 + 0.16 * (std::sqrt(5.0) - 1.0) / 0.5;                    // -0.6045
  EXPECT_NEAR(row[0], -(z + 0.2) / ((1.0 + std::sqrt(5.0)) / 0.5 + 1.0), kTolerance);  // 0.0541
}

TEST(FtrlOptimizer, LargeL1KeepsWeightsAtExactlyZero) {
  OptimizerOptions options = Options("ftrl", 0.1f);
  options.l1 = 10.0f;
  auto ftrl = MakeOptimizer(options);
  std::vector<float> row = NewRow(*ftrl, 3);
  const float gradient[3] = {3.0f, -2.0f, 0.5f};
  for (int step = 0; step < 3; ++step) {
    ftrl->Update(row.data(), gradient, 3);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(row[i], 0.0f) << "step " << step << ", weight " << i;
  }
  EXPECT_NEAR(row[3], 9.0, kTolerance);  // z still accumulates the gradient
}

TEST(FtrlOptimizer, ColumnGroupsUseTheirOwnPenalties) {
  OptimizerOptions options = Options("ftrl", 0.5f);
  options.groups.push_back({0, 1, 0.5f, 10.0f, 0.0f});  // a sparse linear weight
  auto ftrl = MakeOptimizer(options);
  std::vector<float> row = NewRow(*ftrl, 2);
  const float gradient[2] = {1.0f, 1.0f};
  ftrl->Update(row.data(), gradient, 2);
  EXPECT_EQ(row[0], 0.0f);
  EXPECT_NEAR(row[1], -0.25, kTolerance);
}

TEST(FtrlOptimizer, ColumnGroupsStepWithTheirOwnBeta) {
  OptimizerOptions options = Options("ftrl", 0.5f);
  options.ftrl_beta = 1.0f;
  options.groups.push_back({1, 2, 0.5f, 0.0f, 0.0f, 0.001f});  // column 0: the options' beta
  auto grouped = MakeOptimizer(options);
  OptimizerOptions small = Options("ftrl", 0.5f);
  small.ftrl_beta = 0.001f;
  auto one = MakeOptimizer(Options("ftrl", 0.5f));
  auto fast = MakeOptimizer(small);
  std::vector<float> row = NewRow(*grouped, 2);
  std::vector<float> alone = NewRow(*one, 1), fast_alone = NewRow(*fast, 1);
  for (const float g : {0.002f, -0.001f}) {
    const float gradient[2] = {g, g};
    grouped->Update(row.data(), gradient, 2);
    one->Update(alone.data(), &g, 1);
    fast->Update(fast_alone.data(), &g, 1);
    EXPECT_EQ(row[0], alone[0]) << g;
    EXPECT_EQ(row[1], fast_alone[0]) << g;
    EXPECT_GT(std::fabs(row[1]), 100.0f * std::fabs(row[0])) << g;
  }
  // A group's beta of 0 is the options' own.
  OptimizerOptions zero = Options("ftrl", 0.5f);
  zero.groups.push_back({0, 2, 0.5f, 0.0f, 0.0f, 0.0f});
  auto zero_grouped = MakeOptimizer(zero);
  std::vector<float> zero_row = NewRow(*zero_grouped, 2), plain = NewRow(*one, 1);
  const float pair[2] = {0.002f, 0.002f};
  zero_grouped->Update(zero_row.data(), pair, 2);
  MakeOptimizer(Options("ftrl", 0.5f))->Update(plain.data(), pair, 1);
  EXPECT_EQ(zero_row[0], plain[0]);
  EXPECT_EQ(zero_row[1], plain[0]);
  // Rows of one weight (their own path) take the group's beta too.
  OptimizerOptions single = Options("ftrl", 0.5f);
  single.groups.push_back({0, 1, 0.5f, 0.0f, 0.0f, 0.001f});
  auto single_grouped = MakeOptimizer(single);
  auto fast_again = MakeOptimizer(small);
  std::vector<float> a = NewRow(*single_grouped, 1), b = NewRow(*fast_again, 1);
  const float g = 0.003f;
  float* rows_a[1] = {a.data()};
  float* rows_b[1] = {b.data()};
  single_grouped->UpdateRows(rows_a, &g, 1, 1, 1.0f);
  fast_again->UpdateRows(rows_b, &g, 1, 1, 1.0f);
  EXPECT_EQ(a[0], b[0]);
  // A negative beta is refused, naming the group.
  single.groups[0].ftrl_beta = -1.0f;
  EXPECT_THROW(MakeOptimizer(single), Error);
}

TEST(FtrlOptimizer, RowsOfOneWeightStepBitForBitAsWiderRows) {
  // Rows of one weight take a blocked path; a row of two weights steps each
  // column alone. 300 rows (several blocks and a partial one), some with an
  // initialized weight, over five pushes with penalties on.
  OptimizerOptions options = Options("ftrl", 0.3f);
  options.l1 = 1.0f;
  options.l2 = 0.5f;
  auto narrow = MakeOptimizer(options);
  auto wide = MakeOptimizer(options);
  constexpr size_t kRows = 300;
  std::vector<std::vector<float>> narrow_rows(kRows, NewRow(*narrow, 1));
  std::vector<std::vector<float>> wide_rows(kRows, NewRow(*wide, 2));
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t r = 0; r < kRows; ++r) {
    if (r % 3 == 0) narrow_rows[r][0] = wide_rows[r][0] = wide_rows[r][1] = normal(random);
  }
  std::vector<float*> narrow_pointers, wide_pointers;
  for (size_t r = 0; r < kRows; ++r) {
    narrow_pointers.push_back(narrow_rows[r].data());
    wide_pointers.push_back(wide_rows[r].data());
  }
  for (int push = 0; push < 5; ++push) {
    std::vector<float> gradients(kRows), wide_gradients(2 * kRows);
    for (size_t r = 0; r < kRows; ++r) {
      gradients[r] = push == 2 && r % 7 == 0 ? 0.0f : normal(random);
      wide_gradients[2 * r] = wide_gradients[2 * r + 1] = gradients[r];
    }
    narrow->UpdateRows(narrow_pointers.data(), gradients.data(), kRows, 1, 1.0f);
    wide->UpdateRows(wide_pointers.data(), wide_gradients.data(), kRows, 2, 1.0f);
  }
  const auto bits = [](float value) {
    uint32_t out;
    std::memcpy(&out, &value, sizeof(out));
    return out;
  };
  size_t zeros = 0;
  for (size_t r = 0; r < kRows; ++r) {
    // Row layout: weights, then z, then n, one of each per column.
    const std::vector<float>& w = wide_rows[r];
    EXPECT_EQ(bits(narrow_rows[r][0]), bits(w[0])) << "row " << r;
    EXPECT_EQ(bits(narrow_rows[r][1]), bits(w[2])) << "row " << r;
    EXPECT_EQ(bits(narrow_rows[r][2]), bits(w[4])) << "row " << r;
    zeros += narrow_rows[r][0] == 0.0f;
  }
  EXPECT_GT(zeros, 0u);  // the L1 penalty zeroed some: both branches ran
  EXPECT_LT(zeros, kRows);
}

TEST(MakeOptimizer, SelectsTheOptimizerByName) {
  for (const char* name : {"sgd", "adagrad", "rmsprop", "adam", "ftrl"}) {
    EXPECT_STREQ(MakeOptimizer(Options(name, 0.1f))->name(), name);
  }
}

TEST(MakeOptimizer, RejectsUnknownNamesListingTheKnownOnes) {
  try {
    MakeOptimizer(Options("bogus", 0.1f));
    FAIL() << "an unknown optimizer was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* part : {"'bogus'", "auto", "sgd", "adagrad", "rmsprop", "adam", "ftrl"}) {
      EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }
}

TEST(MakeOptimizer, RejectsBadOptionsNamingTheFlag) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float infinity = std::numeric_limits<float>::infinity();
  struct Case {
    const char* flag;
    std::function<void(OptimizerOptions&)> spoil;
  };
  const std::vector<Case> cases = {
      {"--learning_rate", [](OptimizerOptions& o) { o.learning_rate = -1; }},
      {"--learning_rate", [](OptimizerOptions& o) { o.learning_rate = 0; }},
      {"--learning_rate", [&](OptimizerOptions& o) { o.learning_rate = nan; }},
      {"--learning_rate", [&](OptimizerOptions& o) { o.learning_rate = infinity; }},
      // Subnormal: 1 / rate is infinite (ftrl steps with it).
      {"--learning_rate", [](OptimizerOptions& o) { o.learning_rate = 1e-39f; }},
      {"--l1", [](OptimizerOptions& o) { o.l1 = -0.1f; }},
      {"--wd", [](OptimizerOptions& o) { o.l2 = -0.1f; }},
      {"--wd", [&](OptimizerOptions& o) { o.l2 = nan; }},
      {"--beta_1", [](OptimizerOptions& o) { o.beta1 = 1.0f; }},
      {"--beta_1", [](OptimizerOptions& o) { o.beta1 = -0.5f; }},
      {"--beta_2", [](OptimizerOptions& o) { o.beta2 = 1.5f; }},
      {"--beta_2", [&](OptimizerOptions& o) { o.beta2 = nan; }},
      {"--eps", [](OptimizerOptions& o) { o.epsilon = 0; }},
      {"--ftrl_beta", [](OptimizerOptions& o) { o.ftrl_beta = -1; }},
      {"--momentum", [](OptimizerOptions& o) { o.momentum = 1.0f; }},
      {"--momentum", [](OptimizerOptions& o) { o.momentum = -0.1f; }},
      {"--rmsprop_decay", [](OptimizerOptions& o) { o.rmsprop_decay = 1.0f; }},
      {"--lr_scheduler_step",
       [](OptimizerOptions& o) {
         o.schedule = {true, 0, 0.5f, 1e-5f};
       }},
      {"--lr_scheduler_factor",
       [](OptimizerOptions& o) {
         o.schedule = {true, 10, 0.0f, 1e-5f};
       }},
      {"--lr_scheduler_factor",
       [](OptimizerOptions& o) {
         o.schedule = {true, 10, 1.5f, 1e-5f};
       }},
      {"--lr_scheduler_minimum_lr",
       [](OptimizerOptions& o) {
         o.schedule = {true, 10, 0.5f, 0.0f};
       }},
      {"--lr_scheduler_minimum_lr",
       [&](OptimizerOptions& o) {
         o.schedule = {true, 10, 0.5f, nan};
       }},
  };
  for (const char* name : {"sgd", "adagrad", "rmsprop", "adam", "ftrl"}) {
    for (const Case& c : cases) {
      OptimizerOptions options = Options(name, 0.1f);
      c.spoil(options);
      try {
        MakeOptimizer(options);
        ADD_FAILURE() << name << ": bad " << c.flag << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(c.flag), std::string::npos) << e.what();
      }
    }
  }
}

TEST(MakeOptimizer, RejectsL1ForAdam) {
  OptimizerOptions options = Options("adam", 0.1f);
  options.l1 = 0.1f;
  EXPECT_THROW(MakeOptimizer(options), Error);
  options.l1 = 0;
  options.groups.push_back({0, 1, 0.1f, 0.1f, 0.0f});
  EXPECT_THROW(MakeOptimizer(options), Error);
}

TEST(MakeOptimizer, RejectsBadColumnGroups) {
  const std::vector<std::vector<OptimizerOptions::ColumnGroup>> bad = {
      {{2, 2, 0.1f, 0.0f, 0.0f}},                            // empty
      {{-1, 2, 0.1f, 0.0f, 0.0f}},                           // negative column
      {{0, 2, 0.0f, 0.0f, 0.0f}},                            // rate
      {{0, 2, 0.1f, -1.0f, 0.0f}},                           // l1
      {{0, 2, 0.1f, 0.0f, -1.0f}},                           // l2
      {{0, 2, 0.1f, 0.0f, 0.0f}, {1, 3, 0.1f, 0.0f, 0.0f}},  // overlap
  };
  for (const auto& groups : bad) {
    OptimizerOptions options = Options("sgd", 0.1f);
    options.groups = groups;
    try {
      MakeOptimizer(options);
      ADD_FAILURE() << "bad groups starting at column " << groups[0].begin << " were accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("column group"), std::string::npos) << e.what();
    }
  }
  OptimizerOptions adjacent = Options("sgd", 0.1f);
  adjacent.groups = {{0, 1, 0.1f, 0.0f, 0.0f}, {1, 3, 0.2f, 0.0f, 0.0f}};
  EXPECT_NO_THROW(MakeOptimizer(adjacent));
}

// The options a name such as "sgd+momentum" or "adam+schedule" stands for:
// rate 0.1, L2 0.1, `l1` but for adam (which takes none), momentum 0.9, and a
// schedule halving the rate every `schedule_step` updates of a row.
OptimizerOptions NamedOptions(const std::string& full, int schedule_step, float l1) {
  OptimizerOptions options = Options(full.substr(0, full.find('+')), 0.1f);
  if (full == "sgd+momentum") options.momentum = 0.9f;
  if (full.find("+schedule") != std::string::npos) {
    options.schedule = {true, schedule_step, 0.5f, 0.01f};
  }
  options.l2 = 0.1f;
  if (options.name != "adam") options.l1 = l1;
  return options;
}

TEST(MakeOptimizer, WideVectorsStepEveryRowBitForBitAsTheBaseline) {
  // Where the CPU has AVX2, the optimizers step rows with it: the same
  // operations, so the same bits as the baseline's instructions, at the
  // widths that take it (FTRL's blocked rows of one weight, a vector's 8
  // models, 8 plus a tail, a factorization machine's 40) and those that stay
  // on the baseline (one weight but FTRL's, 3), with penalties, column
  // groups, a schedule, a staleness scale, initialized weights and zero
  // gradients (FTRL's fresh rows and its L1 branch).
  if (!WideVectorStepsAvailable()) {
    GTEST_SKIP() << "this CPU has no AVX2: the optimizers run the baseline's code alone";
  }
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr size_t kRows = 150;
  for (const char* name :
       {"sgd+momentum", "sgd+schedule", "adagrad", "rmsprop", "adam", "adam+schedule", "ftrl"}) {
    for (int width : {1, 3, 8, 13, 40}) {
      for (float step_scale : {1.0f, 0.5f}) {
        SCOPED_TRACE(std::string(name) + " width " + std::to_string(width) + " scale " +
                     std::to_string(step_scale));
        OptimizerOptions options = NamedOptions(name, 2, 0.3f);
        if (width > 2) options.groups.push_back({1, 2, 0.2f, 0.0f, 0.05f, 0.001f});
        options.wide_vectors = false;
        auto baseline = MakeOptimizer(options);
        options.wide_vectors = true;
        auto wide = MakeOptimizer(options);
        const size_t row_width = width + wide->StateWidth(width);
        std::vector<float> wide_rows(kRows * row_width, 0.0f);
        for (size_t i = 0; i < kRows; i += 3) wide_rows[i * row_width] = normal(random);
        std::vector<float> baseline_rows = wide_rows;
        std::vector<float*> wide_pointers(kRows), baseline_pointers(kRows);
        for (size_t i = 0; i < kRows; ++i) {
          wide_pointers[i] = wide_rows.data() + i * row_width;
          baseline_pointers[i] = baseline_rows.data() + i * row_width;
        }
        std::vector<float> gradients(kRows * width);
        for (int push = 0; push < 5; ++push) {
          for (size_t i = 0; i < gradients.size(); ++i) {
            gradients[i] = push == 2 && i % 7 == 0 ? 0.0f : normal(random);
          }
          baseline->UpdateRows(baseline_pointers.data(), gradients.data(), kRows, width,
                               step_scale);
          wide->UpdateRows(wide_pointers.data(), gradients.data(), kRows, width, step_scale);
        }
        ASSERT_EQ(wide_rows.size(), baseline_rows.size());
        EXPECT_EQ(0, std::memcmp(wide_rows.data(), baseline_rows.data(),
                                 sizeof(float) * wide_rows.size()));
        EXPECT_NE(wide_rows, std::vector<float>(wide_rows.size(), 0.0f));
      }
    }
  }
}

TEST(MakeOptimizer, BatchedUpdatesEqualOneRowAtATime) {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int width = 3;
  const size_t count = 10;
  for (const char* name : {"sgd", "sgd+momentum", "sgd+schedule", "adagrad", "rmsprop", "adam",
                           "adam+schedule", "ftrl"}) {
    SCOPED_TRACE(name);
    OptimizerOptions options = NamedOptions(name, 1, 0.01f);
    options.groups.push_back({1, 2, 0.2f, 0.0f, 0.0f});
    auto batched = MakeOptimizer(options);
    auto single = MakeOptimizer(options);
    const size_t row_width = width + batched->StateWidth(width);
    std::vector<float> batched_rows(count * row_width, 0.0f);
    for (size_t i = 0; i < count; ++i) batched_rows[i * row_width] = value(random);
    std::vector<float> single_rows = batched_rows;
    std::vector<float> gradients(count * width);
    std::vector<float*> rows(count);
    for (size_t i = 0; i < count; ++i) rows[i] = batched_rows.data() + i * row_width;
    for (int step = 0; step < 2; ++step) {
      for (float& g : gradients) g = value(random);
      batched->UpdateRows(rows.data(), gradients.data(), count, width);
      for (size_t i = 0; i < count; ++i) {
        single->Update(single_rows.data() + i * row_width, gradients.data() + i * width, width);
      }
    }
    EXPECT_EQ(batched_rows, single_rows);
  }
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

TEST(FtrlOptimizer, StartsFromAnInitializedWeight) {
  OptimizerOptions options;
  options.name = "ftrl";
  options.learning_rate = 0.5f;
  options.l2 = 0.1f;
  auto ftrl = MakeOptimizer(options);
  // Weights 0.25 and -0.5 from an initializer; FTRL state (z, n) still zero.
  float row[6] = {0.25f, -0.5f, 0, 0, 0, 0};
  const float none[2] = {0.0f, 0.0f};
  ftrl->Update(row, none, 2);
  EXPECT_FLOAT_EQ(row[0], 0.25f);  // a zero gradient leaves the initial weight
  EXPECT_FLOAT_EQ(row[1], -0.5f);
  const float gradient[2] = {1.0f, 0.0f};
  ftrl->Update(row, gradient, 2);
  // z = -w (beta / alpha + l2) + g - sigma w with sigma = (sqrt(1) - 0) / alpha,
  // w = -z / ((beta + 1) / alpha + l2).
  const float z = -0.25f * (1.0f / 0.5f + 0.1f) + 1.0f - (1.0f / 0.5f) * 0.25f;
  EXPECT_FLOAT_EQ(row[0], -z / ((1.0f + 1.0f) / 0.5f + 0.1f));
  EXPECT_FLOAT_EQ(row[1], -0.5f);
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

TEST(RmspropOptimizer, TwoStepsMatchTheHandComputation) {
  OptimizerOptions options = Options("rmsprop", 0.1f);
  auto rmsprop = MakeOptimizer(options);
  EXPECT_EQ(rmsprop->StateWidth(3), 3);  // one mean square per weight
  std::vector<float> row = NewRow(*rmsprop, 1);
  row[0] = 1.0f;
  const float first[1] = {2.0f};
  const float second[1] = {1.0f};
  rmsprop->Update(row.data(), first, 1);
  // s = 0.1 * 4 = 0.4; w = 1 - 0.1 * 2 / sqrt(0.4).
  EXPECT_NEAR(row[0], 1.0 - 0.2 / std::sqrt(0.4), kTolerance);
  rmsprop->Update(row.data(), second, 1);
  // s = 0.9 * 0.4 + 0.1 * 1 = 0.46; w -= 0.1 * 1 / sqrt(0.46).
  EXPECT_NEAR(row[0], 1.0 - 0.2 / std::sqrt(0.4) - 0.1 / std::sqrt(0.46), kTolerance);
  EXPECT_NEAR(row[1], 0.46, kTolerance);
}

TEST(RmspropOptimizer, TwoStepsWithWeightDecayAndL1MatchTheHandComputation) {
  OptimizerOptions options = Options("rmsprop", 0.1f);
  options.rmsprop_decay = 0.5f;
  options.l2 = 0.5f;
  options.l1 = 0.2f;
  auto rmsprop = MakeOptimizer(options);
  std::vector<float> row = NewRow(*rmsprop, 1);
  row[0] = 1.0f;
  rmsprop->Update(row.data(), std::vector<float>{1.5f}.data(), 1);
  // g' = 1.5 + 0.5 * 1 = 2; s = 0.5 * 4 = 2; step = 0.1 / sqrt(2);
  // w = 1 - step * 2, shrunk towards zero by step * 0.2.
  const double step1 = 0.1 / std::sqrt(2.0);
  const double w1 = 1.0 - step1 * 2.0 - step1 * 0.2;
  EXPECT_NEAR(row[0], w1, kTolerance);
  rmsprop->Update(row.data(), std::vector<float>{-1.0f}.data(), 1);
  const double g2 = -1.0 + 0.5 * w1;
  const double s2 = 0.5 * 2.0 + 0.5 * g2 * g2;
  const double step2 = 0.1 / std::sqrt(s2);
  EXPECT_NEAR(row[0], w1 - step2 * g2 - step2 * 0.2, kTolerance);
}

TEST(SgdMomentum, PlainSgdKeepsNoState) {
  OptimizerOptions options = Options("sgd", 0.1f);
  EXPECT_EQ(MakeOptimizer(options)->StateWidth(3), 0);
  options.momentum = 0.9f;
  EXPECT_EQ(MakeOptimizer(options)->StateWidth(3), 3);  // one velocity per weight
}

TEST(SgdMomentum, TwoStepsMatchTheHandComputation) {
  OptimizerOptions options = Options("sgd", 0.1f);
  options.momentum = 0.9f;
  auto sgd = MakeOptimizer(options);
  EXPECT_STREQ(sgd->name(), "sgd");
  std::vector<float> row = NewRow(*sgd, 1);
  row[0] = 1.0f;
  sgd->Update(row.data(), std::vector<float>{2.0f}.data(), 1);
  EXPECT_NEAR(row[0], 0.8, kTolerance);  // v = -0.1 * 2
  sgd->Update(row.data(), std::vector<float>{1.0f}.data(), 1);
  EXPECT_NEAR(row[1], -0.28, kTolerance);  // v = 0.9 * -0.2 - 0.1 * 1
  EXPECT_NEAR(row[0], 0.52, kTolerance);
}

TEST(SgdMomentum, TwoStepsWithWeightDecayMatchTheHandComputation) {
  OptimizerOptions options = Options("sgd", 0.1f);
  options.momentum = 0.9f;
  options.l2 = 0.5f;
  auto sgd = MakeOptimizer(options);
  std::vector<float> row = NewRow(*sgd, 1);
  row[0] = 1.0f;
  sgd->Update(row.data(), std::vector<float>{2.0f}.data(), 1);
  EXPECT_NEAR(row[0], 0.75, kTolerance);  // v = -0.1 * (2 + 0.5 * 1) = -0.25
  sgd->Update(row.data(), std::vector<float>{1.0f}.data(), 1);
  // v = 0.9 * -0.25 - 0.1 * (1 + 0.5 * 0.75) = -0.3625
  EXPECT_NEAR(row[0], 0.75 - 0.3625, kTolerance);
}

OptimizerOptions Scheduled(const std::string& name, float rate, int step, float factor,
                           float minimum) {
  OptimizerOptions options = Options(name, rate);
  options.schedule = {true, step, factor, minimum};
  return options;
}

TEST(LearningRateSchedule, RateDecreasesByTheFactorEveryStepUpdates) {
  // SGD with a gradient of 1 moves the weight by exactly the rate in use.
  auto sgd = MakeOptimizer(Scheduled("sgd", 1.0f, 2, 0.5f, 1e-5f));
  EXPECT_EQ(sgd->StateWidth(1), 1);  // the row's update count
  std::vector<float> row = NewRow(*sgd, 1);
  const float gradient[1] = {1.0f};
  const double expected_rates[] = {1, 1, 0.5, 0.5, 0.25, 0.25, 0.125};
  for (double rate : expected_rates) {
    const float before = row[0];
    sgd->Update(row.data(), gradient, 1);
    EXPECT_NEAR(before - row[0], rate, kTolerance);
  }
  EXPECT_EQ(row[1], 7.0f);
}

TEST(LearningRateSchedule, RateNeverFallsBelowTheMinimum) {
  auto sgd = MakeOptimizer(Scheduled("sgd", 1.0f, 1, 0.5f, 0.3f));
  std::vector<float> row = NewRow(*sgd, 1);
  const float gradient[1] = {1.0f};
  const double expected_rates[] = {1, 0.5, 0.3, 0.3, 0.3};  // 0.25 and below are floored
  for (double rate : expected_rates) {
    const float before = row[0];
    sgd->Update(row.data(), gradient, 1);
    EXPECT_NEAR(before - row[0], rate, kTolerance);
  }
}

TEST(LearningRateSchedule, RateBelowTheMinimumIsNotRaised) {
  auto sgd = MakeOptimizer(Scheduled("sgd", 0.1f, 1, 0.5f, 0.3f));
  std::vector<float> row = NewRow(*sgd, 1);
  const float gradient[1] = {1.0f};
  for (int i = 0; i < 3; ++i) sgd->Update(row.data(), gradient, 1);
  EXPECT_NEAR(row[0], -0.3, kTolerance);
}

TEST(LearningRateSchedule, EachRowCountsItsOwnUpdates) {
  auto sgd = MakeOptimizer(Scheduled("sgd", 1.0f, 1, 0.5f, 1e-5f));
  std::vector<float> busy = NewRow(*sgd, 1);
  std::vector<float> fresh = NewRow(*sgd, 1);
  const float gradient[1] = {1.0f};
  for (int i = 0; i < 3; ++i) sgd->Update(busy.data(), gradient, 1);
  sgd->Update(fresh.data(), gradient, 1);
  EXPECT_NEAR(busy[0], -(1 + 0.5 + 0.25), kTolerance);
  EXPECT_NEAR(fresh[0], -1.0, kTolerance);  // the full rate: its first update
}

TEST(LearningRateSchedule, ScalesEachColumnGroupsRateWithItsOwnFloor) {
  OptimizerOptions options = Scheduled("sgd", 1.0f, 1, 0.5f, 0.15f);
  options.groups.push_back({1, 2, 0.2f, 0.0f, 0.0f});
  auto sgd = MakeOptimizer(options);
  std::vector<float> row = NewRow(*sgd, 2);
  const float gradient[2] = {1.0f, 1.0f};
  sgd->Update(row.data(), gradient, 2);
  sgd->Update(row.data(), gradient, 2);
  EXPECT_NEAR(row[0], -(1 + 0.5), kTolerance);
  EXPECT_NEAR(row[1], -(0.2 + 0.15), kTolerance);  // 0.1 floored at 0.15
}

TEST(LearningRateSchedule, AdamKeepsItsStateAndCountsAfterIt) {
  auto adam = MakeOptimizer(Scheduled("adam", 0.1f, 1, 0.5f, 1e-5f));
  EXPECT_EQ(adam->StateWidth(1), 2 + 1 + 1);  // m, v, t, then the schedule's count
  std::vector<float> row = NewRow(*adam, 1);
  const float gradient[1] = {2.0f};
  adam->Update(row.data(), gradient, 1);
  adam->Update(row.data(), gradient, 1);
  // A constant gradient makes every bias-corrected Adam step the rate: 0.1, then 0.05.
  EXPECT_NEAR(row[0], -0.15, 1e-5);
  EXPECT_EQ(row[4], 2.0f);
}

TEST(LearningRateSchedule, FtrlIgnoresIt) {
  auto ftrl = MakeOptimizer(Scheduled("ftrl", 0.1f, 1, 0.5f, 1e-5f));
  EXPECT_EQ(ftrl->StateWidth(3), MakeOptimizer(Options("ftrl", 0.1f))->StateWidth(3));
}

TEST(MakeOptimizer, AutoIsAdam) {
  EXPECT_EQ(ResolveOptimizerName("auto"), "adam");
  EXPECT_EQ(ResolveOptimizerName("sgd"), "sgd");
  EXPECT_STREQ(MakeOptimizer(Options("auto", 0.1f))->name(), "adam");
  OptimizerOptions options = Options("auto", 0.1f);
  options.l1 = 0.1f;
  EXPECT_THROW(MakeOptimizer(options), Error);  // as adam
}

}  // namespace
}  // namespace keel
