// The factorization machine's per-example math: the score of one sparse row
// and the gradients of its parameters.
//
// Each feature's parameter row holds [w, v_1 .. v_k]: FmRowWidth(k) floats.
// A row's parameters are gathered per feature: params[j * (1 + k)] = w_j and
// params[j * (1 + k) + 1 + f] = v_jf for the row's j-th feature. The score is
//   bias + sum_j w_j x_j + sum_{i<j} <v_i, v_j> x_i x_j
// computed in O(k * nnz) as
//   bias + sum_j w_j x_j + 1/2 sum_f [ S_f^2 - sum_j v_jf^2 x_j^2 ],  S_f = sum_j v_jf x_j.
// FmScore and FmGradients neither allocate nor throw, so CPU loops and CUDA
// kernels share them.
#ifndef KEEL_MODELS_FACTORIZATION_MACHINE_H_
#define KEEL_MODELS_FACTORIZATION_MACHINE_H_

#include "models/host_device.h"

namespace keel {

// Floats per feature in a factorization machine with `k` factors: w and v_1..v_k.
KEEL_HOST_DEVICE inline int FmRowWidth(int k) { return 1 + k; }

// The part of a row's score that factors f = first, first + stride, ... < k
// contribute, so that `stride` threads can share a row (CUDA: a group of lanes
// per row; the CPU: first 0, stride 1, the whole row). Writes those factors'
// S_f = sum_j v_jf x_j to `factor_sums[f]` (the other entries are left alone)
// and returns, through the pointers, the linear term sum_j w_j x_j (every
// caller computes it; it is cheap), sum_f S_f^2 and sum_j sum_f (v_jf x_j)^2
// over its factors. FmCombine turns the sums over all factors into the score.
// FmStridedScoreTerms: the same for parameters `row_width` floats apart from
// one feature to the next (one model's of several side by side: see
// FmModelsScores); FmScoreTerms: row_width = FmRowWidth(k).
KEEL_HOST_DEVICE inline void FmStridedScoreTerms(const float* params, int row_width,
                                                 const float* values, int nnz, int k, int first,
                                                 int stride, float* factor_sums, float* linear,
                                                 float* sums_squared, float* squares) {
  for (int f = first; f < k; f += stride) factor_sums[f] = 0.0f;
  float linear_sum = 0.0f;
  float square_sum = 0.0f;
  for (int j = 0; j < nnz; ++j) {
    const float* feature = params + j * row_width;
    const float value = values[j];
    linear_sum += feature[0] * value;
    for (int f = first; f < k; f += stride) {
      const float term = feature[1 + f] * value;
      factor_sums[f] += term;
      square_sum += term * term;
    }
  }
  float sums_squared_sum = 0.0f;
  for (int f = first; f < k; f += stride) sums_squared_sum += factor_sums[f] * factor_sums[f];
  *linear = linear_sum;
  *sums_squared = sums_squared_sum;
  *squares = square_sum;
}

KEEL_HOST_DEVICE inline void FmScoreTerms(const float* params, const float* values, int nnz, int k,
                                          int first, int stride, float* factor_sums, float* linear,
                                          float* sums_squared, float* squares) {
  FmStridedScoreTerms(params, FmRowWidth(k), values, nnz, k, first, stride, factor_sums, linear,
                      sums_squared, squares);
}

// bias + linear + 1/2 (sum_f S_f^2 - sum_j sum_f (v_jf x_j)^2).
KEEL_HOST_DEVICE inline float FmCombine(float bias, float linear, float sums_squared,
                                        float squares) {
  return bias + linear + 0.5f * (sums_squared - squares);
}

// The score of a row with `nnz` features. `factor_sums` is k floats of
// scratch, left holding S_f = sum_j v_jf x_j for FmGradients.
KEEL_HOST_DEVICE inline float FmScore(const float* params, const float* values, int nnz, int k,
                                      float bias, float* factor_sums) {
  float linear, sums_squared, squares;
  FmScoreTerms(params, values, nnz, k, 0, 1, factor_sums, &linear, &sums_squared, &squares);
  return FmCombine(bias, linear, sums_squared, squares);
}

// The part of FmGradients for factors f = first, first + stride, ... < k (see
// FmScoreTerms). The thread with first == 0 also adds the linear weights'
// gradients; `bias_gradient` is null on the threads that must not add it.
// FmStridedGradientTerms: for parameters and gradients `row_width` floats
// apart from one feature to the next, as FmStridedScoreTerms.
KEEL_HOST_DEVICE inline void FmStridedGradientTerms(const float* params, int row_width,
                                                    const float* values, int nnz, int k, int first,
                                                    int stride, const float* factor_sums,
                                                    float score_gradient, float* param_gradients,
                                                    float* bias_gradient) {
  for (int j = 0; j < nnz; ++j) {
    const float* feature = params + j * row_width;
    float* feature_gradients = param_gradients + j * row_width;
    const float scaled_value = score_gradient * values[j];
    if (first == 0) feature_gradients[0] += scaled_value;
    for (int f = first; f < k; f += stride) {
      feature_gradients[1 + f] += scaled_value * (factor_sums[f] - feature[1 + f] * values[j]);
    }
  }
  if (bias_gradient != nullptr) *bias_gradient += score_gradient;
}

KEEL_HOST_DEVICE inline void FmGradientTerms(const float* params, const float* values, int nnz,
                                             int k, int first, int stride, const float* factor_sums,
                                             float score_gradient, float* param_gradients,
                                             float* bias_gradient) {
  FmStridedGradientTerms(params, FmRowWidth(k), values, nnz, k, first, stride, factor_sums,
                         score_gradient, param_gradients, bias_gradient);
}

// Given score_gradient = dLoss/dscore and the `factor_sums` FmScore left for
// the same row, ADDS dLoss/dparams to `param_gradients` (nnz * (1 + k) floats,
// laid out like `params`) and dLoss/dbias to `*bias_gradient` (null to skip):
//   dscore/dw_j = x_j,  dscore/dv_jf = x_j (S_f - v_jf x_j),  dscore/dbias = 1.
KEEL_HOST_DEVICE inline void FmGradients(const float* params, const float* values, int nnz, int k,
                                         const float* factor_sums, float score_gradient,
                                         float* param_gradients, float* bias_gradient) {
  FmGradientTerms(params, values, nnz, k, 0, 1, factor_sums, score_gradient, param_gradients,
                  bias_gradient);
}

// Several factorization machines over the same row, computed in one pass:
// for each feature, every model in turn (the models innermost). Feature j's
// parameters hold each model's [w, v_1 .. v_k] side by side: model m's at
// params[j * models * (1 + k) + m * (1 + k)], as the servers' rows hold them.
// Each model's sums are taken in the order FmScore takes them, so that each
// score is the one FmScore gives that model alone, bit for bit.
// `biases`: one per model, or null for none; `factor_sums`: models x k floats
// of scratch, left holding each model's S_f for FmModelsGradients; `linear`
// and `squares`: models floats of scratch; `scores`: one per model. No two
// of these arrays may overlap (they are __restrict__, which lets the sums
// stay in registers). CPU only: the CUDA kernels give each model its own
// lanes instead (FmStridedScoreTerms).
KEEL_HOST_DEVICE inline void FmModelsScores(const float* __restrict__ params,
                                            const float* __restrict__ values, int nnz, int k,
                                            int models, const float* __restrict__ biases,
                                            float* __restrict__ factor_sums,
                                            float* __restrict__ linear, float* __restrict__ squares,
                                            float* __restrict__ scores) {
  const int width = FmRowWidth(k);
  const int row_width = models * width;
  for (int t = 0; t < models * k; ++t) factor_sums[t] = 0.0f;
  for (int m = 0; m < models; ++m) {
    linear[m] = 0.0f;
    squares[m] = 0.0f;
  }
  for (int j = 0; j < nnz; ++j) {
    const float value = values[j];
    const float* row = params + j * row_width;
    for (int m = 0; m < models; ++m) {
      const float* feature = row + m * width;
      float* sums = factor_sums + m * k;
      linear[m] += feature[0] * value;
      float square_sum = squares[m];
      for (int f = 0; f < k; ++f) {
        const float term = feature[1 + f] * value;
        sums[f] += term;
        square_sum += term * term;
      }
      squares[m] = square_sum;
    }
  }
  for (int m = 0; m < models; ++m) {
    const float* sums = factor_sums + m * k;
    float sums_squared = 0.0f;
    for (int f = 0; f < k; ++f) sums_squared += sums[f] * sums[f];
    scores[m] =
        FmCombine(biases != nullptr ? biases[m] : 0.0f, linear[m], sums_squared, squares[m]);
  }
}

// FmGradients for the models of FmModelsScores, in the same one pass: ADDS
// each model's dLoss/dparams to `param_gradients` (laid out like `params`)
// and, unless `bias_gradients` is null, its dLoss/dbias to bias_gradients[m].
// `score_gradients`: dLoss/dscore per model. No two arrays may overlap.
KEEL_HOST_DEVICE inline void FmModelsGradients(const float* __restrict__ params,
                                               const float* __restrict__ values, int nnz, int k,
                                               int models, const float* __restrict__ factor_sums,
                                               const float* __restrict__ score_gradients,
                                               float* __restrict__ param_gradients,
                                               float* __restrict__ bias_gradients) {
  const int width = FmRowWidth(k);
  const int row_width = models * width;
  for (int j = 0; j < nnz; ++j) {
    const float value = values[j];
    const float* row = params + j * row_width;
    float* row_gradients = param_gradients + j * row_width;
    for (int m = 0; m < models; ++m) {
      const float* feature = row + m * width;
      float* feature_gradients = row_gradients + m * width;
      const float* sums = factor_sums + m * k;
      const float scaled_value = score_gradients[m] * value;
      feature_gradients[0] += scaled_value;
      for (int f = 0; f < k; ++f) {
        feature_gradients[1 + f] += scaled_value * (sums[f] - feature[1 + f] * value);
      }
    }
  }
  if (bias_gradients != nullptr) {
    for (int m = 0; m < models; ++m) bias_gradients[m] += score_gradients[m];
  }
}

// The same score as FmScore from the pairwise definition, in O(k * nnz^2) and
// double precision: a reference for tests. Host only.
inline float FmScoreNaive(const float* params, const float* values, int nnz, int k, float bias) {
  const int width = FmRowWidth(k);
  double score = bias;
  for (int i = 0; i < nnz; ++i) {
    const float* first = params + i * width;
    score += static_cast<double>(first[0]) * values[i];
    for (int j = i + 1; j < nnz; ++j) {
      const float* second = params + j * width;
      double dot = 0.0;
      for (int f = 0; f < k; ++f) dot += static_cast<double>(first[1 + f]) * second[1 + f];
      score += dot * values[i] * values[j];
    }
  }
  return static_cast<float>(score);
}

}  // namespace keel

#endif  // KEEL_MODELS_FACTORIZATION_MACHINE_H_
