// rescale_grad and clip_gradient (kv/gradient_shaping.h): the servers shape a
// pushed gradient before any optimizer's step; the weight decay is not shaped.
#include "kv/gradient_shaping.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "kv/optimizer.h"

namespace keel {
namespace {

OptimizerOptions Sgd(float learning_rate, float rescale_grad, float clip_gradient) {
  OptimizerOptions options;
  options.name = "sgd";
  options.learning_rate = learning_rate;
  options.rescale_grad = rescale_grad;
  options.clip_gradient = clip_gradient;
  return options;
}

TEST(ShapeGradient, RescalesThenClipsEachCoordinate) {
  const float gradient[4] = {4.0f, -1.0f, 0.5f, -6.0f};
  float out[4];
  ShapeGradient(gradient, 4, 0.5f, 1.0f, out);
  EXPECT_FLOAT_EQ(out[0], 1.0f);   // 2, clipped
  EXPECT_FLOAT_EQ(out[1], -0.5f);  // inside the box
  EXPECT_FLOAT_EQ(out[2], 0.25f);  // inside the box
  EXPECT_FLOAT_EQ(out[3], -1.0f);  // -3, clipped
}

TEST(ShapeGradient, ZeroClipMeansNoClipping) {
  const float gradient[2] = {100.0f, -300.0f};
  float out[2];
  ShapeGradient(gradient, 2, 2.0f, 0.0f, out);
  EXPECT_FLOAT_EQ(out[0], 200.0f);
  EXPECT_FLOAT_EQ(out[1], -600.0f);
}

TEST(GradientShaping, DefaultsLeaveTheOptimizerUnwrapped) {
  EXPECT_FALSE(ShapesGradients(OptimizerOptions()));
  EXPECT_TRUE(ShapesGradients(Sgd(0.1f, 0.5f, 0.0f)));
  EXPECT_TRUE(ShapesGradients(Sgd(0.1f, 1.0f, 3.0f)));
}

TEST(GradientShaping, SgdStepsWithTheShapedGradient) {
  auto sgd = MakeOptimizer(Sgd(0.1f, 0.5f, 1.0f));
  EXPECT_STREQ(sgd->name(), "sgd");
  EXPECT_EQ(sgd->StateWidth(3), 0);
  float row[3] = {1.0f, 1.0f, 1.0f};
  const float gradient[3] = {4.0f, -1.0f, 0.5f};  // shaped: 1, -0.5, 0.25
  sgd->Update(row, gradient, 3);
  EXPECT_FLOAT_EQ(row[0], 1.0f - 0.1f * 1.0f);
  EXPECT_FLOAT_EQ(row[1], 1.0f + 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(row[2], 1.0f - 0.1f * 0.25f);
}

TEST(GradientShaping, WeightDecayIsAddedAfterClipping) {
  OptimizerOptions options = Sgd(0.1f, 1.0f, 1.0f);
  options.l2 = 0.5f;
  auto sgd = MakeOptimizer(options);
  float row[1] = {2.0f};
  const float gradient[1] = {10.0f};  // clipped to 1; the decay 0.5 * 2 is not clipped
  sgd->Update(row, gradient, 1);
  EXPECT_FLOAT_EQ(row[0], 2.0f - 0.1f * (1.0f + 0.5f * 2.0f));
}

TEST(GradientShaping, EveryRowOfABatchIsShaped) {
  auto sgd = MakeOptimizer(Sgd(1.0f, 0.25f, 0.5f));
  float first[2] = {0.0f, 0.0f};
  float second[2] = {0.0f, 0.0f};
  float* rows[2] = {first, second};
  const float gradients[4] = {1.0f, -8.0f, 0.4f, 2.0f};  // shaped: 0.25, -0.5, 0.1, 0.5
  sgd->UpdateRows(rows, gradients, 2, 2);
  EXPECT_FLOAT_EQ(first[0], -0.25f);
  EXPECT_FLOAT_EQ(first[1], 0.5f);
  EXPECT_FLOAT_EQ(second[0], -0.1f);
  EXPECT_FLOAT_EQ(second[1], -0.5f);
}

TEST(GradientShaping, StatefulOptimizersKeepTheirStateWidth) {
  OptimizerOptions options = Sgd(0.5f, 2.0f, 0.0f);
  options.momentum = 0.9f;  // heavy ball: v = -lr * g; w += v on the first step
  auto momentum = MakeOptimizer(options);
  ASSERT_EQ(momentum->StateWidth(1), 1);
  std::vector<float> row(2, 0.0f);
  const float gradient[1] = {3.0f};  // shaped: 6
  momentum->Update(row.data(), gradient, 1);
  EXPECT_FLOAT_EQ(row[0], -0.5f * 6.0f);
  EXPECT_FLOAT_EQ(row[1], -0.5f * 6.0f);  // the velocity
}

TEST(GradientShaping, BadSettingsAreRefusedNamingTheFlag) {
  for (const auto& [options, flag] : std::vector<std::pair<OptimizerOptions, std::string>>{
           {Sgd(0.1f, 0.0f, 0.0f), "--rescale_grad"},
           {Sgd(0.1f, -1.0f, 0.0f), "--rescale_grad"},
           {Sgd(0.1f, 1.0f, -1.0f), "--clip_gradient"}}) {
    try {
      MakeOptimizer(options);
      ADD_FAILURE() << flag << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace keel
