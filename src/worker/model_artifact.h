// The model artifact a training job leaves in --model_dir: weights.bin (every
// touched feature's weights, the bias, and what is needed to score with them,
// with a checksum) and model.json (the same facts, every hyperparameter in
// force and how the data was read, for people, tools and `keel predict`;
// worker/model_json.h).
#ifndef KEEL_WORKER_MODEL_ARTIFACT_H_
#define KEEL_WORKER_MODEL_ARTIFACT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/readers.h"
#include "worker/hyperparameters.h"

namespace keel {

class Storage;

constexpr uint32_t kModelFormatVersion = 1;
// weights.bin's fixed part: magic, version, seven 32-bit fields, feature count.
constexpr size_t kModelHeaderBytes = 8 + 8 * sizeof(uint32_t) + sizeof(uint64_t);

struct ModelArtifact {
  Hyperparameters hyperparameters;  // job, predictor type, classes, factors, bias
  std::vector<uint64_t> features;   // sorted feature indices
  std::vector<float> weights;       // features.size() x weight_width
  std::vector<float> bias;          // bias width floats
  std::string hyperparameter_json;  // every flag of the job in force, as a JSON object
  // How the training data was read; predict reads its data so by default.
  DataFormat data_format = DataFormat::kLibsvm;
  bool libsvm_zero_based = false;
  // The job trained `trained_models` models side by side (num_models) and
  // this is model `selected_model` of them, chosen on validation (or on
  // training loss); `hyperparameters` are its own settings.
  int trained_models = 1;
  int selected_model = 0;
  // The data statistics in force in training, already folded into the
  // weights (DataStatistics::Json; empty: none), recorded in model.json.
  std::string data_statistics_json;

  // Writes <dir>/weights.bin and <dir>/model.json (creating dir), each
  // replaced whole. `dir` is a folder or a storage URI (file://, s3://;
  // io/storage.h). Throws Error. (Write and Read: worker/model_folder.cc.)
  void Write(const std::string& dir) const;
  // Reads <dir>/weights.bin and <dir>/model.json (a folder or a storage URI);
  // throws Error naming the file and what is wrong (missing, bad magic,
  // unsupported version, truncated, checksum mismatch; model.json: see
  // ReadModelJson). A model without model.json loads with default
  // hyperparameters, and says so in the log.
  static ModelArtifact Read(const std::string& dir);
  // The same from `storage`, the folder `dir` names opened (dir only names
  // the files in messages).
  static ModelArtifact Read(const std::string& dir, Storage& storage);
};

// The size a weights.bin must have, from its first kModelHeaderBytes bytes
// (`header`; fewer: truncated), once every header field is checked: a known
// job and predictor type that go together, classes and factors within what
// training allows, the widths those imply, a feature count within a sanity
// bound. Throws Error naming `where`, the field and its byte offset.
uint64_t ModelFileBytes(std::string_view header, const std::string& where);

// The bytes of weights.bin for `model` (what Write stores; ParseModelArtifact
// reads them back). Throws Error if the weights do not fit the features and
// the hyperparameters' width.
std::string EncodeModelArtifact(const ModelArtifact& model);

// The size and checksum (Checksum64 of every byte) of an encoded weights.bin.
struct EncodedModelFile {
  uint64_t bytes = 0;
  uint64_t checksum = 0;
};
// The same bytes handed to `sink` in order, in pieces of about 8 MiB (the
// file is never whole in memory); returns their size and checksum.
EncodedModelFile EncodeModelArtifact(const ModelArtifact& model,
                                     const std::function<void(std::string_view)>& sink);

// Decodes a whole weights.bin from memory (what a fuzz target calls): the
// header (as ModelFileBytes checks it), then the file's size against the
// header's and the checksum, all before allocating for the weights. The
// model.json facts keep their defaults. Throws Error naming `where`.
ModelArtifact ParseModelArtifact(std::string_view bytes, const std::string& where);

}  // namespace keel

#endif  // KEEL_WORKER_MODEL_ARTIFACT_H_
