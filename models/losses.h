// Losses of the built-in models and their gradients with respect to the score.
//
// Labels: binary labels are 0 or 1, regression labels are real, and a
// multiclass label is an integer class id stored as a float (convert it with
// LabelToClass). Every function is plain C math so that the CPU loops and the
// CUDA kernels call the same code; none allocates or throws, and none returns
// NaN or infinity for finite inputs, however large the score.
#ifndef KEEL_MODELS_LOSSES_H_
#define KEEL_MODELS_LOSSES_H_

#include <math.h>

#include "models/host_device.h"

namespace keel {

// 1 / (1 + e^-z), without overflow for any z.
KEEL_HOST_DEVICE inline float Sigmoid(float z) {
  if (z >= 0.0f) return 1.0f / (1.0f + expf(-z));
  const float exp_z = expf(z);
  return exp_z / (1.0f + exp_z);
}

// -[y log p + (1 - y) log(1 - p)] with p = Sigmoid(score), computed as
// softplus(score) - y * score so that it stays finite and keeps its precision
// when p rounds to 0 or 1.
KEEL_HOST_DEVICE inline float LogisticLoss(float score, float label) {
  return fmaxf(score, 0.0f) - score * label + log1pf(expf(-fabsf(score)));
}

// dLogisticLoss/dscore = p - y.
KEEL_HOST_DEVICE inline float LogisticGradient(float score, float label) {
  return Sigmoid(score) - label;
}

// 0.5 (score - y)^2.
KEEL_HOST_DEVICE inline float SquaredLoss(float score, float label) {
  const float error = score - label;
  return 0.5f * error * error;
}

// dSquaredLoss/dscore = score - y.
KEEL_HOST_DEVICE inline float SquaredGradient(float score, float label) { return score - label; }

// The class id a multiclass label stands for, or -1 if the label is not an
// integer in [0, classes) (including NaN). Callers check for -1 where the data
// is read and report the bad row there.
KEEL_HOST_DEVICE inline int LabelToClass(float label, int classes) {
  if (!(label >= 0.0f) || !(label < static_cast<float>(classes))) return -1;
  const int class_id = static_cast<int>(label);
  return static_cast<float>(class_id) == label ? class_id : -1;
}

// Writes softmax(scores) to `probabilities` (both `classes` floats; they may
// alias). The maximum is subtracted first, so large scores do not overflow.
KEEL_HOST_DEVICE inline void Softmax(const float* scores, int classes, float* probabilities) {
  if (classes <= 0) return;
  float max_score = scores[0];
  for (int c = 1; c < classes; ++c) max_score = fmaxf(max_score, scores[c]);
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) {
    probabilities[c] = expf(scores[c] - max_score);
    sum += probabilities[c];
  }
  for (int c = 0; c < classes; ++c) probabilities[c] /= sum;
}

// -log softmax(scores)[label], the cross-entropy of `classes` scores against
// class `label`. Requires 0 <= label < classes; for a label outside that range
// it reads nothing out of bounds and returns infinity.
KEEL_HOST_DEVICE inline float SoftmaxLoss(const float* scores, int classes, int label) {
  if (label < 0 || label >= classes) return INFINITY;
  float max_score = scores[0];
  for (int c = 1; c < classes; ++c) max_score = fmaxf(max_score, scores[c]);
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) sum += expf(scores[c] - max_score);
  return logf(sum) + (max_score - scores[label]);
}

// Writes dSoftmaxLoss/dscores = softmax(scores) - onehot(label) to `gradient`
// (`classes` floats; it may alias `scores`). For a label outside [0, classes)
// it writes zeros: a malformed example does not move the model.
KEEL_HOST_DEVICE inline void SoftmaxGradient(const float* scores, int classes, int label,
                                             float* gradient) {
  if (label < 0 || label >= classes) {
    for (int c = 0; c < classes; ++c) gradient[c] = 0.0f;
    return;
  }
  Softmax(scores, classes, gradient);
  gradient[label] -= 1.0f;
}

// The loss a model is trained under: logistic for binary classification,
// squared for regression, softmax cross-entropy for multiclass.
enum class LossKind { kLogistic, kSquared, kSoftmax };

// One example's loss given its `classes` scores (1 unless kSoftmax): returns
// the loss, writes dLoss/dscores to `score_gradient` (`classes` floats) and,
// unless `predictions` is null, the prediction: the probability of class 1,
// the regression value, or the class probabilities. A multiclass label that
// is not a class id gives an infinite loss and a zero gradient (see
// SoftmaxGradient); callers check labels with LabelToClass to report them.
KEEL_HOST_DEVICE inline float ExampleLoss(LossKind kind, const float* scores, int classes,
                                          float label, float* score_gradient, float* predictions) {
  switch (kind) {
    case LossKind::kLogistic:
      score_gradient[0] = LogisticGradient(scores[0], label);
      if (predictions != nullptr) predictions[0] = Sigmoid(scores[0]);
      return LogisticLoss(scores[0], label);
    case LossKind::kSquared:
      score_gradient[0] = SquaredGradient(scores[0], label);
      if (predictions != nullptr) predictions[0] = scores[0];
      return SquaredLoss(scores[0], label);
    case LossKind::kSoftmax:
    default: {
      const int class_id = LabelToClass(label, classes);
      const float loss = SoftmaxLoss(scores, classes, class_id);
      if (predictions != nullptr) Softmax(scores, classes, predictions);
      SoftmaxGradient(scores, classes, class_id, score_gradient);
      return loss;
    }
  }
}

}  // namespace keel

#endif  // KEEL_MODELS_LOSSES_H_
