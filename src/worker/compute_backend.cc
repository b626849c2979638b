#include "worker/compute_backend.h"

#include "base/error.h"

namespace keel {

ComputeBackend::ComputeBackend(const Hyperparameters& hyperparameters)
    : hyperparameters_(hyperparameters),
      loss_(hyperparameters.loss_function()),
      factorization_(hyperparameters.job == JobKind::kFactorizationMachines),
      classes_(hyperparameters.classes()),
      width_(hyperparameters.weight_width()),
      bias_width_(hyperparameters.bias_width()) {}

void ComputeBackend::SetClassWeights(const std::vector<float>& weights) {
  const size_t expected = classes_ == 1 ? 2 : static_cast<size_t>(classes_);
  if (!weights.empty() && weights.size() != expected) {
    throw MakeError("class weights: ", weights.size(), " weights for a model of ", expected,
                    " classes");
  }
  class_weights_ = weights;
  loss_.class_weights = class_weights_.empty() ? nullptr : class_weights_.data();
}

void ComputeBackend::CheckKeySet(const PreparedBatch& prepared) {
  if (prepared.key_offsets.size() != prepared.keys.size() + 1 ||
      prepared.positions.size() != prepared.batch.nnz()) {
    throw MakeError("a minibatch reached the model without its key set (PrepareKeys)");
  }
}

bool IsDenseBatch(const PreparedBatch& prepared) {
  const Batch& batch = prepared.batch;
  const size_t keys = prepared.keys.size();
  if (batch.rows() == 0 || keys == 0 || batch.nnz() != batch.rows() * keys) return false;
  for (size_t r = 0; r < batch.rows(); ++r) {
    if (batch.row_offsets[r + 1] - batch.row_offsets[r] != keys) return false;
  }
  for (size_t e = keys; e < batch.nnz(); ++e) {
    if (prepared.positions[e] != prepared.positions[e % keys]) return false;
  }
  return true;
}

}  // namespace keel
