#include "kv/gradient_shaping.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace keel {
namespace {

// Shapes each gradient into a buffer of its own, then hands it to the inner
// optimizer; rows and state are the inner optimizer's.
class GradientShapingOptimizer final : public Optimizer {
 public:
  GradientShapingOptimizer(const OptimizerOptions& options, std::unique_ptr<Optimizer> inner)
      : rescale_(options.rescale_grad), clip_(options.clip_gradient), inner_(std::move(inner)) {}

  const char* name() const override { return inner_->name(); }
  int StateWidth(int weight_width) const override { return inner_->StateWidth(weight_width); }

  void Update(float* row, const float* gradient, int width) override {
    inner_->Update(row, Shaped(gradient, static_cast<size_t>(width)), width);
  }

  void UpdateRows(float* const* rows, const float* gradients, size_t count, int width,
                  float step_scale) override {
    inner_->UpdateRows(rows, Shaped(gradients, count * static_cast<size_t>(width)), count, width,
                       step_scale);
  }

 private:
  const float* Shaped(const float* gradient, size_t size) {
    shaped_.resize(size);
    ShapeGradient(gradient, size, rescale_, clip_, shaped_.data());
    return shaped_.data();
  }

  float rescale_;
  float clip_;
  std::unique_ptr<Optimizer> inner_;
  std::vector<float> shaped_;
};

}  // namespace

bool ShapesGradients(const OptimizerOptions& options) {
  return options.rescale_grad != 1.0f || options.clip_gradient > 0.0f;
}

void ShapeGradient(const float* gradient, size_t count, float rescale, float clip_gradient,
                   float* out) {
  if (clip_gradient > 0.0f) {
    for (size_t i = 0; i < count; ++i) {
      out[i] = std::clamp(rescale * gradient[i], -clip_gradient, clip_gradient);
    }
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = rescale * gradient[i];
  }
}

std::unique_ptr<Optimizer> WithGradientShaping(const OptimizerOptions& options,
                                               std::unique_ptr<Optimizer> inner) {
  return std::make_unique<GradientShapingOptimizer>(options, std::move(inner));
}

}  // namespace keel
