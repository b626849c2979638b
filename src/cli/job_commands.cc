// The built-in training jobs on the command line: the worker's training run,
// `keel predict` and `keel datagen`. Their flags are in cli/job_flags.h.
#include <glog/logging.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <unordered_map>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "io/input_split.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/datagen.h"
#include "worker/evaluator.h"
#include "worker/model_artifact.h"
#include "worker/trainer.h"

namespace keel {
namespace {

// The artifact's rows by the features' mixed keys.
std::unordered_map<Key, size_t> FeatureRows(const ModelArtifact& artifact) {
  std::unordered_map<Key, size_t> rows;
  rows.reserve(artifact.features.size());
  for (size_t i = 0; i < artifact.features.size(); ++i) rows[MixKey(artifact.features[i])] = i;
  return rows;
}

// Sets *weights to the artifact's rows of `batch`'s keys, `width` floats each:
// zeros for a feature the model has not seen. Returns how many it had not seen.
uint64_t GatherWeights(const ModelArtifact& artifact, const std::unordered_map<Key, size_t>& rows,
                       const PreparedBatch& batch, int width, std::vector<float>* weights) {
  uint64_t unseen = 0;
  weights->assign(batch.keys.size() * width, 0.0f);
  for (size_t k = 0; k < batch.keys.size(); ++k) {
    auto found = rows.find(batch.keys[k]);
    if (found == rows.end()) {
      ++unseen;
      continue;
    }
    std::copy(artifact.weights.begin() + found->second * width,
              artifact.weights.begin() + (found->second + 1) * width, weights->begin() + k * width);
  }
  return unseen;
}

// Writes a line per example of `rows`, `classes` predictions each: "LABEL,P"
// for a binary classifier, "P" for a regressor, "LABEL,P0,P1,..." for a
// multiclass classifier.
void WritePredictions(PredictorType type, const std::vector<float>& predictions, size_t rows,
                      int classes, std::ostream& out) {
  for (size_t r = 0; r < rows; ++r) {
    const float* p = predictions.data() + r * classes;
    switch (type) {
      case PredictorType::kBinaryClassifier:
        out << (p[0] >= 0.5f ? 1 : 0) << "," << p[0] << "\n";
        break;
      case PredictorType::kRegressor:
        out << p[0] << "\n";
        break;
      case PredictorType::kMulticlassClassifier: {
        const int label = static_cast<int>(std::max_element(p, p + classes) - p);
        out << label;
        for (int c = 0; c < classes; ++c) out << "," << p[c];
        out << "\n";
        break;
      }
    }
  }
}

}  // namespace

int RunTraining(Node* node, KVWorker* client) {
  const Hyperparameters hyperparameters = HyperparametersFromFlags();
  TrainerOptions options = TrainerOptionsFromFlags();
  options.hyperparameter_json = HyperparameterJson();
  Trainer trainer(node, client, hyperparameters, options);
  trainer.Run();
  return 0;
}

int RunPredict() {
  if (FLAGS_model_dir.empty() || FLAGS_data.empty() || FLAGS_out.empty()) {
    throw MakeError("keel predict needs --model_dir, --data and --out");
  }
  const ModelArtifact artifact = ModelArtifact::Read(FLAGS_model_dir);
  const Hyperparameters& h = artifact.hyperparameters;
  const std::unique_ptr<ComputeBackend> backend =
      MakeComputeBackend(FLAGS_device, FLAGS_threads, h);
  ComputeBackend& model = *backend;
  const int width = model.weight_width();
  const std::unordered_map<Key, size_t> rows = FeatureRows(artifact);
  ReaderOptions reader = ReaderOptionsFromFlags();
  reader.feature_dim = 0;  // unseen features simply have zero weights
  BatchStream stream(ResolveChannel(FLAGS_data, 0, 1), reader, 4096);
  std::ofstream out(FLAGS_out);
  if (!out) throw MakeError("cannot write ", FLAGS_out);
  out << std::setprecision(7);
  std::vector<float> weights, predictions, all_predictions, labels;
  PreparedBatch batch;
  uint64_t unseen = 0;
  while (stream.Next(&batch)) {
    unseen += GatherWeights(artifact, rows, batch, width, &weights);
    model.Predict(batch, weights.data(), artifact.bias.data(), &predictions);
    WritePredictions(h.predictor_type, predictions, batch.batch.rows(), model.prediction_width(),
                     out);
    all_predictions.insert(all_predictions.end(), predictions.begin(), predictions.end());
    labels.insert(labels.end(), batch.batch.labels.begin(), batch.batch.labels.end());
  }
  if (!out) throw MakeError("cannot write ", FLAGS_out);
  const MetricSet metrics = PredictionMetrics(h, all_predictions, labels);
  std::cout << "scored " << labels.size() << " examples into " << FLAGS_out << " (" << unseen
            << " feature occurrences the model has not seen)\n";
  for (const auto& [name, value] : metrics) std::cout << "  " << name << " " << value << "\n";
  return 0;
}

int RunDatagen() {
  DatagenOptions options;
  options.model = FLAGS_model;
  options.rows = FLAGS_rows;
  options.features = FLAGS_features;
  options.nnz = FLAGS_nnz;
  options.num_factors = FLAGS_num_factors;
  options.seed = FLAGS_seed;
  options.train_files = FLAGS_train_files;
  options.out = FLAGS_out;
  const MetricSet oracle = GenerateData(options);
  std::cout << "wrote " << options.rows << " training rows to " << options.out << "/train, "
            << options.rows / 10 << " each to validation and test\n";
  for (const auto& [name, value] : oracle) std::cout << "  oracle " << name << " " << value << "\n";
  return 0;
}

}  // namespace keel
