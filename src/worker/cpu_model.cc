#include "worker/cpu_model.h"

#include <Eigen/Core>
#include <cstring>

#include "base/error.h"
#include "models/factorization_machine.h"
#include "models/linear.h"
#include "models/losses.h"

namespace keel {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace

CpuModel::CpuModel(const Hyperparameters& hyperparameters, int threads)
    : ComputeBackend(hyperparameters), pool_(threads), scratch_(pool_.size()) {}

std::string CpuModel::name() const {
  return "cpu (" + std::to_string(pool_.size()) + (pool_.size() == 1 ? " thread)" : " threads)");
}

double CpuModel::Predict(const PreparedBatch& batch, const float* weights, const float* bias,
                         std::vector<float>* predictions) {
  return Run(batch, weights, bias, predictions, nullptr, nullptr);
}

double CpuModel::Gradients(const PreparedBatch& batch, const float* weights, const float* bias,
                           std::vector<float>* weight_gradients,
                           std::vector<float>* bias_gradient) {
  return Run(batch, weights, bias, nullptr, weight_gradients, bias_gradient);
}

void CpuModel::CheckLabels(const Batch& batch, size_t begin, size_t end) const {
  if (hyperparameters_.predictor_type != PredictorType::kMulticlassClassifier) return;
  for (size_t r = begin; r < end; ++r) {
    const float label = batch.labels[r];
    if (LabelToClass(label, classes_) < 0) {
      throw MakeError("label ", label, " of an example is not a class id in 0..", classes_ - 1,
                      " (--num_classes ", classes_, ")");
    }
  }
}

double CpuModel::Run(const PreparedBatch& prepared, const float* weights, const float* bias,
                     std::vector<float>* predictions, std::vector<float>* weight_gradients,
                     std::vector<float>* bias_gradient) {
  const Batch& batch = prepared.batch;
  const size_t rows = batch.rows();
  const size_t keys = prepared.keys.size();
  const bool backward = weight_gradients != nullptr;
  const int parts = pool_.size();
  if (prepared.key_offsets.size() != keys + 1 || prepared.positions.size() != batch.nnz()) {
    throw MakeError("a minibatch reached the model without its key set (PrepareKeys)");
  }
  Outputs out;
  if (predictions) {
    predictions->assign(rows * classes_, 0.0f);
    out.predictions = predictions->data();
  }
  row_losses_.assign(rows, 0.0f);
  out.row_losses = row_losses_.data();
  const bool threaded_sparse = parts > 1 && !(rows > 0 && IsDenseBatch(prepared));
  if (backward) {
    // The threaded sparse pass writes every element: no need to zero them first.
    if (threaded_sparse) {
      weight_gradients->resize(keys * width_);
    } else {
      weight_gradients->assign(keys * width_, 0.0f);
    }
    bias_gradient->assign(bias_width_, 0.0f);
    row_bias_gradients_.assign(rows * bias_width_, 0.0f);
    out.row_bias_gradients = row_bias_gradients_.data();
  }

  if (parts > 1 && !threaded_sparse) {
    // Row 0 lists every key: gather the weights in its order.
    gathered_.resize(keys * width_);
    for (size_t j = 0; j < keys; ++j) {
      std::memcpy(gathered_.data() + j * width_,
                  weights + static_cast<size_t>(prepared.positions[j]) * width_,
                  sizeof(float) * width_);
    }
    if (factorization_) {
      factor_norms_.resize(keys);
      for (size_t j = 0; j < keys; ++j) {
        float norm = 0.0f;
        for (int f = 1; f < width_; ++f)
          norm += gathered_[j * width_ + f] * gathered_[j * width_ + f];
        factor_norms_[j] = norm;
      }
    }
    pool_.Run([&](int part) {
      size_t begin, end;
      PartRange(rows, parts, part, &begin, &end);
      DenseRows(prepared, gathered_.data(), bias, begin, end, &scratch_[part], out);
    });
    if (backward) {
      // The threads' accumulators, added in thread order.
      for (size_t j = 0; j < keys; ++j) {
        float* target =
            weight_gradients->data() + static_cast<size_t>(prepared.positions[j]) * width_;
        for (int part = 0; part < parts; ++part) {
          const float* source = scratch_[part].accumulator.data() + j * width_;
          for (int c = 0; c < width_; ++c) target[c] += source[c];
        }
      }
    }
  } else if (parts == 1) {
    if (backward) out.key_gradients = weight_gradients->data();
    SparseRows(prepared, weights, bias, 0, rows, &scratch_[0], out);
  } else {
    if (backward) {
      slots_.resize(batch.nnz() * width_);
      out.slot_gradients = slots_.data();
    }
    pool_.Run([&](int part) {
      size_t begin, end;
      PartRange(rows, parts, part, &begin, &end);
      SparseRows(prepared, weights, bias, begin, end, &scratch_[part], out);
    });
    if (backward) {
      // Each key's slots, summed in ascending non-zero order: the order the
      // one-thread pass adds them in.
      pool_.Run([&](int part) {
        size_t begin, end;
        PartRange(keys, parts, part, &begin, &end);
        for (size_t u = begin; u < end; ++u) {
          float* target = weight_gradients->data() + u * width_;
          const uint32_t first = prepared.key_offsets[u], last = prepared.key_offsets[u + 1];
          // 0 + the first slot, as the one-thread pass starts from zero.
          const float* source =
              slots_.data() + static_cast<size_t>(prepared.nonzeros_by_key[first]) * width_;
          for (int c = 0; c < width_; ++c) target[c] = 0.0f + source[c];
          for (uint32_t e = first + 1; e < last; ++e) {
            source = slots_.data() + static_cast<size_t>(prepared.nonzeros_by_key[e]) * width_;
            for (int c = 0; c < width_; ++c) target[c] += source[c];
          }
        }
      });
    }
  }

  double loss = 0;
  for (size_t r = 0; r < rows; ++r) loss += row_losses_[r];
  if (backward && hyperparameters_.use_bias) {
    for (size_t r = 0; r < rows; ++r) {
      for (int c = 0; c < bias_width_; ++c) {
        (*bias_gradient)[c] += row_bias_gradients_[r * bias_width_ + c];
      }
    }
  }
  return loss;
}

void CpuModel::SparseRows(const PreparedBatch& prepared, const float* weights, const float* bias,
                          size_t row_begin, size_t row_end, Scratch* scratch,
                          const Outputs& out) const {
  const Batch& batch = prepared.batch;
  CheckLabels(batch, row_begin, row_end);
  const size_t rows = batch.rows();
  const bool backward = out.key_gradients != nullptr || out.slot_gradients != nullptr;
  const LossKind kind = LossKindOf(hyperparameters_.predictor_type);
  const bool use_bias = hyperparameters_.use_bias;
  const int k = hyperparameters_.num_factors;
  std::vector<float>& params = scratch->params;
  std::vector<float>& gradients = scratch->gradients;
  std::vector<float>& scores = scratch->scores;
  std::vector<float>& score_gradient = scratch->score_gradient;
  std::vector<float>& factor_sums = scratch->factor_sums;
  scores.resize(classes_);
  score_gradient.resize(classes_);
  factor_sums.resize(factorization_ ? k : 0);
  for (size_t r = row_begin; r < row_end; ++r) {
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
    if (factorization_) {
      scores[0] =
          FmScore(params.data(), values, nnz, k, use_bias ? bias[0] : 0.0f, factor_sums.data());
    } else {
      LinearScores(params.data(), values, nnz, classes_, use_bias ? bias : nullptr, scores.data());
    }
    out.row_losses[r] =
        ExampleLoss(kind, scores.data(), classes_, batch.labels[r], score_gradient.data(),
                    out.predictions ? out.predictions + r * classes_ : nullptr);
    if (!backward) continue;
    // The mean loss's gradient: each example weighs 1/rows.
    for (int c = 0; c < classes_; ++c) score_gradient[c] /= static_cast<float>(rows);
    // Straight into this row's own slots, or into scratch and then into the keys.
    float* row_gradients;
    if (out.slot_gradients != nullptr) {
      row_gradients = out.slot_gradients + begin * width_;
      std::fill(row_gradients, row_gradients + static_cast<size_t>(nnz) * width_, 0.0f);
    } else {
      gradients.assign(static_cast<size_t>(nnz) * width_, 0.0f);
      row_gradients = gradients.data();
    }
    float* row_bias = out.row_bias_gradients + r * bias_width_;
    if (factorization_) {
      FmGradients(params.data(), values, nnz, k, factor_sums.data(), score_gradient[0],
                  row_gradients, row_bias);
    } else {
      LinearGradients(values, nnz, classes_, score_gradient.data(), row_gradients, row_bias);
    }
    if (out.key_gradients == nullptr) continue;
    // Scatter-add into the batch's unique keys.
    for (int j = 0; j < nnz; ++j) {
      float* target =
          out.key_gradients + static_cast<size_t>(prepared.positions[begin + j]) * width_;
      const float* source = row_gradients + static_cast<size_t>(j) * width_;
      for (int c = 0; c < width_; ++c) target[c] += source[c];
    }
  }
}

void CpuModel::DenseRows(const PreparedBatch& prepared, const float* gathered, const float* bias,
                         size_t row_begin, size_t row_end, Scratch* scratch,
                         const Outputs& out) const {
  const Batch& batch = prepared.batch;
  CheckLabels(batch, row_begin, row_end);
  const size_t rows = batch.rows();
  const Eigen::Index keys = static_cast<Eigen::Index>(prepared.keys.size());
  const Eigen::Index count = static_cast<Eigen::Index>(row_end - row_begin);
  const bool backward = out.row_bias_gradients != nullptr;
  const LossKind kind = LossKindOf(hyperparameters_.predictor_type);
  const bool use_bias = hyperparameters_.use_bias;
  const int k = hyperparameters_.num_factors;
  if (backward) scratch->accumulator.assign(static_cast<size_t>(keys) * width_, 0.0f);
  if (count == 0) return;

  Eigen::Map<const RowMatrix> x(batch.values.data() + row_begin * keys, count, keys);
  Eigen::Map<const RowMatrix> w(gathered, keys, width_);
  scratch->products.resize(static_cast<size_t>(count) * width_);
  Eigen::Map<RowMatrix> products(scratch->products.data(), count, width_);
  products.noalias() = x * w;  // linear: the scores less the bias; FM: [linear, S_1..S_k]
  Eigen::VectorXf squares;     // FM: sum_j x_j^2 |v_j|^2 per row
  if (factorization_) {
    Eigen::Map<const Eigen::VectorXf> norms(factor_norms_.data(), keys);
    squares.noalias() = x.cwiseAbs2() * norms;
  }
  // Per row: loss, prediction, and the score gradient D (rows x width) that
  // X^T D turns into the weights' gradient.
  scratch->row_gradients.resize(backward ? static_cast<size_t>(count) * width_ : 0);
  Eigen::Map<RowMatrix> d(scratch->row_gradients.data(), backward ? count : 0, width_);
  Eigen::VectorXf score_scale(backward ? count : 0);  // FM: the score gradient per row
  std::vector<float>& scores = scratch->scores;
  std::vector<float>& score_gradient = scratch->score_gradient;
  scores.resize(classes_);
  score_gradient.resize(classes_);
  for (Eigen::Index i = 0; i < count; ++i) {
    const size_t r = row_begin + static_cast<size_t>(i);
    if (factorization_) {
      float sums_squared = 0.0f;
      for (int f = 1; f <= k; ++f) sums_squared += products(i, f) * products(i, f);
      scores[0] = FmCombine(use_bias ? bias[0] : 0.0f, products(i, 0), sums_squared, squares(i));
    } else {
      for (int c = 0; c < classes_; ++c) scores[c] = products(i, c) + (use_bias ? bias[c] : 0.0f);
    }
    out.row_losses[r] =
        ExampleLoss(kind, scores.data(), classes_, batch.labels[r], score_gradient.data(),
                    out.predictions ? out.predictions + r * classes_ : nullptr);
    if (!backward) continue;
    for (int c = 0; c < classes_; ++c) score_gradient[c] /= static_cast<float>(rows);
    if (use_bias) {
      for (int c = 0; c < bias_width_; ++c)
        out.row_bias_gradients[r * bias_width_ + c] = score_gradient[c];
    }
    if (factorization_) {
      // dscore/dw_j = x_j, dscore/dv_jf = x_j S_f - v_jf x_j^2.
      score_scale(i) = score_gradient[0];
      d(i, 0) = score_gradient[0];
      for (int f = 1; f <= k; ++f) d(i, f) = score_gradient[0] * products(i, f);
    } else {
      for (int c = 0; c < classes_; ++c) d(i, c) = score_gradient[c];
    }
  }
  if (!backward) return;
  Eigen::Map<RowMatrix> accumulator(scratch->accumulator.data(), keys, width_);
  accumulator.noalias() = x.transpose() * d;
  if (factorization_) {
    const Eigen::VectorXf weighted_squares = x.cwiseAbs2().transpose() * score_scale;
    accumulator.rightCols(k) -=
        (w.rightCols(k).array().colwise() * weighted_squares.array()).matrix();
  }
}

}  // namespace keel
