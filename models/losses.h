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

// Loss and gradient guards: a loss or gradient that would overflow a float
// (a score near FLT_MAX) is held at the largest float instead.
KEEL_HOST_DEVICE inline float HoldFinite(float value) {
  return fminf(fmaxf(value, -3.402823466e38f), 3.402823466e38f);
}

// e^-|z|: the one exponential the logistic loss, its gradient and its
// prediction all take (see the ...GivenExp functions below).
KEEL_HOST_DEVICE inline float ExpOfMinusAbs(float z) { return expf(-fabsf(z)); }

// Sigmoid(z) given e = ExpOfMinusAbs(z): 1 / (1 + e^-z) for z >= 0, and
// e^z / (1 + e^z) below, so that neither side overflows.
KEEL_HOST_DEVICE inline float SigmoidGivenExp(float z, float e) {
  return z >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// 1 / (1 + e^-z), without overflow for any z.
KEEL_HOST_DEVICE inline float Sigmoid(float z) { return SigmoidGivenExp(z, ExpOfMinusAbs(z)); }

// ln(1 + e) for e in [0, 1] (e = ExpOfMinusAbs(z)), within 2 ulp of the exact
// value (every float of [0, 1] checked, its multiplies and adds not fused, as
// the x86-64 build computes them; a target that fuses them, such as a GPU,
// rounds a little differently) and several times faster than log1pf, which
// serves every float (with 8 models the training loss took as long as the
// models' own arithmetic). As
// 2 atanh(s) with s = e / (2 + e) in [0, 1/3]: its odd series to s^15, whose
// remainder is under 2^-26 of the sum.
KEEL_HOST_DEVICE inline float Log1pOfUnit(float e) {
  const float s = e / (2.0f + e);
  const float s2 = s * s;
  // Horner's rule in plain multiplies and adds (fmaf is a library call on a
  // CPU target without FMA).
  float series = 1.0f / 15.0f;
  series = series * s2 + 1.0f / 13.0f;
  series = series * s2 + 1.0f / 11.0f;
  series = series * s2 + 1.0f / 9.0f;
  series = series * s2 + 1.0f / 7.0f;
  series = series * s2 + 1.0f / 5.0f;
  series = series * s2 + 1.0f / 3.0f;
  return 2.0f * (s + series * (s2 * s));
}

// LogisticLoss given e = ExpOfMinusAbs(score).
KEEL_HOST_DEVICE inline float LogisticLossGivenExp(float score, float label, float e) {
  return (score > 0.0f ? score : 0.0f) - score * label + Log1pOfUnit(e);
}

// -[y log p + (1 - y) log(1 - p)] with p = Sigmoid(score), computed as
// softplus(score) - y * score so that it stays finite and keeps its precision
// when p rounds to 0 or 1.
KEEL_HOST_DEVICE inline float LogisticLoss(float score, float label) {
  return LogisticLossGivenExp(score, label, ExpOfMinusAbs(score));
}

// dLogisticLoss/dscore = p - y.
KEEL_HOST_DEVICE inline float LogisticGradient(float score, float label) {
  return Sigmoid(score) - label;
}

// 0.5 (score - y)^2.
KEEL_HOST_DEVICE inline float SquaredLoss(float score, float label) {
  const float error = score - label;
  return HoldFinite(0.5f * error * error);
}

// dSquaredLoss/dscore = score - y.
KEEL_HOST_DEVICE inline float SquaredGradient(float score, float label) {
  return HoldFinite(score - label);
}

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

// |score - y|. Its gradient is the sign of the error, 0 at the kink (score = y).
KEEL_HOST_DEVICE inline float AbsoluteLoss(float score, float label) {
  return HoldFinite(fabsf(score - label));
}
KEEL_HOST_DEVICE inline float AbsoluteGradient(float score, float label) {
  return score > label ? 1.0f : (score < label ? -1.0f : 0.0f);
}

// max(0, margin - t score), t = 2y - 1 in {-1, +1} for a 0/1 label: the
// score must clear the margin on the label's side. The gradient is -t inside
// the margin and 0 from the kink (t score = margin) on.
KEEL_HOST_DEVICE inline float HingeLoss(float score, float label, float margin) {
  const float sign = label > 0.5f ? 1.0f : -1.0f;
  return HoldFinite(fmaxf(0.0f, margin - sign * score));
}
KEEL_HOST_DEVICE inline float HingeGradient(float score, float label, float margin) {
  const float sign = label > 0.5f ? 1.0f : -1.0f;
  return sign * score < margin ? -sign : 0.0f;
}

// 0.5 max(0, |score - y| - eps)^2: errors within eps cost nothing, larger
// ones the squared loss of their excess (eps = 0 gives SquaredLoss). Smooth:
// the gradient, sign(e) max(0, |e| - eps), has no kink to choose at.
KEEL_HOST_DEVICE inline float EpsInsensitiveSquaredLoss(float score, float label,
                                                        float insensitivity) {
  const float excess = fmaxf(0.0f, fabsf(score - label) - insensitivity);
  return HoldFinite(0.5f * excess * excess);
}
KEEL_HOST_DEVICE inline float EpsInsensitiveSquaredGradient(float score, float label,
                                                            float insensitivity) {
  const float error = score - label;
  return HoldFinite(copysignf(fmaxf(0.0f, fabsf(error) - insensitivity), error));
}

// max(0, |score - y| - eps). The gradient is sign(score - y) outside the
// band and 0 inside it and on its edges.
KEEL_HOST_DEVICE inline float EpsInsensitiveAbsoluteLoss(float score, float label,
                                                         float insensitivity) {
  return HoldFinite(fmaxf(0.0f, fabsf(score - label) - insensitivity));
}
KEEL_HOST_DEVICE inline float EpsInsensitiveAbsoluteGradient(float score, float label,
                                                             float insensitivity) {
  const float error = score - label;
  if (fabsf(error) <= insensitivity) return 0.0f;
  return error > 0.0f ? 1.0f : -1.0f;
}

// The pinball loss of quantile q in (0, 1): q (y - score) when the label is
// above the score, (1 - q) (score - y) when below. Its minimiser is the
// q-quantile of the label: the label lies below the prediction with
// probability q. The gradient is -q below the label, 1 - q above it, and 0 at
// the kink (score = y).
KEEL_HOST_DEVICE inline float QuantileLoss(float score, float label, float quantile) {
  const float error = label - score;
  return HoldFinite(error >= 0.0f ? quantile * error : (quantile - 1.0f) * error);
}
KEEL_HOST_DEVICE inline float QuantileGradient(float score, float label, float quantile) {
  return score < label ? -quantile : (score > label ? 1.0f - quantile : 0.0f);
}

// Huber's loss: 0.5 e^2 for |e| <= delta, delta (|e| - 0.5 delta) beyond
// (e = score - y): squared near the label, absolute far from it, continuous
// with a continuous gradient, e clipped to [-delta, delta].
KEEL_HOST_DEVICE inline float HuberLoss(float score, float label, float delta) {
  const float error = fabsf(score - label);
  return HoldFinite(error <= delta ? 0.5f * error * error : delta * (error - 0.5f * delta));
}
KEEL_HOST_DEVICE inline float HuberGradient(float score, float label, float delta) {
  return fminf(fmaxf(score - label, -delta), delta);
}

// The losses a model can train under (SageMaker Linear Learner's `loss`).
// Binary classifiers: kLogistic, kHinge. Regressors: kSquared, kAbsolute,
// kEpsInsensitiveSquared, kEpsInsensitiveAbsolute, kQuantile, kHuber.
// Multiclass classifiers: kSoftmax.
enum class LossKind {
  kLogistic,
  kSquared,
  kSoftmax,
  kAbsolute,
  kHinge,
  kEpsInsensitiveSquared,
  kEpsInsensitiveAbsolute,
  kQuantile,
  kHuber,
};

// A loss and its parameters (each read only by its own loss), as the CPU
// loops and the CUDA kernels take it: plain data, copied by value. A LossKind
// converts to it with SageMaker's default parameters.
struct LossFunction {
  KEEL_HOST_DEVICE LossFunction(LossKind loss_kind = LossKind::kLogistic)  // NOLINT
      : kind(loss_kind) {}

  LossKind kind;
  float margin = 1.0f;          // kHinge
  float quantile = 0.5f;        // kQuantile
  float insensitivity = 0.01f;  // kEpsInsensitiveSquared, kEpsInsensitiveAbsolute
  float huber_delta = 1.0f;     // kHuber
  // Each example's loss and gradient weigh its class's weight: a binary
  // classifier's {negative, positive}, a multiclass classifier's one per
  // class. Null: every example weighs 1 (always so for regression). It must
  // point at memory the caller's code reads: host memory on the CPU, device
  // memory in a CUDA kernel.
  const float* class_weights = nullptr;
};

// The weight of an example with `label` (see LossFunction::class_weights); 1
// for a multiclass label that is not a class id.
KEEL_HOST_DEVICE inline float ExampleWeight(const LossFunction& loss, int classes, float label) {
  if (loss.class_weights == nullptr) return 1.0f;
  if (loss.kind == LossKind::kSoftmax) {
    const int class_id = LabelToClass(label, classes);
    return class_id < 0 ? 1.0f : loss.class_weights[class_id];
  }
  if (loss.kind == LossKind::kLogistic || loss.kind == LossKind::kHinge) {
    return loss.class_weights[label > 0.5f ? 1 : 0];
  }
  return 1.0f;
}

// UnweightedExampleLoss: one example's loss given its `classes` scores (1 unless kSoftmax): returns
// the loss, writes dLoss/dscores to `score_gradient` (`classes` floats) and,
// unless `predictions` is null, the prediction the loss implies:
//   kLogistic  the probability of class 1, Sigmoid(score) (label: > 0.5)
//   kHinge     the score itself, a margin (label: its sign, > 0)
//   kSoftmax   the class probabilities
//   regression losses: the score, the predicted value (for kQuantile the
//              predicted q-quantile of the label)
// A multiclass label that is not a class id gives an infinite loss and a zero
// gradient (see SoftmaxGradient); callers check labels with LabelToClass to
// report them.
KEEL_HOST_DEVICE inline float UnweightedExampleLoss(const LossFunction& loss, const float* scores,
                                                    int classes, float label, float* score_gradient,
                                                    float* predictions) {
  const float score = scores[0];
  if (loss.kind == LossKind::kSoftmax) {
    const int class_id = LabelToClass(label, classes);
    const float value = SoftmaxLoss(scores, classes, class_id);
    if (predictions != nullptr) Softmax(scores, classes, predictions);
    SoftmaxGradient(scores, classes, class_id, score_gradient);
    return value;
  }
  if (loss.kind == LossKind::kLogistic) {
    // Sigmoid, LogisticGradient and LogisticLoss with their one exponential.
    const float e = ExpOfMinusAbs(score);
    const float probability = SigmoidGivenExp(score, e);
    if (predictions != nullptr) predictions[0] = probability;
    score_gradient[0] = probability - label;
    return LogisticLossGivenExp(score, label, e);
  }
  if (predictions != nullptr) predictions[0] = score;
  switch (loss.kind) {
    case LossKind::kAbsolute:
      score_gradient[0] = AbsoluteGradient(score, label);
      return AbsoluteLoss(score, label);
    case LossKind::kHinge:
      score_gradient[0] = HingeGradient(score, label, loss.margin);
      return HingeLoss(score, label, loss.margin);
    case LossKind::kEpsInsensitiveSquared:
      score_gradient[0] = EpsInsensitiveSquaredGradient(score, label, loss.insensitivity);
      return EpsInsensitiveSquaredLoss(score, label, loss.insensitivity);
    case LossKind::kEpsInsensitiveAbsolute:
      score_gradient[0] = EpsInsensitiveAbsoluteGradient(score, label, loss.insensitivity);
      return EpsInsensitiveAbsoluteLoss(score, label, loss.insensitivity);
    case LossKind::kQuantile:
      score_gradient[0] = QuantileGradient(score, label, loss.quantile);
      return QuantileLoss(score, label, loss.quantile);
    case LossKind::kHuber:
      score_gradient[0] = HuberGradient(score, label, loss.huber_delta);
      return HuberLoss(score, label, loss.huber_delta);
    case LossKind::kSquared:
    default:
      score_gradient[0] = SquaredGradient(score, label);
      return SquaredLoss(score, label);
  }
}

// ExampleLoss as above, with the loss and its gradient multiplied by the
// example's weight (ExampleWeight); the predictions are not weighted.
KEEL_HOST_DEVICE inline float ExampleLoss(const LossFunction& loss, const float* scores,
                                          int classes, float label, float* score_gradient,
                                          float* predictions) {
  const float value =
      UnweightedExampleLoss(loss, scores, classes, label, score_gradient, predictions);
  const float weight = ExampleWeight(loss, classes, label);
  if (weight == 1.0f) return value;
  for (int c = 0; c < classes; ++c) score_gradient[c] *= weight;
  return value * weight;
}

// ExampleLoss of the logistic loss for one example under `models` models (one
// score each): each model's loss in `losses`, its gradient in `gradients`
// and, unless `predictions` is null, its probability there, exactly as
// ExampleLoss gives them one model at a time. The exponentials go first
// (into `losses`), so the rest is one loop the compiler vectorises across
// models.
KEEL_HOST_DEVICE inline void LogisticModelLosses(const LossFunction& loss, const float* scores,
                                                 int models, float label, float* gradients,
                                                 float* predictions, float* losses) {
  for (int m = 0; m < models; ++m) losses[m] = ExpOfMinusAbs(scores[m]);
  const float weight = ExampleWeight(loss, 1, label);
  if (predictions != nullptr) {
    for (int m = 0; m < models; ++m) predictions[m] = SigmoidGivenExp(scores[m], losses[m]);
  }
  for (int m = 0; m < models; ++m) {
    const float score = scores[m], e = losses[m];
    const float gradient = SigmoidGivenExp(score, e) - label;
    const float value = LogisticLossGivenExp(score, label, e);
    gradients[m] = weight == 1.0f ? gradient : gradient * weight;
    losses[m] = weight == 1.0f ? value : value * weight;
  }
}

}  // namespace keel

#endif  // KEEL_MODELS_LOSSES_H_
