#include "worker/cpu_model.h"

#include <Eigen/Core>
#include <cstring>

#include "base/cpu_features.h"
#include "base/error.h"
#include "models/factorization_machine.h"
#include "models/linear.h"
#include "models/losses.h"

namespace keel {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The per-row steps below are inline: they run for every example.

// Copies the parameters of a row's `nnz` non-zeros (at `positions` in the
// batch's pulled rows) into `params`, in the row's order.
inline void GatherRow(const float* weights, const uint32_t* positions, int nnz, int width,
                      float* params) {
  for (int j = 0; j < nnz; ++j) {
    std::memcpy(params + static_cast<size_t>(j) * width,
                weights + static_cast<size_t>(positions[j]) * width, sizeof(float) * width);
  }
}

// Adds each non-zero's gradient row into its key's row. At a width known when
// compiled (kWidth > 0) the sums go through a local row, so that the compiler,
// which cannot tell the two arrays apart once this is inlined, adds whole rows
// in vector registers: the same additions in the same order.
template <int kWidth>
inline void ScatterAdd(const float* __restrict row_gradients, const uint32_t* positions, int nnz,
                       int width, float* __restrict key_gradients) {
  for (int j = 0; j < nnz; ++j) {
    float* target = key_gradients + static_cast<size_t>(positions[j]) * width;
    const float* source = row_gradients + static_cast<size_t>(j) * width;
    if constexpr (kWidth > 0) {
      float sum[kWidth];
      for (int c = 0; c < kWidth; ++c) sum[c] = target[c] + source[c];
      std::memcpy(target, sum, sizeof(sum));
    } else {
      for (int c = 0; c < width; ++c) target[c] += source[c];
    }
  }
}

// Asks for the rows the next example will gather, so that their loads are
// under way while this example computes (the pulled rows are seldom in the
// core's own cache: the receiving thread wrote them): every cache line of a
// row, as several models' rows span several (the default's 8 factorization
// machines: 160 bytes, up to four lines).
[[gnu::always_inline]] inline void PrefetchRows(const float* weights, const uint32_t* positions,
                                                int nnz, int width) {
  constexpr int kLine = 64 / sizeof(float);
  for (int j = 0; j < nnz; ++j) {
    const float* row = weights + static_cast<size_t>(positions[j]) * width;
    for (int c = 0; c < width; c += kLine) __builtin_prefetch(row + c);
    __builtin_prefetch(row + width - 1);  // a row may end on the next cache line
  }
}

// The mean loss's gradient: each example weighs 1/rows.
inline void ScaleToMean(size_t rows, int classes, float* score_gradient) {
  for (int c = 0; c < classes; ++c) score_gradient[c] /= static_cast<float>(rows);
}

}  // namespace

CpuModel::CpuModel(const Hyperparameters& hyperparameters, int threads, bool wide_vectors)
    : ComputeBackend(hyperparameters),
      wide_(KEEL_X86_VECTORS && wide_vectors && CpuHasAvx2()),
      pool_(threads),
      scratch_(pool_.size()) {
  if (hyperparameters.num_models > 1) models_ = hyperparameters.num_models;
  row_width_ = models_ * width_;
  row_bias_ = models_ * bias_width_;
  row_scores_ = models_ * classes_;
  model_losses_.assign(models_, 0.0);
}

void CpuModel::RowLosses(size_t r, const float* scores, float label, float* score_gradient,
                         const Outputs& out) const {
  if (loss_.kind == LossKind::kLogistic && classes_ == 1 && models_ > 1) {
    LogisticModelLosses(loss_, scores, models_, label, score_gradient,
                        out.predictions ? out.predictions + r * row_scores_ : nullptr,
                        out.row_losses + r * models_);
    return;
  }
  for (int m = 0; m < models_; ++m) {
    const int first = m * classes_;
    out.row_losses[r * models_ + m] =
        ExampleLoss(loss_, scores + first, classes_, label, score_gradient + first,
                    out.predictions ? out.predictions + r * row_scores_ + first : nullptr);
  }
}

std::vector<double> CpuModel::LastModelLosses(double last_total) const {
  if (models_ == 1) return {last_total};
  return model_losses_;
}

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

