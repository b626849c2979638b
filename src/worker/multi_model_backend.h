// MultiModelBackend: the forward and backward pass of num_models models over
// one minibatch, for a job that trains several models side by side
// (Hyperparameters::num_models).
//
// The minibatch is read, parsed and pulled once: its rows hold every model's
// weights side by side (model k's in columns [k * w, (k + 1) * w)). For each
// model in turn the backend gathers that model's columns and runs one model's
// backend on them (the CPU's or a CUDA device's, so both compute K models),
// then puts the gradients and predictions back in place. Models share
// everything but their weights: the loss, the data, the device.
// MakeComputeBackend uses it only for a linear learner's several models on a
// CUDA device: the CPU backend computes any job's models in one pass, and the
// CUDA backend a factorization machine's; tests compare those passes with it.
#ifndef KEEL_WORKER_MULTI_MODEL_BACKEND_H_
#define KEEL_WORKER_MULTI_MODEL_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "worker/compute_backend.h"

namespace keel {

class MultiModelBackend : public ComputeBackend {
 public:
  // `hyperparameters` has num_models > 1; `one_model` computes one of them
  // (built from hyperparameters.Model(0): the models differ only in the
  // servers' optimizer settings).
  MultiModelBackend(const Hyperparameters& hyperparameters,
                    std::unique_ptr<ComputeBackend> one_model);

  std::string name() const override;
  double Predict(const PreparedBatch& batch, const float* weights, const float* bias,
                 std::vector<float>* predictions) override;
  double Gradients(const PreparedBatch& batch, const float* weights, const float* bias,
                   std::vector<float>* weight_gradients,
                   std::vector<float>* bias_gradient) override;
  void Prefetch(const PreparedBatch& batch) override { one_model_->Prefetch(batch); }
  void SetClassWeights(const std::vector<float>& weights) override {
    one_model_->SetClassWeights(weights);
  }
  std::vector<double> LastModelLosses(double last_total) const override;

 private:
  // Model k's columns of the batch's `weights` and of `bias` into
  // model_weights_ and model_bias_.
  void Gather(size_t keys, const float* weights, const float* bias, int k);

  std::unique_ptr<ComputeBackend> one_model_;
  std::vector<double> losses_;  // the last call's, per model
  std::vector<float> model_weights_, model_bias_, model_predictions_;
  std::vector<float> model_weight_gradients_, model_bias_gradient_;
};

}  // namespace keel

#endif  // KEEL_WORKER_MULTI_MODEL_BACKEND_H_
