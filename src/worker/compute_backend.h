// ComputeBackend: where a worker runs a built-in model's forward and backward
// pass over a minibatch, on the CPU (CpuModel) or a CUDA device (CudaModel).
//
// Every backend calls the same per-example functions of models/ and returns
// the same quantities for the same batch: the summed loss, the predictions,
// and the mean loss's gradient per unique key of the batch, reduced before it
// is pushed. A backend is not safe for concurrent use: one thread calls it.
// MakeComputeBackend (worker/compute_backend_factory.h) makes the one a
// device names.
#ifndef KEEL_WORKER_COMPUTE_BACKEND_H_
#define KEEL_WORKER_COMPUTE_BACKEND_H_

#include <string>
#include <vector>

#include "worker/hyperparameters.h"
#include "worker/prepared_batch.h"

namespace keel {

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // "cpu (4 threads)", "cuda:0 (NVIDIA A100-SXM4-40GB)": for logs.
  virtual std::string name() const = 0;

  // Outputs per example: class probabilities for multiclass, else 1 (the
  // probability of class 1 for binary, the prediction for regression); with
  // several models (num_models), each model's in turn.
  int prediction_width() const { return models_ * classes_; }
  // Floats per key in the weight table, and in the bias: every model's.
  int weight_width() const { return models_ * width_; }
  int bias_width() const { return models_ * bias_width_; }
  // Models computed side by side (Hyperparameters::num_models).
  int num_models() const { return models_; }

  // The summed loss of each model in the last Predict or Gradients call,
  // whose total over the models was `last_total`: {last_total} for one model.
  virtual std::vector<double> LastModelLosses(double last_total) const { return {last_total}; }

  // `batch` comes from PrepareKeys. `weights` holds batch.keys.size() x
  // weight_width() floats (the rows of the batch's keys), `bias` bias_width()
  // floats. Writes the predictions (rows x prediction_width) and returns the
  // summed loss (of every model). Throws Error for a multiclass label that is not a class id,
  // or when the device fails.
  virtual double Predict(const PreparedBatch& batch, const float* weights, const float* bias,
                         std::vector<float>* predictions) = 0;

  // The same forward pass, then the gradients of the mean loss: weight_gradients
  // (keys x weight_width, one row per unique key) and bias_gradient
  // (bias_width). Returns the summed loss.
  virtual double Gradients(const PreparedBatch& batch, const float* weights, const float* bias,
                           std::vector<float>* weight_gradients,
                           std::vector<float>* bias_gradient) = 0;

  // A hint: `batch` is the next one to be computed. A device backend starts
  // copying its structure (everything but the weights, which are still being
  // pulled) while the current batch computes. `batch` must stay unchanged
  // until it has been computed. The CPU backend ignores it.
  virtual void Prefetch(const PreparedBatch& batch) { (void)batch; }

  // From now on each example's loss and gradient weigh its class's weight
  // (LossFunction::class_weights: binary {negative, positive}, multiclass one
  // per class); empty: every example weighs 1. Throws Error for a count that
  // does not fit the predictor type.
  virtual void SetClassWeights(const std::vector<float>& weights);

 protected:
  explicit ComputeBackend(const Hyperparameters& hyperparameters);

  // Throws Error unless `batch` carries its key set (PrepareKeys).
  static void CheckKeySet(const PreparedBatch& batch);

  Hyperparameters hyperparameters_;
  LossFunction loss_;                 // hyperparameters_.loss_function(), resolved once
  std::vector<float> class_weights_;  // what loss_.class_weights points at on the host
  bool factorization_;
  int classes_;     // of one model
  int width_;       // of one model
  int bias_width_;  // of one model
  int models_ = 1;
};

// True when every row of `batch` lists all of the batch's keys in the same
// order: a dense matrix (CSV and dense recordIO data), where products of
// whole matrices (Eigen, cuBLAS) beat the per-row loops.
bool IsDenseBatch(const PreparedBatch& batch);

}  // namespace keel

#endif  // KEEL_WORKER_COMPUTE_BACKEND_H_
