#include "worker/cpu_model.h"

#include <cstring>

#include "kv/error.h"
#include "models/factorization_machine.h"
#include "models/linear.h"
#include "models/losses.h"

namespace keel {

CpuModel::CpuModel(const Hyperparameters& hyperparameters)
    : hyperparameters_(hyperparameters),
      factorization_(hyperparameters.job == JobKind::kFactorizationMachines),
      classes_(hyperparameters.classes()),
      width_(hyperparameters.weight_width()),
      bias_width_(factorization_ ? 1 : hyperparameters.classes()) {}

double CpuModel::Predict(const PreparedBatch& batch, const float* weights, const float* bias,
                         std::vector<float>* predictions) const {
  return Run(batch, weights, bias, predictions, nullptr, nullptr);
}

double CpuModel::Gradients(const PreparedBatch& batch, const float* weights, const float* bias,
                           std::vector<float>* weight_gradients,
                           std::vector<float>* bias_gradient) const {
  return Run(batch, weights, bias, nullptr, weight_gradients, bias_gradient);
}

double CpuModel::Run(const PreparedBatch& prepared, const float* weights, const float* bias,
                     std::vector<float>* predictions, std::vector<float>* weight_gradients,
                     std::vector<float>* bias_gradient) const {
  const Batch& batch = prepared.batch;
  const size_t rows = batch.rows();
  const bool backward = weight_gradients != nullptr;
  if (predictions) predictions->assign(rows * classes_, 0.0f);
  if (backward) {
    weight_gradients->assign(prepared.keys.size() * width_, 0.0f);
    bias_gradient->assign(bias_width_, 0.0f);
  }
  const PredictorType type = hyperparameters_.predictor_type;
  const bool use_bias = hyperparameters_.use_bias;
  std::vector<float> params, gradients, scores(classes_), score_gradient(classes_);
  std::vector<float> factor_sums(factorization_ ? hyperparameters_.num_factors : 0);
  std::vector<float> local_bias_gradient(bias_width_);
  double loss = 0;
  for (size_t r = 0; r < rows; ++r) {
    const size_t begin = batch.row_offsets[r];
    const int nnz = static_cast<int>(batch.row_offsets[r + 1] - begin);
    const float* values = batch.values.data() + begin;
    // Gather the row's parameters from the batch's pulled rows.
    params.resize(static_cast<size_t>(nnz) * width_);
    for (int j = 0; j < nnz; ++j) {
      std::memcpy(params.data() + static_cast<size_t>(j) * width_,
                  weights + static_cast<size_t>(prepared.positions[begin + j]) * width_,
                  sizeof(float) * width_);
    }
    const float label = batch.labels[r];
    if (factorization_) {
      scores[0] = FmScore(params.data(), values, nnz, hyperparameters_.num_factors,
                          use_bias ? bias[0] : 0.0f, factor_sums.data());
    } else {
      LinearScores(params.data(), values, nnz, classes_, use_bias ? bias : nullptr, scores.data());
    }
    switch (type) {
      case PredictorType::kBinaryClassifier:
        loss += LogisticLoss(scores[0], label);
        score_gradient[0] = LogisticGradient(scores[0], label);
        if (predictions) (*predictions)[r] = Sigmoid(scores[0]);
        break;
      case PredictorType::kRegressor:
        loss += SquaredLoss(scores[0], label);
        score_gradient[0] = SquaredGradient(scores[0], label);
        if (predictions) (*predictions)[r] = scores[0];
        break;
      case PredictorType::kMulticlassClassifier: {
        const int class_id = LabelToClass(label, classes_);
        if (class_id < 0) {
          throw MakeError("label ", label, " of an example is not a class id in 0..", classes_ - 1,
                          " (--num_classes ", classes_, ")");
        }
        loss += SoftmaxLoss(scores.data(), classes_, class_id);
        SoftmaxGradient(scores.data(), classes_, class_id, score_gradient.data());
        if (predictions) Softmax(scores.data(), classes_, predictions->data() + r * classes_);
        break;
      }
    }
    if (!backward) continue;
    // The mean loss's gradient: each example weighs 1/rows.
    for (int c = 0; c < classes_; ++c) score_gradient[c] /= static_cast<float>(rows);
    gradients.assign(static_cast<size_t>(nnz) * width_, 0.0f);
    std::fill(local_bias_gradient.begin(), local_bias_gradient.end(), 0.0f);
    if (factorization_) {
      FmGradients(params.data(), values, nnz, hyperparameters_.num_factors, factor_sums.data(),
                  score_gradient[0], gradients.data(), local_bias_gradient.data());
    } else {
      LinearGradients(values, nnz, classes_, score_gradient.data(), gradients.data(),
                      local_bias_gradient.data());
    }
    // Scatter-add into the batch's unique keys.
    for (int j = 0; j < nnz; ++j) {
      float* target =
          weight_gradients->data() + static_cast<size_t>(prepared.positions[begin + j]) * width_;
      const float* source = gradients.data() + static_cast<size_t>(j) * width_;
      for (int c = 0; c < width_; ++c) target[c] += source[c];
    }
    if (use_bias) {
      for (int c = 0; c < bias_width_; ++c) (*bias_gradient)[c] += local_bias_gradient[c];
    }
  }
  return loss;
}

}  // namespace keel
