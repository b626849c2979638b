// Scorer: a trained model (worker/model_artifact.h) ready to score batches of
// examples, the one code `keel predict` and `keel serve` share, so a
// prediction served equals one written by predict.
//
// A feature the model has not seen weighs zero. The data statistics the job
// trained with are already folded into the artifact's weights, so raw
// features are scored as they are.
//
// Thread-safe: Score may be called from several threads at once (each call
// borrows a compute backend of its own from a pool).
#ifndef KEEL_WORKER_SCORER_H_
#define KEEL_WORKER_SCORER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/batch.h"
#include "io/inference_format.h"
#include "kv/keys.h"
#include "worker/artifact_index.h"
#include "worker/compute_backend.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"
#include "worker/prepared_batch.h"

namespace keel {

class Scorer {
 public:
  // Scores with `artifact` under `hyperparameters` (the artifact's own, or
  // with metric-only settings changed) on `device` with `threads` threads per
  // call. Throws Error for a device this build cannot use.
  Scorer(ModelArtifact artifact, const Hyperparameters& hyperparameters,
         const std::string& device = "cpu", int threads = 1);
  ~Scorer();
  Scorer(const Scorer&) = delete;
  Scorer& operator=(const Scorer&) = delete;

  // Scores the rows of `batch` (labels are used only for the returned loss):
  // sets *out's kind, width, scores and predicted labels (the model's tuned
  // threshold for a binary classifier, the most probable class for a
  // multiclass one). Returns the summed loss. *unseen, if given, is increased
  // by the feature occurrences the model has not seen.
  double Score(const Batch& batch, Predictions* out, uint64_t* unseen = nullptr) const;
  // The same for a batch whose keys are prepared (worker/batch_stream.h).
  double Score(const PreparedBatch& batch, Predictions* out, uint64_t* unseen = nullptr) const;

  const ModelArtifact& artifact() const { return artifact_; }
  const Hyperparameters& hyperparameters() const { return hyperparameters_; }
  // Scores per example (classes of a multiclass model, else 1).
  int prediction_width() const { return prediction_width_; }
  // What requests must look like: the model's input width (--feature_dim if
  // the job had one; for a model trained on CSV, its column count; else 0,
  // unbounded) and its libsvm indexing.
  const InferenceInput& input() const { return input_; }

 private:
  std::unique_ptr<ComputeBackend> Borrow() const;
  void Return(std::unique_ptr<ComputeBackend> backend) const;

  const ModelArtifact artifact_;
  const Hyperparameters hyperparameters_;
  const std::string device_;
  const int threads_;
  const ArtifactIndex rows_;  // the artifact's rows by mixed key
  int width_ = 1;             // floats per row
  int prediction_width_ = 1;
  InferenceInput input_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<ComputeBackend>> idle_;
};

}  // namespace keel

#endif  // KEEL_WORKER_SCORER_H_
