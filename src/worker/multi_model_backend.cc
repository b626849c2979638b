#include "worker/multi_model_backend.h"

#include <algorithm>

#include "base/error.h"

namespace keel {

MultiModelBackend::MultiModelBackend(const Hyperparameters& hyperparameters,
                                     std::unique_ptr<ComputeBackend> one_model)
    : ComputeBackend(hyperparameters), one_model_(std::move(one_model)) {
  models_ = hyperparameters.num_models;
  if (one_model_ == nullptr || one_model_->num_models() != 1 ||
      one_model_->weight_width() != width_ || one_model_->bias_width() != bias_width_) {
    throw MakeError("a multi-model backend needs a backend of one model of the same shape");
  }
  losses_.assign(models_, 0.0);
}

std::string MultiModelBackend::name() const {
  return one_model_->name() + ", " + std::to_string(models_) + " models";
}

void MultiModelBackend::Gather(size_t keys, const float* weights, const float* bias, int k) {
  const size_t all = static_cast<size_t>(weight_width());
  model_weights_.resize(keys * width_);
  for (size_t key = 0; key < keys; ++key) {
    std::copy_n(weights + key * all + static_cast<size_t>(k) * width_, width_,
                model_weights_.begin() + key * width_);
  }
  model_bias_.assign(bias + static_cast<size_t>(k) * bias_width_,
                     bias + static_cast<size_t>(k + 1) * bias_width_);
}

double MultiModelBackend::Predict(const PreparedBatch& batch, const float* weights,
                                  const float* bias, std::vector<float>* predictions) {
  const size_t rows = batch.batch.rows();
  const size_t width = static_cast<size_t>(prediction_width());
  predictions->resize(rows * width);
  double total = 0.0;
  for (int k = 0; k < models_; ++k) {
    Gather(batch.keys.size(), weights, bias, k);
    losses_[k] =
        one_model_->Predict(batch, model_weights_.data(), model_bias_.data(), &model_predictions_);
    total += losses_[k];
    for (size_t row = 0; row < rows; ++row) {
      std::copy_n(model_predictions_.begin() + row * classes_, classes_,
                  predictions->begin() + row * width + static_cast<size_t>(k) * classes_);
    }
  }
  return total;
}

double MultiModelBackend::Gradients(const PreparedBatch& batch, const float* weights,
                                    const float* bias, std::vector<float>* weight_gradients,
                                    std::vector<float>* bias_gradient) {
  const size_t keys = batch.keys.size();
  const size_t all = static_cast<size_t>(weight_width());
  weight_gradients->resize(keys * all);
  bias_gradient->resize(static_cast<size_t>(this->bias_width()));
  double total = 0.0;
  for (int k = 0; k < models_; ++k) {
    Gather(keys, weights, bias, k);
    losses_[k] = one_model_->Gradients(batch, model_weights_.data(), model_bias_.data(),
                                       &model_weight_gradients_, &model_bias_gradient_);
    total += losses_[k];
    for (size_t key = 0; key < keys; ++key) {
      std::copy_n(model_weight_gradients_.begin() + key * width_, width_,
                  weight_gradients->begin() + key * all + static_cast<size_t>(k) * width_);
    }
    std::copy_n(model_bias_gradient_.begin(), bias_width_,
                bias_gradient->begin() + static_cast<size_t>(k) * bias_width_);
  }
  return total;
}

std::vector<double> MultiModelBackend::LastModelLosses(double last_total) const {
  (void)last_total;
  return losses_;
}

}  // namespace keel
