// The model artifact a training job leaves in --model_dir: weights.bin (every
// touched feature's weights, the bias, and what is needed to score with them,
// with a checksum) and model.json (the same facts and the hyperparameters, for
// people and tools).
#ifndef KEEL_WORKER_MODEL_ARTIFACT_H_
#define KEEL_WORKER_MODEL_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "worker/hyperparameters.h"

namespace keel {

constexpr uint32_t kModelFormatVersion = 1;

struct ModelArtifact {
  Hyperparameters hyperparameters;  // job, predictor type, classes, factors, bias
  std::vector<uint64_t> features;   // sorted feature indices
  std::vector<float> weights;       // features.size() x weight_width
  std::vector<float> bias;          // bias width floats
  std::string hyperparameter_json;  // every flag of the job, as a JSON object

  // Writes <dir>/weights.bin and <dir>/model.json (creating dir), each
  // replaced whole. `dir` is a folder or a storage URI (file://, s3://;
  // io/storage.h). Throws Error.
  void Write(const std::string& dir) const;
  // Reads <dir>/weights.bin (a folder or a storage URI); throws Error naming
  // the file and what is wrong (missing, bad magic, unsupported version,
  // truncated, checksum mismatch).
  static ModelArtifact Read(const std::string& dir);
};

}  // namespace keel

#endif  // KEEL_WORKER_MODEL_ARTIFACT_H_