double CpuModel::Run(const PreparedBatch& prepared, const float* weights, const float* bias,
                     std::vector<float>* predictions, std::vector<float>* weight_gradients,
                     std::vector<float>* bias_gradient) {
  const size_t rows = prepared.batch.rows();
  const size_t keys = prepared.keys.size();
  CheckKeySet(prepared);
  const int parts = pool_.size();
  const bool threaded_sparse = parts > 1 && !(rows > 0 && IsDenseBatch(prepared));
  const Outputs out =
      PrepareOutputs(rows, keys, threaded_sparse, predictions, weight_gradients, bias_gradient);
  if (parts > 1 && !threaded_sparse) {
    RunDense(prepared, weights, bias, out, weight_gradients);
  } else if (parts == 1) {
    RunOneThread(prepared, weights, bias, out, weight_gradients);
  } else {
    RunSparse(prepared, weights, bias, out, weight_gradients);
  }
  return SumRows(rows, weight_gradients != nullptr ? bias_gradient : nullptr);
}

CpuModel::Outputs CpuModel::PrepareOutputs(size_t rows, size_t keys, bool threaded_sparse,
                                           std::vector<float>* predictions,
                                           std::vector<float>* weight_gradients,
                                           std::vector<float>* bias_gradient) {
  Outputs out;
  if (predictions) {
    predictions->assign(rows * row_scores_, 0.0f);
    out.predictions = predictions->data();
  }
  row_losses_.assign(rows * models_, 0.0f);
  out.row_losses = row_losses_.data();
  if (weight_gradients == nullptr) return out;
  // The threaded sparse pass writes every element: no need to zero them first.
  if (threaded_sparse) {
    weight_gradients->resize(keys * row_width_);
  } else {
    weight_gradients->assign(keys * row_width_, 0.0f);
  }
  bias_gradient->assign(row_bias_, 0.0f);
  row_bias_gradients_.assign(rows * row_bias_, 0.0f);
  out.row_bias_gradients = row_bias_gradients_.data();
  return out;
}

void CpuModel::RunDense(const PreparedBatch& prepared, const float* weights, const float* bias,
                        const Outputs& out, std::vector<float>* weight_gradients) {
  GatherDenseWeights(prepared, weights);
  const size_t rows = prepared.batch.rows();
  const int parts = pool_.size();
  pool_.Run([&](int part) {
    size_t begin, end;
    PartRange(rows, parts, part, &begin, &end);
    DenseRows(prepared, gathered_.data(), bias, begin, end, &scratch_[part], out);
  });
  if (weight_gradients != nullptr) AddAccumulators(prepared, weight_gradients);
}

void CpuModel::RunOneThread(const PreparedBatch& prepared, const float* weights, const float* bias,
                            Outputs out, std::vector<float>* weight_gradients) {
  if (weight_gradients != nullptr) out.key_gradients = weight_gradients->data();
  SparseRows(prepared, weights, bias, 0, prepared.batch.rows(), &scratch_[0], out);
}

void CpuModel::RunSparse(const PreparedBatch& prepared, const float* weights, const float* bias,
                         Outputs out, std::vector<float>* weight_gradients) {
  if (weight_gradients != nullptr) {
    slots_.resize(prepared.batch.nnz() * row_width_);
    out.slot_gradients = slots_.data();
  }
  const size_t rows = prepared.batch.rows();
  const int parts = pool_.size();
  pool_.Run([&](int part) {
    size_t begin, end;
    PartRange(rows, parts, part, &begin, &end);
    SparseRows(prepared, weights, bias, begin, end, &scratch_[part], out);
  });
  if (weight_gradients != nullptr) ReduceSlots(prepared, weight_gradients);
}

void CpuModel::GatherDenseWeights(const PreparedBatch& prepared, const float* weights) {
  // Row 0 lists every key: gather the weights in its order.
  const size_t keys = prepared.keys.size();
  gathered_.resize(keys * row_width_);
  for (size_t j = 0; j < keys; ++j) {
    std::memcpy(gathered_.data() + j * row_width_,
                weights + static_cast<size_t>(prepared.positions[j]) * row_width_,
                sizeof(float) * row_width_);
  }
  if (!factorization_) return;
  // Per key, each model's |v_j|^2.
  factor_norms_.resize(keys * models_);
  for (size_t j = 0; j < keys; ++j) {
    for (int m = 0; m < models_; ++m) {
      const float* factors = gathered_.data() + j * row_width_ + m * width_;
      float norm = 0.0f;
      for (int f = 1; f < width_; ++f) norm += factors[f] * factors[f];
      factor_norms_[j * models_ + m] = norm;
    }
  }
}

