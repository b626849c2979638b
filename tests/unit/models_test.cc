// The built-in models' per-example math: losses, linear, factorization machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "models/factorization_machine.h"
#include "models/linear.h"
#include "models/losses.h"

namespace keel {
namespace {

// The central difference of `loss()` in the variable `*x`, which it restores.
// Divides by the step actually taken, after float rounding.
template <typename Loss>
double CentralDifference(const Loss& loss, float* x, float step) {
  const float original = *x;
  const float plus_x = original + step;
  const float minus_x = original - step;
  *x = plus_x;
  const double plus = loss();
  *x = minus_x;
  const double minus = loss();
  *x = original;
  return (plus - minus) / (static_cast<double>(plus_x) - static_cast<double>(minus_x));
}

// Float finite differences are good to about 1e-2 relative; gradients near
// zero are compared to an absolute 1e-3.
void ExpectGradientNear(double analytic, double numeric, const std::string& what) {
  EXPECT_NEAR(analytic, numeric, 1e-2 * std::max(std::abs(numeric), 0.1)) << what;
}

// Scores from small to far beyond where expf overflows.
const float kScores[] = {-1e4f, -100.0f, -20.0f, -3.0f,  -0.5f, 0.0f,
                         0.5f,  3.0f,    20.0f,  100.0f, 1e4f};

float StepFor(float score) { return 1e-3f * std::max(1.0f, std::abs(score)); }

std::vector<float> Uniform(std::mt19937* random, size_t count, float low, float high) {
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> numbers(count);
  for (float& number : numbers) number = distribution(*random);
  return numbers;
}

int UniformInt(std::mt19937* random, int low, int high) {
  return std::uniform_int_distribution<int>(low, high)(*random);
}

// --- Losses ---

TEST(Losses, SigmoidSaturatesWithoutNaN) {
  EXPECT_FLOAT_EQ(Sigmoid(0.0f), 0.5f);
  EXPECT_FLOAT_EQ(Sigmoid(1e4f), 1.0f);
  EXPECT_FLOAT_EQ(Sigmoid(-1e4f), 0.0f);
  EXPECT_NEAR(Sigmoid(-20.0f), std::exp(-20.0), 1e-12);
  for (float score : kScores) EXPECT_TRUE(std::isfinite(Sigmoid(score))) << score;
}

TEST(Losses, LogisticLossIsTheCrossEntropyOfTheSigmoid) {
  for (float score = -5.0f; score <= 5.0f; score += 0.75f) {
    const double p = 1.0 / (1.0 + std::exp(-static_cast<double>(score)));
    EXPECT_NEAR(LogisticLoss(score, 1.0f), -std::log(p), 1e-5) << score;
    EXPECT_NEAR(LogisticLoss(score, 0.0f), -std::log(1.0 - p), 1e-5) << score;
  }
}

TEST(Losses, LogisticLossIsFiniteAndLinearForLargeScores) {
  EXPECT_FLOAT_EQ(LogisticLoss(-1e4f, 1.0f), 1e4f);
  EXPECT_FLOAT_EQ(LogisticLoss(1e4f, 0.0f), 1e4f);
  EXPECT_FLOAT_EQ(LogisticLoss(1e4f, 1.0f), 0.0f);
  EXPECT_FLOAT_EQ(LogisticLoss(-1e4f, 0.0f), 0.0f);
  EXPECT_NEAR(LogisticLoss(100.0f, 0.0f), 100.0f, 1e-4);
}

TEST(Losses, LogisticLossKeepsItsPrecisionWhenConfidentAndRight) {
  // log(1 + e^-30) = 9.36e-14: a naive log(sigmoid) would round it to zero.
  EXPECT_NEAR(LogisticLoss(30.0f, 1.0f), std::exp(-30.0), 1e-3 * std::exp(-30.0));
}

TEST(Losses, LogisticGradientMatchesFiniteDifference) {
  for (float label : {0.0f, 1.0f}) {
    for (float score : kScores) {
      const float gradient = LogisticGradient(score, label);
      ASSERT_TRUE(std::isfinite(gradient));
      ASSERT_TRUE(std::isfinite(LogisticLoss(score, label)));
      const double numeric =
          CentralDifference([&] { return LogisticLoss(score, label); }, &score, StepFor(score));
      ExpectGradientNear(gradient, numeric,
                         "score " + std::to_string(score) + " label " + std::to_string(label));
    }
  }
}

TEST(Losses, SquaredLossIsHalfTheSquaredError) {
  EXPECT_FLOAT_EQ(SquaredLoss(3.0f, 1.0f), 2.0f);
  EXPECT_FLOAT_EQ(SquaredLoss(-1.0f, 1.0f), 2.0f);
  EXPECT_FLOAT_EQ(SquaredLoss(1.5f, 1.5f), 0.0f);
}

TEST(Losses, SquaredGradientMatchesFiniteDifference) {
  for (float label : {-2.5f, 0.0f, 4.0f}) {
    for (float score : kScores) {
      const float gradient = SquaredGradient(score, label);
      ASSERT_TRUE(std::isfinite(gradient));
      ASSERT_TRUE(std::isfinite(SquaredLoss(score, label)));
      const double numeric =
          CentralDifference([&] { return SquaredLoss(score, label); }, &score, StepFor(score));
      ExpectGradientNear(gradient, numeric,
                         "score " + std::to_string(score) + " label " + std::to_string(label));
    }
  }
}

TEST(Losses, SoftmaxLossIsMinusLogTheLabelsProbability) {
  const float scores[3] = {1.0f, 2.0f, 3.0f};
  const double normalizer = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int label = 0; label < 3; ++label) {
    EXPECT_NEAR(SoftmaxLoss(scores, 3, label), -std::log(std::exp(label + 1.0) / normalizer), 1e-6);
  }
}

TEST(Losses, SoftmaxGradientMatchesFiniteDifference) {
  for (unsigned seed = 1; seed <= 10; ++seed) {
    std::mt19937 random(seed);
    const int classes = UniformInt(&random, 2, 10);
    const float scale = seed % 2 == 0 ? 1.0f : 10.0f;
    std::vector<float> scores = Uniform(&random, classes, -scale, scale);
    const int label = UniformInt(&random, 0, classes - 1);
    std::vector<float> gradient(classes);
    SoftmaxGradient(scores.data(), classes, label, gradient.data());
    for (int c = 0; c < classes; ++c) {
      const double numeric = CentralDifference(
          [&] { return SoftmaxLoss(scores.data(), classes, label); }, &scores[c], 1e-3f);
      ExpectGradientNear(gradient[c], numeric,
                         "seed " + std::to_string(seed) + " class " + std::to_string(c));
    }
  }
}

TEST(Losses, SoftmaxIsStableForLargeScores) {
  const float shifted[3] = {0.0f, 1.0f, -1.0f};
  float expected_gradient[3];
  SoftmaxGradient(shifted, 3, 2, expected_gradient);
  for (float offset : {1000.0f, -1000.0f, 1e30f}) {
    const float scores[3] = {offset, offset + 1.0f, offset - 1.0f};
    if (offset == 1e30f) {
      // Beyond float resolution the three scores are equal.
      EXPECT_NEAR(SoftmaxLoss(scores, 3, 2), std::log(3.0), 1e-6);
      continue;
    }
    EXPECT_NEAR(SoftmaxLoss(scores, 3, 2), SoftmaxLoss(shifted, 3, 2), 1e-4) << offset;
    float gradient[3];
    SoftmaxGradient(scores, 3, 2, gradient);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(gradient[c], expected_gradient[c], 1e-5) << offset;
  }
  const float far_apart[2] = {-5000.0f, 5000.0f};
  EXPECT_FLOAT_EQ(SoftmaxLoss(far_apart, 2, 0), 10000.0f);
  EXPECT_FLOAT_EQ(SoftmaxLoss(far_apart, 2, 1), 0.0f);
}

TEST(Losses, SoftmaxGradientSumsToZero) {
  std::mt19937 random(7);
  std::vector<float> scores = Uniform(&random, 6, -50.0f, 50.0f);
  std::vector<float> gradient(6);
  SoftmaxGradient(scores.data(), 6, 4, gradient.data());
  double sum = 0.0;
  for (float g : gradient) sum += g;
  EXPECT_NEAR(sum, 0.0, 1e-6);
  EXPECT_LT(gradient[4], 0.0f);
}

TEST(Losses, OutOfRangeClassGivesInfiniteLossAndZeroGradient) {
  const float scores[3] = {1.0f, 2.0f, 3.0f};
  for (int label : {-1, 3}) {
    EXPECT_EQ(SoftmaxLoss(scores, 3, label), std::numeric_limits<float>::infinity());
    float gradient[3] = {9.0f, 9.0f, 9.0f};
    SoftmaxGradient(scores, 3, label, gradient);
    for (float g : gradient) EXPECT_EQ(g, 0.0f);
  }
}

TEST(Losses, LabelToClassAcceptsOnlyIntegerClassIds) {
  EXPECT_EQ(LabelToClass(0.0f, 3), 0);
  EXPECT_EQ(LabelToClass(2.0f, 3), 2);
  EXPECT_EQ(LabelToClass(3.0f, 3), -1);
  EXPECT_EQ(LabelToClass(-1.0f, 3), -1);
  EXPECT_EQ(LabelToClass(1.5f, 3), -1);
  EXPECT_EQ(LabelToClass(std::numeric_limits<float>::quiet_NaN(), 3), -1);
  EXPECT_EQ(LabelToClass(1e20f, 3), -1);
}

// --- Linear ---

TEST(Linear, ScoresAreBiasPlusWeightedValuesPerClass) {
  // Feature 0 weighs (1, 2) for classes (0, 1); feature 1 weighs (3, 4).
  const float weights[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float values[2] = {0.5f, -1.0f};
  const float bias[2] = {0.25f, -0.5f};
  float scores[2];
  LinearScores(weights, values, 2, 2, bias, scores);
  EXPECT_FLOAT_EQ(scores[0], 0.25f + 0.5f - 3.0f);
  EXPECT_FLOAT_EQ(scores[1], -0.5f + 1.0f - 4.0f);
}

TEST(Linear, NullBiasMeansNoBias) {
  const float weights[2] = {2.0f, -1.0f};
  const float values[2] = {1.5f, 4.0f};
  float score = 99.0f;
  LinearScores(weights, values, 2, 1, nullptr, &score);
  EXPECT_FLOAT_EQ(score, -1.0f);
}

TEST(Linear, GradientsAddToWhatTheBuffersHold) {
  const float values[2] = {2.0f, -1.0f};
  const float score_gradient[1] = {0.5f};
  float weight_gradients[2] = {1.0f, 1.0f};
  float bias_gradient[1] = {1.0f};
  LinearGradients(values, 2, 1, score_gradient, weight_gradients, bias_gradient);
  EXPECT_FLOAT_EQ(weight_gradients[0], 2.0f);
  EXPECT_FLOAT_EQ(weight_gradients[1], 0.5f);
  EXPECT_FLOAT_EQ(bias_gradient[0], 1.5f);
}

// Random sparse rows, scored and then put through the logistic loss (one
// class) or the softmax loss (several classes).
TEST(Linear, GradientsMatchFiniteDifferenceOfTheLoss) {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 random(seed);
    const int nnz = UniformInt(&random, 1, 20);
    const int classes = seed % 3 == 0 ? 1 : UniformInt(&random, 2, 6);
    std::vector<float> weights = Uniform(&random, nnz * classes, -1.0f, 1.0f);
    std::vector<float> values = Uniform(&random, nnz, -1.0f, 1.0f);
    std::vector<float> bias = Uniform(&random, classes, -0.5f, 0.5f);
    const int label = UniformInt(&random, 0, classes == 1 ? 1 : classes - 1);
    std::vector<float> scores(classes);

    auto loss = [&] {
      LinearScores(weights.data(), values.data(), nnz, classes, bias.data(), scores.data());
      return classes == 1 ? LogisticLoss(scores[0], static_cast<float>(label))
                          : SoftmaxLoss(scores.data(), classes, label);
    };
    loss();
    std::vector<float> score_gradient(classes);
    if (classes == 1) {
      score_gradient[0] = LogisticGradient(scores[0], static_cast<float>(label));
    } else {
      SoftmaxGradient(scores.data(), classes, label, score_gradient.data());
    }
    std::vector<float> weight_gradients(nnz * classes, 0.0f);
    std::vector<float> bias_gradient(classes, 0.0f);
    LinearGradients(values.data(), nnz, classes, score_gradient.data(), weight_gradients.data(),
                    bias_gradient.data());

    const std::string where = "seed " + std::to_string(seed);
    for (int i = 0; i < nnz * classes; ++i) {
      ExpectGradientNear(weight_gradients[i], CentralDifference(loss, &weights[i], 1e-2f),
                         where + " weight " + std::to_string(i));
    }
    for (int c = 0; c < classes; ++c) {
      ExpectGradientNear(bias_gradient[c], CentralDifference(loss, &bias[c], 1e-2f),
                         where + " bias " + std::to_string(c));
    }
  }
}

// --- Factorization machine ---

TEST(FactorizationMachine, ScoreIsBiasLinearAndPairwiseInteractions) {
  // k = 2. Feature 0: w = 1, v = (1, 2); feature 1: w = -1, v = (3, -2).
  const float params[6] = {1.0f, 1.0f, 2.0f, -1.0f, 3.0f, -2.0f};
  const float values[2] = {2.0f, 0.5f};
  float factor_sums[2];
  // 0.5 + (1 * 2 - 1 * 0.5) + <v_0, v_1> * 2 * 0.5, with <v_0, v_1> = 3 - 4.
  EXPECT_FLOAT_EQ(FmScore(params, values, 2, 2, 0.5f, factor_sums), 1.0f);
  EXPECT_FLOAT_EQ(factor_sums[0], 1.0f * 2.0f + 3.0f * 0.5f);
  EXPECT_FLOAT_EQ(factor_sums[1], 2.0f * 2.0f - 2.0f * 0.5f);
}

TEST(FactorizationMachine, SingleFeatureHasNoInteraction) {
  const float params[4] = {0.5f, 3.0f, -4.0f, 7.0f};
  const float values[1] = {2.0f};
  float factor_sums[3];
  EXPECT_FLOAT_EQ(FmScore(params, values, 1, 3, 0.25f, factor_sums), 0.25f + 1.0f);
}

TEST(FactorizationMachine, EmptyRowScoresTheBias) {
  float factor_sums[2] = {5.0f, 5.0f};
  EXPECT_FLOAT_EQ(FmScore(nullptr, nullptr, 0, 2, -0.75f, factor_sums), -0.75f);
  EXPECT_EQ(factor_sums[0], 0.0f);
  EXPECT_EQ(factor_sums[1], 0.0f);
}

TEST(FactorizationMachine, FastScoreMatchesPairwiseDefinition) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 random(seed);
    const int nnz = UniformInt(&random, 1, 20);
    const int k = UniformInt(&random, 1, 8);
    std::vector<float> params = Uniform(&random, nnz * FmRowWidth(k), -0.5f, 0.5f);
    std::vector<float> values = Uniform(&random, nnz, -1.0f, 1.0f);
    const float bias = Uniform(&random, 1, -1.0f, 1.0f)[0];
    std::vector<float> factor_sums(k);
    const float fast = FmScore(params.data(), values.data(), nnz, k, bias, factor_sums.data());
    const float naive = FmScoreNaive(params.data(), values.data(), nnz, k, bias);
    EXPECT_NEAR(fast, naive, 1e-4 * std::max(1.0f, std::abs(naive)))
        << "seed " << seed << " nnz " << nnz << " k " << k;
  }
}

