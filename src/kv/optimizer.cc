#include "kv/optimizer.h"

#include <cmath>

#include "kv/error.h"

namespace keel {

void SgdOptimizer::Update(float* row, const float* gradient, int width) {
  const float rate = options_.learning_rate;
  const float decay = options_.l2;
  if (decay == 0.0f) {
    for (int i = 0; i < width; ++i) row[i] -= rate * gradient[i];
  } else {
    for (int i = 0; i < width; ++i) row[i] -= rate * (gradient[i] + decay * row[i]);
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