void CpuModel::AddAccumulators(const PreparedBatch& prepared,
                               std::vector<float>* weight_gradients) const {
  const int parts = pool_.size();
  for (size_t j = 0; j < prepared.keys.size(); ++j) {
    float* target =
        weight_gradients->data() + static_cast<size_t>(prepared.positions[j]) * row_width_;
    for (int part = 0; part < parts; ++part) {
      const float* source = scratch_[part].accumulator.data() + j * row_width_;
      for (int c = 0; c < row_width_; ++c) target[c] += source[c];
    }
  }
}

void CpuModel::ReduceSlots(const PreparedBatch& prepared, std::vector<float>* weight_gradients) {
  // The order the one-thread pass adds them in.
  const int parts = pool_.size();
  pool_.Run([&](int part) {
    size_t begin, end;
    PartRange(prepared.keys.size(), parts, part, &begin, &end);
    for (size_t u = begin; u < end; ++u) {
      float* target = weight_gradients->data() + u * row_width_;
      const uint32_t first = prepared.key_offsets[u], last = prepared.key_offsets[u + 1];
      // 0 + the first slot, as the one-thread pass starts from zero.
      const float* source =
          slots_.data() + static_cast<size_t>(prepared.nonzeros_by_key[first]) * row_width_;
      for (int c = 0; c < row_width_; ++c) target[c] = 0.0f + source[c];
      for (uint32_t e = first + 1; e < last; ++e) {
        source = slots_.data() + static_cast<size_t>(prepared.nonzeros_by_key[e]) * row_width_;
        for (int c = 0; c < row_width_; ++c) target[c] += source[c];
      }
    }
  });
}

double CpuModel::SumRows(size_t rows, std::vector<float>* bias_gradient) {
  // Each model's losses summed in row order, the models side by side (one
  // chain of additions each, in flight together).
  std::fill(model_losses_.begin(), model_losses_.end(), 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const float* losses = row_losses_.data() + r * models_;
    for (int m = 0; m < models_; ++m) model_losses_[m] += losses[m];
  }
  double loss = 0;
  for (int m = 0; m < models_; ++m) loss += model_losses_[m];
  if (bias_gradient != nullptr && hyperparameters_.use_bias) {
    for (size_t r = 0; r < rows; ++r) {
      for (int c = 0; c < row_bias_; ++c) {
        (*bias_gradient)[c] += row_bias_gradients_[r * row_bias_ + c];
      }
    }
  }
  return loss;
}

void CpuModel::SparseRows(const PreparedBatch& prepared, const float* weights, const float* bias,
                          size_t row_begin, size_t row_end, Scratch* scratch,
                          const Outputs& out) const {
  // One model's weights, or the default's 8 models side by side.
  if (!factorization_ && row_width_ == row_scores_) {
    if (row_width_ == 1) {
      return LinearRowsOf<1>(prepared, weights, bias, row_begin, row_end, scratch, out);
    }
    if (row_width_ == 8) {
      if (wide_) {
        return LinearRowsOfEightWide(prepared, weights, bias, row_begin, row_end, scratch, out);
      }
      return LinearRowsOf<8>(prepared, weights, bias, row_begin, row_end, scratch, out);
    }
  }
  // A factorization machine's 1 + k weights (one score): the default k = 4,
  // and k = 8; and the default's 8 models of k = 4 side by side.
  if (factorization_ && row_scores_ == 1 && row_width_ == 5) {
    return SparseRowsOf<5, 1>(prepared, weights, bias, row_begin, row_end, scratch, out);
  }
  if (factorization_ && row_scores_ == 1 && row_width_ == 9) {
    return SparseRowsOf<9, 1>(prepared, weights, bias, row_begin, row_end, scratch, out);
  }
  if (factorization_ && row_scores_ == 8 && row_width_ == 40) {
    return SparseRowsOf<40, 8>(prepared, weights, bias, row_begin, row_end, scratch, out);
  }
  SparseRowsOf<0, 0>(prepared, weights, bias, row_begin, row_end, scratch, out);
}

