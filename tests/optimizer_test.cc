#include "kv/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kv/error.h"

namespace keel {
namespace {

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

TEST(MakeOptimizer, RejectsUnknownNamesAndBadRates) {
  OptimizerOptions options;
  options.name = "bogus";
  try {
    MakeOptimizer(options);
    FAIL() << "an unknown optimizer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bogus'"), std::string::npos) << e.what();
  }
  options.name = "sgd";
  options.learning_rate = -1;
  EXPECT_THROW(MakeOptimizer(options), Error);
  options.learning_rate = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(MakeOptimizer(options), Error);
}

}  // namespace
}  // namespace keel