TEST(FactorizationMachine, GradientsAddToWhatTheBuffersHold) {
  const float params[2] = {1.0f, 2.0f};  // k = 1: w = 1, v = 2
  const float values[1] = {3.0f};
  float factor_sums[1];
  FmScore(params, values, 1, 1, 0.0f, factor_sums);
  float param_gradients[2] = {1.0f, 1.0f};
  float bias_gradient = 1.0f;
  FmGradients(params, values, 1, 1, factor_sums, 0.5f, param_gradients, &bias_gradient);
  EXPECT_FLOAT_EQ(param_gradients[0], 1.0f + 0.5f * 3.0f);
  // A lone feature has no interaction: dscore/dv = x (S - v x) = 0.
  EXPECT_FLOAT_EQ(param_gradients[1], 1.0f);
  EXPECT_FLOAT_EQ(bias_gradient, 1.5f);
}

// Random sparse rows, scored and then put through the logistic loss (odd
// seeds) or the squared loss (even seeds).
TEST(FactorizationMachine, GradientsMatchFiniteDifferenceOfTheLoss) {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 random(seed);
    const int nnz = UniformInt(&random, 1, 20);
    const int k = UniformInt(&random, 1, 8);
    const int width = FmRowWidth(k);
    std::vector<float> params = Uniform(&random, nnz * width, -0.5f, 0.5f);
    std::vector<float> values = Uniform(&random, nnz, -1.0f, 1.0f);
    float bias = Uniform(&random, 1, -1.0f, 1.0f)[0];
    const bool logistic = seed % 2 == 1;
    const float label = logistic ? static_cast<float>(UniformInt(&random, 0, 1))
                                 : Uniform(&random, 1, -2.0f, 2.0f)[0];
    std::vector<float> factor_sums(k);

    auto loss = [&] {
      const float score = FmScore(params.data(), values.data(), nnz, k, bias, factor_sums.data());
      return logistic ? LogisticLoss(score, label) : SquaredLoss(score, label);
    };
    const float score = FmScore(params.data(), values.data(), nnz, k, bias, factor_sums.data());
    const float score_gradient =
        logistic ? LogisticGradient(score, label) : SquaredGradient(score, label);
    std::vector<float> param_gradients(nnz * width, 0.0f);
    float bias_gradient = 0.0f;
    FmGradients(params.data(), values.data(), nnz, k, factor_sums.data(), score_gradient,
                param_gradients.data(), &bias_gradient);

    const std::string where = "seed " + std::to_string(seed);
    for (int i = 0; i < nnz * width; ++i) {
      ExpectGradientNear(param_gradients[i], CentralDifference(loss, &params[i], 1e-2f),
                         where + " param " + std::to_string(i));
    }
    ExpectGradientNear(bias_gradient, CentralDifference(loss, &bias, 1e-2f), where + " bias");
  }
}