template <int kWidth, int kScores>
void CpuModel::SparseRowsOf(const PreparedBatch& prepared, const float* weights, const float* bias,
                            size_t row_begin, size_t row_end, Scratch* scratch,
                            const Outputs& out) const {
  const int row_width = kWidth > 0 ? kWidth : row_width_;
  const int row_scores = kScores > 0 ? kScores : row_scores_;
  const Batch& batch = prepared.batch;
  const size_t rows = batch.rows();
  const bool backward = out.key_gradients != nullptr || out.slot_gradients != nullptr;
  const bool use_bias = hyperparameters_.use_bias;
  // A factorization machine's row holds each of its row_scores models' 1 + k.
  constexpr int kFactors = kWidth > 0 && kScores > 0 ? kWidth / kScores - 1 : 0;
  const int k = factorization_ && kWidth > 0 ? kFactors : hyperparameters_.num_factors;
  std::vector<float>& params = scratch->params;
  scratch->scores.resize(row_scores);
  scratch->score_gradient.resize(row_scores);
  scratch->factor_sums.resize(factorization_ ? static_cast<size_t>(row_scores) * k : 0);
  scratch->linear.resize(factorization_ ? row_scores : 0);
  scratch->squares.resize(factorization_ ? row_scores : 0);
  float* scores = scratch->scores.data();
  float* score_gradient = scratch->score_gradient.data();
  float* factor_sums = scratch->factor_sums.data();
  for (size_t r = row_begin; r < row_end; ++r) {
    const size_t begin = batch.row_offsets[r];
    const int nnz = static_cast<int>(batch.row_offsets[r + 1] - begin);
    const float* values = batch.values.data() + begin;
    const uint32_t* positions = prepared.positions.data() + begin;
    params.resize(static_cast<size_t>(nnz) * row_width);
    GatherRow(weights, positions, nnz, row_width, params.data());
    if (r + 1 < row_end) {
      const size_t next = batch.row_offsets[r + 1];
      PrefetchRows(weights, prepared.positions.data() + next,
                   static_cast<int>(batch.row_offsets[r + 2] - next), row_width);
    }
    if (factorization_ && row_scores == 1) {
      scores[0] = FmScore(params.data(), values, nnz, k, use_bias ? bias[0] : 0.0f, factor_sums);
    } else if (factorization_) {
      FmModelsScores(params.data(), values, nnz, k, row_scores, use_bias ? bias : nullptr,
                     factor_sums, scratch->linear.data(), scratch->squares.data(), scores);
    } else {
      LinearScores(params.data(), values, nnz, row_scores, use_bias ? bias : nullptr, scores);
    }
    RowLosses(r, scores, batch.labels[r], score_gradient, out);
    if (!backward) continue;
    ScaleToMean(rows, row_scores, score_gradient);
    // Straight into this row's own slots, or into scratch and then into the keys.
    float* row_gradients;
    if (out.slot_gradients != nullptr) {
      row_gradients = out.slot_gradients + begin * row_width;
      std::fill(row_gradients, row_gradients + static_cast<size_t>(nnz) * row_width, 0.0f);
    } else {
      scratch->gradients.assign(static_cast<size_t>(nnz) * row_width, 0.0f);
      row_gradients = scratch->gradients.data();
    }
    float* bias_gradient = out.row_bias_gradients + r * row_bias_;
    if (factorization_ && row_scores == 1) {
      FmGradients(params.data(), values, nnz, k, factor_sums, score_gradient[0], row_gradients,
                  bias_gradient);
    } else if (factorization_) {
      FmModelsGradients(params.data(), values, nnz, k, row_scores, factor_sums, score_gradient,
                        row_gradients, bias_gradient);
    } else {
      LinearGradients(values, nnz, row_scores, score_gradient, row_gradients, bias_gradient);
    }
    if (out.key_gradients != nullptr) {
      ScatterAdd<kWidth>(row_gradients, positions, nnz, row_width, out.key_gradients);
    }
  }
}

