// CpuModel: a built-in model's forward and backward pass over a minibatch on
// the CPU, using the per-example functions of models/ (the same ones the CUDA
// kernels call).
#ifndef KEEL_WORKER_CPU_MODEL_H_
#define KEEL_WORKER_CPU_MODEL_H_

#include <vector>

#include "worker/batch_stream.h"
#include "worker/hyperparameters.h"

namespace keel {

class CpuModel {
 public:
  explicit CpuModel(const Hyperparameters& hyperparameters);

  // Outputs per example: class probabilities for multiclass, else 1 (the
  // probability of class 1 for binary, the prediction for regression).
  int prediction_width() const { return classes_; }
  int weight_width() const { return width_; }
  int bias_width() const { return bias_width_; }

  // `weights` holds batch.keys.size() x weight_width() floats (the rows of the
  // batch's keys), `bias` bias_width() floats. Writes the predictions (rows x
  // prediction_width) and returns the summed loss. Throws Error for a
  // multiclass label that is not a class id.
  double Predict(const PreparedBatch& batch, const float* weights, const float* bias,
                 std::vector<float>* predictions) const;

  // The same forward pass, then the gradients of the mean loss: weight_gradients
  // (keys x weight_width) and bias_gradient (bias_width). Returns the summed loss.
  double Gradients(const PreparedBatch& batch, const float* weights, const float* bias,
                   std::vector<float>* weight_gradients, std::vector<float>* bias_gradient) const;

 private:
  double Run(const PreparedBatch& batch, const float* weights, const float* bias,
             std::vector<float>* predictions, std::vector<float>* weight_gradients,
             std::vector<float>* bias_gradient) const;

  Hyperparameters hyperparameters_;
  bool factorization_;
  int classes_;
  int width_;
  int bias_width_;
};

}  // namespace keel

#endif  // KEEL_WORKER_CPU_MODEL_H_
