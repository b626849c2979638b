#include "kv/optimizer.h"

#include <cmath>

#include "kv/error.h"

namespace keel {

void SgdOptimizer::Update(float* __restrict row, const float* __restrict gradient, int width) {
  const float rate = options_.learning_rate;
  const float decay = options_.l2;
  if (decay == 0.0f) {
    for (int i = 0; i < width; ++i) row[i] -= rate * gradient[i];
  } else {
    for (int i = 0; i < width; ++i) row[i] -= rate * (gradient[i] + decay * row[i]);
  }
}

void Optimizer::UpdateRows(float* const* rows, const float* gradients, size_t count, int width) {
  for (size_t i = 0; i < count; ++i) Update(rows[i], gradients + i * width, width);
}

void SgdOptimizer::UpdateRows(float* const* rows, const float* gradients, size_t count,
                              int width) {
  const float rate = options_.learning_rate;
  const float decay = options_.l2;
  if (width == 1 && decay == 0.0f) {
    for (size_t i = 0; i < count; ++i) *rows[i] -= rate * gradients[i];
    return;
  }
  if (width > 64) {  // long rows: the vectorized loop pays
    for (size_t i = 0; i < count; ++i) Update(rows[i], gradients + i * width, width);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    float* row = rows[i];
    const float* gradient = gradients + i * width;
    for (int j = 0; j < width; ++j) row[j] -= rate * (gradient[j] + decay * row[j]);
  }
}

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& options) {
  if (!std::isfinite(options.learning_rate) || options.learning_rate <= 0) {
    throw MakeError("learning rate ", options.learning_rate, " is not a positive number");
  }
  if (options.l2 < 0 || options.l1 < 0) {
    throw MakeError("l1 and l2 penalties must not be negative (l1 ", options.l1, ", l2 ",
                    options.l2, ")");
  }
  if (options.name == "sgd") return std::make_unique<SgdOptimizer>(options);
  throw MakeError("unknown optimizer '", options.name, "' (--optimizer): expected sgd");
}

}  // namespace keel