template <int kModels>
inline void CpuModel::LinearRowsOf(const PreparedBatch& prepared, const float* weights,
                                   const float* bias, size_t row_begin, size_t row_end,
                                   Scratch* scratch, const Outputs& out) const {
  const Batch& batch = prepared.batch;
  const size_t rows = batch.rows();
  const bool backward = out.key_gradients != nullptr || out.slot_gradients != nullptr;
  const bool use_bias = hyperparameters_.use_bias;
  scratch->score_gradient.resize(kModels);
  float* score_gradient = scratch->score_gradient.data();
  const bool logistic_models =
      kModels > 1 && loss_.kind == LossKind::kLogistic && classes_ == 1 && models_ == kModels;
  for (size_t r = row_begin; r < row_end; ++r) {
    const size_t begin = batch.row_offsets[r];
    const int nnz = static_cast<int>(batch.row_offsets[r + 1] - begin);
    const float* values = batch.values.data() + begin;
    const uint32_t* positions = prepared.positions.data() + begin;
    if (r + 1 < row_end) {
      const size_t next = batch.row_offsets[r + 1];
      PrefetchRows(weights, prepared.positions.data() + next,
                   static_cast<int>(batch.row_offsets[r + 2] - next), kModels);
    }
    // LinearScores, its sums in a local row (which nothing else can alias).
    float scores[kModels];
    for (int c = 0; c < kModels; ++c) scores[c] = use_bias ? bias[c] : 0.0f;
    for (int j = 0; j < nnz; ++j) {
      const float* row_weights = weights + static_cast<size_t>(positions[j]) * kModels;
      const float value = values[j];
      for (int c = 0; c < kModels; ++c) scores[c] += row_weights[c] * value;
    }
    // RowLosses, inlined: the AVX2 pass takes the models' losses in its own
    // vectors (their count left to run time: a count of 8 known when compiled
    // unrolls the loops before they are vectorized, and they are not).
    if (logistic_models) {
      LogisticModelLosses(loss_, scores, models_, batch.labels[r], score_gradient,
                          out.predictions ? out.predictions + r * kModels : nullptr,
                          out.row_losses + r * kModels);
    } else {
      RowLosses(r, scores, batch.labels[r], score_gradient, out);
    }
    if (!backward) continue;
    float mean_gradient[kModels];  // ScaleToMean
    for (int c = 0; c < kModels; ++c) {
      mean_gradient[c] = score_gradient[c] / static_cast<float>(rows);
    }
    // LinearGradients into a zeroed row (0 + g * x, as there), then its
    // scatter-add: the same sums, rounded alike.
    float* bias_gradient = out.row_bias_gradients + r * row_bias_;
    for (int c = 0; c < kModels; ++c) bias_gradient[c] += mean_gradient[c];
    for (int j = 0; j < nnz; ++j) {
      const float value = values[j];
      float gradient[kModels];
      for (int c = 0; c < kModels; ++c) gradient[c] = 0.0f + mean_gradient[c] * value;
      if (out.slot_gradients != nullptr) {
        std::memcpy(out.slot_gradients + (begin + j) * kModels, gradient, sizeof(gradient));
      } else {
        float* key_row = out.key_gradients + static_cast<size_t>(positions[j]) * kModels;
        float added[kModels];
        for (int c = 0; c < kModels; ++c) added[c] = key_row[c] + gradient[c];
        std::memcpy(key_row, added, sizeof(added));
      }
    }
  }
}

// The 8-floats-a-row pass (the default's 8 linear models) is compiled twice,
// for the baseline x86-64 target and for AVX2 (one vector register a row of
// weights, and the 8 models' losses in one), and runs as the CPU allows: its
// body is inlined into each (gnu::always_inline). No contraction into fused
// multiply-adds (CMakeLists.txt), so both give the same bits.
KEEL_TARGET_AVX2 void CpuModel::LinearRowsOfEightWide(const PreparedBatch& prepared,
                                                      const float* weights, const float* bias,
                                                      size_t row_begin, size_t row_end,
                                                      Scratch* scratch, const Outputs& out) const {
  LinearRowsOf<8>(prepared, weights, bias, row_begin, row_end, scratch, out);
}