// --- Rows shared by a group of lanes, as the CUDA row kernel runs them ---
//
// The kernel gives each row `group` lanes; lane l takes factors (or classes)
// l, l + group, ... and the lanes' partial sums meet in a butterfly of
// shuffles. These tests run the same calls and the same butterfly on the CPU.

// The butterfly the kernel's __shfl_xor_sync loop computes: after it every
// lane holds the same total, summed in this order.
std::vector<float> Butterfly(std::vector<float> partials) {
  const int group = static_cast<int>(partials.size());
  for (int offset = group / 2; offset > 0; offset /= 2) {
    std::vector<float> next(partials);
    for (int lane = 0; lane < group; ++lane) next[lane] = partials[lane] + partials[lane ^ offset];
    partials = next;
  }
  return partials;
}

TEST(FactorizationMachine, LanesSharingARowGiveTheWholeRowsScoreAndGradients) {
  for (unsigned seed = 1; seed <= 30; ++seed) {
    std::mt19937 random(seed);
    const int nnz = UniformInt(&random, 1, 30);
    const int k = UniformInt(&random, 1, 64);
    const int group = 1 << UniformInt(&random, 0, 5);  // 1 .. 32 lanes
    const int width = FmRowWidth(k);
    std::vector<float> params = Uniform(&random, nnz * width, -0.5f, 0.5f);
    std::vector<float> values = Uniform(&random, nnz, -1.0f, 1.0f);
    const float bias = 0.25f;
    std::vector<float> whole_sums(k);
    const float whole = FmScore(params.data(), values.data(), nnz, k, bias, whole_sums.data());

    std::vector<float> lane_sums(k, -99.0f), sums_squared(group), squares(group), linear(group);
    for (int lane = 0; lane < group; ++lane) {
      FmScoreTerms(params.data(), values.data(), nnz, k, lane, group, lane_sums.data(),
                   &linear[lane], &sums_squared[lane], &squares[lane]);
    }
    sums_squared = Butterfly(sums_squared);
    squares = Butterfly(squares);
    const std::string where = "seed " + std::to_string(seed) + " k " + std::to_string(k) +
                              " group " + std::to_string(group);
    for (int lane = 1; lane < group; ++lane) {
      ASSERT_EQ(sums_squared[lane], sums_squared[0]) << where;  // every lane agrees, bitwise
      ASSERT_EQ(linear[lane], linear[0]) << where;
    }
    // Each S_f is one lane's sum in the CPU's order: bitwise the same.
    for (int f = 0; f < k; ++f) ASSERT_EQ(lane_sums[f], whole_sums[f]) << where << " f " << f;
    const float shared = FmCombine(bias, linear[0], sums_squared[0], squares[0]);
    // The sums over factors are taken in another order: equal up to rounding,
    // which scales with the two sums the score is half the difference of.
    const double bound = 1e-5 * std::max(1.0f, sums_squared[0] + squares[0]);
    EXPECT_NEAR(shared, whole, bound) << where;
    EXPECT_NEAR(shared, FmScoreNaive(params.data(), values.data(), nnz, k, bias), bound) << where;

    // Gradients are element-wise: the lanes together write exactly FmGradients'.
    const float score_gradient = 0.3f;
    std::vector<float> whole_gradients(nnz * width, 0.0f), lane_gradients(nnz * width, 0.0f);
    float whole_bias = 0.0f, lane_bias = 0.0f;
    FmGradients(params.data(), values.data(), nnz, k, whole_sums.data(), score_gradient,
                whole_gradients.data(), &whole_bias);
    for (int lane = 0; lane < group; ++lane) {
      FmGradientTerms(params.data(), values.data(), nnz, k, lane, group, lane_sums.data(),
                      score_gradient, lane_gradients.data(), lane == 0 ? &lane_bias : nullptr);
    }
    EXPECT_EQ(lane_gradients, whole_gradients) << where;
    EXPECT_EQ(lane_bias, whole_bias) << where;
  }
}

