// Scorer (worker/scorer.h).
#include "worker/scorer.h"

#include <algorithm>
#include <utility>

#include "models/metrics.h"
#include "worker/compute_backend_factory.h"

namespace keel {
namespace {

// What requests to `artifact` must look like (Scorer::input).
InferenceInput InputOf(const ModelArtifact& artifact, const Hyperparameters& h) {
  InferenceInput input;
  input.libsvm_zero_based = artifact.libsvm_zero_based;
  if (h.feature_dim > 0) {
    input.input_dim = h.feature_dim;
  } else if (artifact.data_format == DataFormat::kCsv && !artifact.features.empty()) {
    input.input_dim = artifact.features.back() + 1;  // CSV rows store every column
  }
  return input;
}

}  // namespace

Scorer::Scorer(ModelArtifact artifact, const Hyperparameters& hyperparameters,
               const std::string& device, int threads)
    : artifact_(std::move(artifact)),
      hyperparameters_(hyperparameters),
      device_(device),
      threads_(threads),
      rows_(artifact_.features),
      input_(InputOf(artifact_, hyperparameters_)) {
  std::unique_ptr<ComputeBackend> backend = Borrow();  // checks the device
  width_ = backend->weight_width();
  prediction_width_ = backend->prediction_width();
  Return(std::move(backend));
}

Scorer::~Scorer() = default;

std::unique_ptr<ComputeBackend> Scorer::Borrow() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<ComputeBackend> backend = std::move(idle_.back());
      idle_.pop_back();
      return backend;
    }
  }
  return MakeComputeBackend(device_, threads_, hyperparameters_);
}

void Scorer::Return(std::unique_ptr<ComputeBackend> backend) const {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(backend));
}

double Scorer::Score(const Batch& batch, Predictions* out, uint64_t* unseen) const {
  PreparedBatch prepared;
  prepared.batch = batch;
  PrepareKeys(&prepared);
  return Score(prepared, out, unseen);
}

double Scorer::Score(const PreparedBatch& prepared, Predictions* out, uint64_t* unseen) const {
  const Batch& batch = prepared.batch;
  std::vector<float> weights(prepared.keys.size() * static_cast<size_t>(width_), 0.0f);
  std::vector<bool> missing(prepared.keys.size(), false);
  bool any_missing = false;
  for (size_t k = 0; k < prepared.keys.size(); ++k) {
    const size_t row = rows_.Find(prepared.keys[k]);
    if (row == ArtifactIndex::kNoRow) {
      missing[k] = any_missing = true;
      continue;
    }
    std::copy_n(artifact_.weights.begin() + row * width_, width_, weights.begin() + k * width_);
  }
  if (unseen != nullptr && any_missing) {
    for (uint32_t position : prepared.positions) *unseen += missing[position] ? 1 : 0;
  }

  std::unique_ptr<ComputeBackend> backend = Borrow();
  double loss = 0;
  try {
    loss = backend->Predict(prepared, weights.data(), artifact_.bias.data(), &out->scores);
  } catch (...) {
    Return(std::move(backend));
    throw;
  }
  Return(std::move(backend));

  const size_t rows = batch.rows();
  out->width = prediction_width_;
  out->scores.resize(rows * static_cast<size_t>(prediction_width_));
  out->labels.assign(rows, 0);
  switch (hyperparameters_.predictor_type) {
    case PredictorType::kBinaryClassifier: {
      out->kind = Predictions::Kind::kBinary;
      const double threshold = hyperparameters_.DecisionThreshold();
      for (size_t r = 0; r < rows; ++r) {
        out->labels[r] = PredictedPositive(out->scores[r], threshold) ? 1 : 0;
      }
      break;
    }
    case PredictorType::kRegressor:
      out->kind = Predictions::Kind::kRegressor;
      break;
    case PredictorType::kMulticlassClassifier:
      out->kind = Predictions::Kind::kMulticlass;
      for (size_t r = 0; r < rows; ++r) {
        const float* p = out->scores.data() + r * prediction_width_;
        out->labels[r] = static_cast<int>(std::max_element(p, p + prediction_width_) - p);
      }
      break;
  }
  return loss;
}

}  // namespace keel
