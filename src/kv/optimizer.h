// Optimizers: how a server applies a pushed gradient to a parameter row.
//
// A row in a ParameterTable holds the weights followed by the optimizer's own
// state (none for SGD; accumulators for Adagrad, Adam, FTRL). The server owns
// the optimizer; workers only push gradients.
#ifndef KEEL_KV_OPTIMIZER_H_
#define KEEL_KV_OPTIMIZER_H_

#include <cstddef>
#include <memory>
#include <string>

namespace keel {

struct OptimizerOptions {
  std::string name = "sgd";
  float learning_rate = 0.01f;
  float l1 = 0.0f;  // L1 penalty, for the optimizers that support it
  float l2 = 0.0f;  // L2 penalty (weight decay)
};

// Not synchronized: a server applies updates from one thread.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  // Floats of optimizer state kept after `weight_width` weights in each row.
  virtual int StateWidth(int weight_width) const = 0;
  // Applies `gradient` (width floats) to `row`: row[0, width) are the weights,
  // then StateWidth(width) floats of state, zero on a new row.
  virtual void Update(float* row, const float* gradient, int width) = 0;
  // Applies gradients[i * width, (i + 1) * width) to rows[i] for each of
  // `count` rows. The default calls Update per row.
  virtual void UpdateRows(float* const* rows, const float* gradients, size_t count, int width);
};

// Plain stochastic gradient descent: w -= lr * (g + l2 * w).
class SgdOptimizer : public Optimizer {
 public:
  explicit SgdOptimizer(const OptimizerOptions& options) : options_(options) {}
  const char* name() const override { return "sgd"; }
  int StateWidth(int /*weight_width*/) const override { return 0; }
  void Update(float* row, const float* gradient, int width) override;
  void UpdateRows(float* const* rows, const float* gradients, size_t count, int width) override;

 private:
  OptimizerOptions options_;
};

// The optimizer `options.name` names. Throws Error for an unknown name or a
// learning rate that is not positive and finite.
std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& options);

}  // namespace keel

#endif  // KEEL_KV_OPTIMIZER_H_
