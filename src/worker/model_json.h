// model.json, the readable half of a model artifact (worker/model_artifact.h):
// a format version, the facts weights.bin holds (job, predictor type, widths),
// how the data was read, the decision threshold, every hyperparameter in force
// with defaults resolved, and the job's flags, so that `keel predict` needs
// nothing else and a run can be reproduced from it.
#ifndef KEEL_WORKER_MODEL_JSON_H_
#define KEEL_WORKER_MODEL_JSON_H_

#include <cstdint>
#include <string>

#include "worker/model_artifact.h"

namespace keel {

// model.json's own format version. 1: the facts and the flags the user set
// (under "hyperparameters", as strings); 2: everything in force.
constexpr uint32_t kModelJsonVersion = 2;

// The model.json of `model`, one JSON object ending in a newline.
std::string ModelJson(const ModelArtifact& model);

// Restores into *model what model.json `text` records (its Hyperparameters,
// data format, threshold, and its flags' text as hyperparameter_json), after checking that it
// describes the model weights.bin holds (job, predictor type, classes, factors, bias, widths),
// which *model must already carry. Fields an older model.json lacks keep their defaults and are
// logged. Throws Error naming `path` and the field for a malformed document, a field of the wrong
// type or out of range, a newer format version, or a disagreement with weights.bin.
void ReadModelJson(const std::string& text, const std::string& path, ModelArtifact* model);

}  // namespace keel

#endif  // KEEL_WORKER_MODEL_JSON_H_
