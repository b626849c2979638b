#include "worker/model_artifact.h"

#include <glog/logging.h>

#include <cstring>

#include "base/binary.h"
#include "base/checksum.h"
#include "base/error.h"
#include "io/storage.h"
#include "worker/model_json.h"

namespace keel {
namespace {

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'M', 'D', 'L', '1'};

// For messages: "DIR/NAME" for a local folder, the object's URI otherwise.
std::string NameOf(const std::string& dir, const Storage& storage, const std::string& name) {
  return IsStorageUri(dir) ? storage.UriOf(name) : dir + "/" + name;
}

// Restores what <dir>/model.json records into *model (ReadModelJson); a
// model without one keeps the defaults, with a note in the log.
void ReadDescription(const std::string& dir, Storage& storage, ModelArtifact* model) {
  const std::string path = NameOf(dir, storage, "model.json");
  std::string text;
  try {
    text = storage.Get("model.json");
  } catch (const NotFoundError&) {
    LOG(INFO) << "no " << path << ": the model is scored with default hyperparameters";
    return;
  }
  ReadModelJson(text, path, model);
}

}  // namespace

void ModelArtifact::Write(const std::string& dir) const {
  const Hyperparameters& h = hyperparameters;
  const uint32_t width = static_cast<uint32_t>(h.weight_width());
  if (weights.size() != features.size() * width) {
    throw MakeError("model artifact: ", weights.size(), " weights for ", features.size(),
                    " features of width ", width);
  }
  ByteWriter writer;
  writer.Reserve(64 + features.size() * (sizeof(uint64_t) + sizeof(float) * width) +
                 sizeof(float) * bias.size());
  writer.Bytes(kMagic, sizeof(kMagic));
  writer.Put<uint32_t>(kModelFormatVersion);
  writer.Put<uint32_t>(static_cast<uint32_t>(h.job));
  writer.Put<uint32_t>(static_cast<uint32_t>(h.predictor_type));
  writer.Put<uint32_t>(static_cast<uint32_t>(h.num_classes));
  writer.Put<uint32_t>(static_cast<uint32_t>(h.num_factors));
  writer.Put<uint32_t>(h.use_bias ? 1 : 0);
  writer.Put<uint32_t>(width);
  writer.Put<uint32_t>(static_cast<uint32_t>(bias.size()));
  writer.Put<uint64_t>(features.size());
  for (size_t i = 0; i < features.size(); ++i) {
    writer.Put<uint64_t>(features[i]);
    writer.Bytes(weights.data() + i * width, sizeof(float) * width);
  }
  writer.Bytes(bias.data(), sizeof(float) * bias.size());
  writer.Put<uint64_t>(Checksum64::Of(writer.out().data(), writer.out().size()));
  const std::string& bytes = writer.out();

  // Each file is replaced whole (a local one through a temporary file and a
  // rename), so a reader never sees half a model file.
  const std::unique_ptr<Storage> storage = OpenStorage(dir);
  storage->Put("weights.bin", bytes);
  storage->Put("model.json", ModelJson(*this));
}

ModelArtifact ModelArtifact::Read(const std::string& dir) {
  const std::unique_ptr<Storage> storage = OpenStorage(dir);
  const std::string path = NameOf(dir, *storage, "weights.bin");
  std::string text;
  try {
    text = storage->Get("weights.bin");
  } catch (const NotFoundError&) {
    throw MakeError("cannot read the model at ", path, " (is --model_dir right?)");
  }
  ByteReader reader(text, path);
  char magic[sizeof(kMagic)];
  reader.Bytes(magic, sizeof(magic), "the magic");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) throw MakeError(path, ": not a Keel model");
  const uint32_t version = reader.Get<uint32_t>("the version");
  if (version != kModelFormatVersion) {
    throw MakeError(path, ": format version ", version, " (this keel reads ", kModelFormatVersion,
                    ")");
  }
  ModelArtifact model;
  Hyperparameters& h = model.hyperparameters;
  const uint32_t job = reader.Get<uint32_t>("the job");
  const uint32_t predictor = reader.Get<uint32_t>("the predictor type");
  if (job > 1 || predictor > 2) throw MakeError(path, ": unknown job or predictor type");
  h.job = static_cast<JobKind>(job);
  h.predictor_type = static_cast<PredictorType>(predictor);
  h.num_classes = static_cast<int>(reader.Get<uint32_t>("num_classes"));
  h.num_factors = static_cast<int>(reader.Get<uint32_t>("num_factors"));
  h.use_bias = reader.Get<uint32_t>("use_bias") != 0;
  const uint32_t width = reader.Get<uint32_t>("the weight width");
  const uint32_t bias_width = reader.Get<uint32_t>("the bias width");
  if (width != static_cast<uint32_t>(h.weight_width()) || bias_width > 1000000) {
    throw MakeError(path, ": weight width ", width, " does not fit the model it describes");
  }
  const uint64_t count = reader.Get<uint64_t>("the feature count");
  if (count > text.size() / (sizeof(uint64_t) + sizeof(float) * width)) {
    throw MakeError(path, ": claims ", count, " features, more than the file holds");
  }
  model.features.resize(count);
  model.weights.resize(count * width);
  for (uint64_t i = 0; i < count; ++i) {
    model.features[i] = reader.Get<uint64_t>("a feature index");
    reader.Bytes(model.weights.data() + i * width, sizeof(float) * width, "weights");
  }
  model.bias.resize(bias_width);
  reader.Bytes(model.bias.data(), sizeof(float) * bias_width, "the bias");
  const uint64_t expected = Checksum64::Of(text.data(), reader.offset());
  uint64_t stored = 0;
  if (reader.offset() + sizeof(stored) != text.size()) {
    throw MakeError(path, ": ", text.size() - reader.offset(), " bytes where the 8-byte checksum",
                    " should end the file");
  }
  std::memcpy(&stored, text.data() + reader.offset(), sizeof(stored));
  if (stored != expected) throw MakeError(path, ": checksum mismatch (the file is corrupted)");
  ReadDescription(dir, *storage, &model);
  return model;
}

}  // namespace keel
