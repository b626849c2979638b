// The linear model's per-example math: scores of one sparse row and the
// gradients of its parameters.
//
// A row has `nnz` features with `values`. Its weights are gathered per
// feature: weights[j * classes + c] is the weight of the row's j-th feature for
// class c, with classes = 1 for binary classification and regression. The
// functions neither allocate nor throw, so CPU loops and CUDA kernels share them.
#ifndef KEEL_MODELS_LINEAR_H_
#define KEEL_MODELS_LINEAR_H_

#include "models/host_device.h"

namespace keel {

// scores[c] = bias[c] + sum_j weights[j * classes + c] * values[j] for the
// classes c = first, first + stride, ... < classes (the other entries are left
// alone), so that `stride` threads can share a row; the CPU passes 0 and 1.
// `bias` holds `classes` floats, or is null for a model without bias.
KEEL_HOST_DEVICE inline void LinearScoreTerms(const float* weights, const float* values, int nnz,
                                              int classes, int first, int stride, const float* bias,
                                              float* scores) {
  for (int c = first; c < classes; c += stride) scores[c] = bias != nullptr ? bias[c] : 0.0f;
  for (int j = 0; j < nnz; ++j) {
    const float* feature_weights = weights + j * classes;
    const float value = values[j];
    for (int c = first; c < classes; c += stride) scores[c] += feature_weights[c] * value;
  }
}

// scores[c] = bias[c] + sum_j weights[j * classes + c] * values[j], for each
// of the `classes` scores. `bias` holds `classes` floats, or is null for a
// model without bias.
KEEL_HOST_DEVICE inline void LinearScores(const float* weights, const float* values, int nnz,
                                          int classes, const float* bias, float* scores) {
  LinearScoreTerms(weights, values, nnz, classes, 0, 1, bias, scores);
}

// The part of LinearGradients for the classes c = first, first + stride, ...
// (see LinearScoreTerms).
KEEL_HOST_DEVICE inline void LinearGradientTerms(const float* values, int nnz, int classes,
                                                 int first, int stride, const float* score_gradient,
                                                 float* weight_gradients, float* bias_gradient) {
  for (int j = 0; j < nnz; ++j) {
    float* feature_gradients = weight_gradients + j * classes;
    const float value = values[j];
    for (int c = first; c < classes; c += stride) {
      feature_gradients[c] += score_gradient[c] * value;
    }
  }
  if (bias_gradient != nullptr) {
    for (int c = first; c < classes; c += stride) bias_gradient[c] += score_gradient[c];
  }
}

// Given score_gradient[c] = dLoss/dscores[c], ADDS dLoss/dweights to
// `weight_gradients` (nnz * classes floats, laid out like the weights) and
// dLoss/dbias to `bias_gradient` (`classes` floats, or null to skip), so that
// one buffer can accumulate a minibatch.
KEEL_HOST_DEVICE inline void LinearGradients(const float* values, int nnz, int classes,
                                             const float* score_gradient, float* weight_gradients,
                                             float* bias_gradient) {
  LinearGradientTerms(values, nnz, classes, 0, 1, score_gradient, weight_gradients, bias_gradient);
}

}  // namespace keel

#endif  // KEEL_MODELS_LINEAR_H_