TEST(Linear, LanesSharingARowGiveExactlyTheWholeRowsScoresAndGradients) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 random(seed);
    const int nnz = UniformInt(&random, 1, 30);
    const int classes = UniformInt(&random, 1, 40);
    const int group = 1 << UniformInt(&random, 0, 5);
    std::vector<float> weights = Uniform(&random, nnz * classes, -1.0f, 1.0f);
    std::vector<float> values = Uniform(&random, nnz, -1.0f, 1.0f);
    std::vector<float> bias = Uniform(&random, classes, -0.5f, 0.5f);
    std::vector<float> whole(classes), shared(classes, -99.0f);
    LinearScores(weights.data(), values.data(), nnz, classes, bias.data(), whole.data());
    for (int lane = 0; lane < group; ++lane) {
      LinearScoreTerms(weights.data(), values.data(), nnz, classes, lane, group, bias.data(),
                       shared.data());
    }
    const std::string where = "seed " + std::to_string(seed);
    EXPECT_EQ(shared, whole) << where;
    std::vector<float> score_gradient = Uniform(&random, classes, -1.0f, 1.0f);
    std::vector<float> whole_gradients(nnz * classes, 0.0f), lane_gradients(nnz * classes, 0.0f);
    std::vector<float> whole_bias(classes, 0.0f), lane_bias(classes, 0.0f);
    LinearGradients(values.data(), nnz, classes, score_gradient.data(), whole_gradients.data(),
                    whole_bias.data());
    for (int lane = 0; lane < group; ++lane) {
      LinearGradientTerms(values.data(), nnz, classes, lane, group, score_gradient.data(),
                          lane_gradients.data(), lane_bias.data());
    }
    EXPECT_EQ(lane_gradients, whole_gradients) << where;
    EXPECT_EQ(lane_bias, whole_bias) << where;
  }
}

TEST(Losses, ExampleLossIsTheLossItNames) {
  float gradient[3], prediction[3];
  const float score = 0.7f;
  EXPECT_EQ(ExampleLoss(LossKind::kLogistic, &score, 1, 1.0f, gradient, prediction),
            LogisticLoss(score, 1.0f));
  EXPECT_EQ(gradient[0], LogisticGradient(score, 1.0f));
  EXPECT_EQ(prediction[0], Sigmoid(score));
  EXPECT_EQ(ExampleLoss(LossKind::kSquared, &score, 1, 2.0f, gradient, nullptr),
            SquaredLoss(score, 2.0f));
  EXPECT_EQ(gradient[0], SquaredGradient(score, 2.0f));
  const float scores[3] = {0.5f, -1.0f, 2.0f};
  float expected[3];
  EXPECT_EQ(ExampleLoss(LossKind::kSoftmax, scores, 3, 2.0f, gradient, prediction),
            SoftmaxLoss(scores, 3, 2));
  SoftmaxGradient(scores, 3, 2, expected);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(gradient[c], expected[c]) << c;
  Softmax(scores, 3, expected);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(prediction[c], expected[c]) << c;
}

}  // namespace
}  // namespace keel
