// SortByScore against a comparison sort: the same scores in the same order,
// each with its flag, on both sides of the radix sort's threshold.
#include "models/score_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "models/metrics.h"

namespace keel {
namespace {

// Scores of every kind a model makes: ties, both zeros, negatives (margins),
// subnormals and infinities, and probabilities.
std::vector<ScoredExample> MixedScores(size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max()};
  std::vector<ScoredExample> examples(n);
  for (size_t i = 0; i < n; ++i) {
    float score = uniform(random);
    if (i % 7 == 0) score = specials[random() % 10];
    if (i % 5 == 0) score = std::round(score * 4.0f) / 4.0f;  // ties
    examples[i] = {score, random() % 3 == 0};
  }
  return examples;
}

// The scores in order, and each distinct score's count of positives: what the
// metrics read (an order within ties is free).
struct Summary {
  std::vector<float> scores;
  std::vector<std::pair<float, int>> positives_by_score;
};

Summary Summarize(const std::vector<ScoredExample>& examples) {
  Summary summary;
  for (const ScoredExample& e : examples) {
    summary.scores.push_back(e.score);
    if (summary.positives_by_score.empty() || summary.positives_by_score.back().first != e.score) {
      summary.positives_by_score.push_back({e.score, 0});
    }
    summary.positives_by_score.back().second += e.positive ? 1 : 0;
  }
  return summary;
}

TEST(SortByScore, OrdersAsAComparisonSortDoesKeepingEachExamplesFlag) {
  for (const size_t n : {0, 1, 2, 100, 511, 512, 513, 5000, 100000}) {
    for (const bool descending : {false, true}) {
      std::vector<ScoredExample> examples = MixedScores(n, static_cast<unsigned>(n) + descending);
      std::vector<ScoredExample> expected = examples;
      std::stable_sort(expected.begin(), expected.end(),
                       [descending](const ScoredExample& a, const ScoredExample& b) {
                         return descending ? a.score > b.score : a.score < b.score;
                       });
      SortByScore(&examples, descending);
      const Summary got = Summarize(examples), want = Summarize(expected);
      ASSERT_EQ(got.scores, want.scores) << n << " examples, descending " << descending;
      ASSERT_EQ(got.positives_by_score, want.positives_by_score)
          << n << " examples, descending " << descending;
    }
  }
}

TEST(SortByScore, KeepsBothZerosSideBySideAsOneTie) {
  // Zeros of both signs among other scores on the radix path: every zero
  // between the negatives and the positives, each example's sign and flag
  // kept (the same count of each).
  std::vector<ScoredExample> examples;
  for (int i = 0; i < 1000; ++i) {
    const float zero = i % 2 == 0 ? -0.0f : 0.0f;
    examples.push_back({i % 3 == 0 ? zero : static_cast<float>(i % 7) - 3.0f, i % 4 == 0});
  }
  const auto count = [](const std::vector<ScoredExample>& v, bool negative_zero, bool positive) {
    return std::count_if(v.begin(), v.end(), [&](const ScoredExample& e) {
      return e.score == 0.0f && std::signbit(e.score) == negative_zero && e.positive == positive;
    });
  };
  std::vector<ScoredExample> sorted = examples;
  SortByScore(&sorted);
  for (const bool negative_zero : {false, true}) {
    for (const bool positive : {false, true}) {
      EXPECT_EQ(count(sorted, negative_zero, positive), count(examples, negative_zero, positive));
    }
  }
  const auto first_zero = std::find_if(sorted.begin(), sorted.end(),
                                       [](const ScoredExample& e) { return e.score == 0.0f; });
  const auto past_zeros = std::find_if(first_zero, sorted.end(),
                                       [](const ScoredExample& e) { return e.score != 0.0f; });
  EXPECT_TRUE(std::all_of(sorted.begin(), first_zero,
                          [](const ScoredExample& e) { return e.score < 0.0f; }));
  EXPECT_TRUE(
      std::all_of(past_zeros, sorted.end(), [](const ScoredExample& e) { return e.score > 0.0f; }));
}

TEST(SortByScore, RocAucOfTiedZerosIsOneHalfOnEitherPath) {
  // -0 and +0 scores are one tie: AUC 0.5 however the labels fall among them.
  for (const int n : {8, 2000}) {
    std::vector<float> scores, labels;
    for (int i = 0; i < n; ++i) {
      scores.push_back(i < n / 2 ? -0.0f : 0.0f);
      labels.push_back(i < n / 2 ? 0.0f : 1.0f);
    }
    EXPECT_DOUBLE_EQ(RocAuc(scores, labels), 0.5) << n << " examples";
  }
}

}  // namespace
}  // namespace keel
