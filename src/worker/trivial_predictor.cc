#include "worker/trivial_predictor.h"

#include "models/losses.h"

namespace keel {

TrivialPredictor FitTrivialPredictor(const Batch& sample, const Hyperparameters& h) {
  TrivialPredictor trivial;
  if (sample.rows() == 0) return trivial;
  trivial.known = true;
  const size_t rows = sample.rows();
  const size_t width = static_cast<size_t>(sample.label_width);
  if (h.predictor_type == PredictorType::kRegressor) {
    double sum = 0;
    for (size_t r = 0; r < rows; ++r) sum += sample.labels[r * width];
    trivial.label_mean = sum / static_cast<double>(rows);
    return trivial;
  }
  const int classes = h.predictor_type == PredictorType::kBinaryClassifier ? 2 : h.num_classes;
  std::vector<double> counts(static_cast<size_t>(classes), 0.5);
  for (size_t r = 0; r < rows; ++r) {
    const float label = sample.labels[r * width];
    const int class_id = h.predictor_type == PredictorType::kBinaryClassifier
                             ? (label > 0.5f ? 1 : 0)
                             : LabelToClass(label, classes);
    if (class_id >= 0) counts[static_cast<size_t>(class_id)] += 1.0;
  }
  double total = 0;
  for (const double count : counts) total += count;
  for (const double count : counts) trivial.class_shares.push_back(count / total);
  return trivial;
}

MetricSet TrivialMetrics(const TrivialPredictor& trivial, const Hyperparameters& h,
                         const std::vector<float>& labels) {
  if (!trivial.known || labels.empty()) return {};
  const LossKind loss = LossKindOf(h.predictor_type, h.loss);
  MetricSet figures;
  switch (h.predictor_type) {
    case PredictorType::kBinaryClassifier: {
      const std::vector<float> constant(labels.size(),
                                        static_cast<float>(trivial.class_shares[1]));
      const MetricSet all = BinaryClassificationMetrics(constant, labels);
      figures["binary_classification_accuracy"] = all.at("binary_classification_accuracy");
      if (loss == LossKind::kLogistic) figures["objective_loss"] = all.at("objective_loss");
      break;
    }
    case PredictorType::kMulticlassClassifier: {
      std::vector<float> constant;
      constant.reserve(labels.size() * trivial.class_shares.size());
      for (size_t r = 0; r < labels.size(); ++r) {
        for (const double share : trivial.class_shares) constant.push_back(static_cast<float>(share));
      }
      const MetricSet all =
          MulticlassMetrics(constant, labels, static_cast<int>(trivial.class_shares.size()));
      figures["multiclass_accuracy"] = all.at("multiclass_accuracy");
      if (loss == LossKind::kSoftmax) figures["objective_loss"] = all.at("objective_loss");
      break;
    }
    case PredictorType::kRegressor: {
      const std::vector<float> constant(labels.size(), static_cast<float>(trivial.label_mean));
      const MetricSet all = RegressionMetrics(constant, labels);
      figures["mse"] = all.at("mse");
      if (loss == LossKind::kSquared) figures["objective_loss"] = all.at("objective_loss");
      break;
    }
  }
  return figures;
}

}  // namespace keel