void CpuModel::DenseRows(const PreparedBatch& prepared, const float* gathered, const float* bias,
                         size_t row_begin, size_t row_end, Scratch* scratch,
                         const Outputs& out) const {
  const Batch& batch = prepared.batch;
  const Eigen::Index keys = static_cast<Eigen::Index>(prepared.keys.size());
  const Eigen::Index count = static_cast<Eigen::Index>(row_end - row_begin);
  const bool backward = out.row_bias_gradients != nullptr;
  const int k = hyperparameters_.num_factors;
  if (backward) scratch->accumulator.assign(static_cast<size_t>(keys) * row_width_, 0.0f);
  if (count == 0) return;

  Eigen::Map<const RowMatrix> x(batch.values.data() + row_begin * keys, count, keys);
  Eigen::Map<const RowMatrix> w(gathered, keys, row_width_);
  scratch->products.resize(static_cast<size_t>(count) * row_width_);
  Eigen::Map<RowMatrix> products(scratch->products.data(), count, row_width_);
  products.noalias() = x * w;  // linear: the scores less the bias; FM: [linear, S_1..S_k]
  RowMatrix squares;           // FM: sum_j x_j^2 |v_j|^2 per row and model
  if (factorization_) {
    Eigen::Map<const RowMatrix> norms(factor_norms_.data(), keys, models_);
    squares.noalias() = x.cwiseAbs2() * norms;
  }
  // Per row: loss, prediction, and the score gradient D (rows x width) that
  // X^T D turns into the weights' gradient.
  scratch->row_gradients.resize(backward ? static_cast<size_t>(count) * row_width_ : 0);
  Eigen::Map<RowMatrix> d(scratch->row_gradients.data(), backward ? count : 0, row_width_);
  // FM: the score gradient per row and model.
  RowMatrix score_scale(backward && factorization_ ? count : 0, models_);
  DenseRowLosses(batch, bias, squares.data(), row_begin, row_end, scratch, out, score_scale.data());
  if (!backward) return;
  Eigen::Map<RowMatrix> accumulator(scratch->accumulator.data(), keys, row_width_);
  accumulator.noalias() = x.transpose() * d;
  if (factorization_) {
    const RowMatrix weighted_squares = x.cwiseAbs2().transpose() * score_scale;
    for (int m = 0; m < models_; ++m) {
      accumulator.middleCols(m * width_ + 1, k) -=
          (w.middleCols(m * width_ + 1, k).array().colwise() * weighted_squares.col(m).array())
              .matrix();
    }
  }
}

void CpuModel::DenseRowLosses(const Batch& batch, const float* bias, const float* squares,
                              size_t row_begin, size_t row_end, Scratch* scratch,
                              const Outputs& out, float* score_scale) const {
  const size_t rows = batch.rows();
  const bool backward = out.row_bias_gradients != nullptr;
  const bool use_bias = hyperparameters_.use_bias;
  const int k = hyperparameters_.num_factors;
  scratch->scores.resize(row_scores_);
  scratch->score_gradient.resize(row_scores_);
  float* scores = scratch->scores.data();
  float* score_gradient = scratch->score_gradient.data();
  for (size_t i = 0; i < row_end - row_begin; ++i) {
    const size_t r = row_begin + i;
    const float* product = scratch->products.data() + i * row_width_;  // row i of X W
    if (factorization_) {
      for (int m = 0; m < models_; ++m) {
        const float* model = product + m * width_;  // [linear, S_1..S_k]
        float sums_squared = 0.0f;
        for (int f = 1; f <= k; ++f) sums_squared += model[f] * model[f];
        scores[m] =
            FmCombine(use_bias ? bias[m] : 0.0f, model[0], sums_squared, squares[i * models_ + m]);
      }
    } else {
      for (int c = 0; c < row_scores_; ++c) scores[c] = product[c] + (use_bias ? bias[c] : 0.0f);
    }
    RowLosses(r, scores, batch.labels[r], score_gradient, out);
    if (!backward) continue;
    ScaleToMean(rows, row_scores_, score_gradient);
    if (use_bias) {
      for (int c = 0; c < row_bias_; ++c) {
        out.row_bias_gradients[r * row_bias_ + c] = score_gradient[c];
      }
    }
    float* d = scratch->row_gradients.data() + i * row_width_;  // row i of D
    if (factorization_) {
      // dscore/dw_j = x_j, dscore/dv_jf = x_j S_f - v_jf x_j^2.
      for (int m = 0; m < models_; ++m) {
        const int first = m * width_;
        score_scale[i * models_ + m] = score_gradient[m];
        d[first] = score_gradient[m];
        for (int f = 1; f <= k; ++f) d[first + f] = score_gradient[m] * product[first + f];
      }
    } else {
      for (int c = 0; c < row_scores_; ++c) d[c] = score_gradient[c];
    }
  }
}

}  // namespace keel
