#include "worker/model_artifact.h"

#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "base/binary.h"
#include "base/checksum.h"
#include "base/error.h"
#include "base/json.h"
#include "base/json_reader.h"
#include "io/storage.h"
#include "worker/model_json.h"

namespace keel {
namespace {

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'M', 'D', 'L', '1'};
// model.json is a page of text; anything near this is not one.
constexpr uint64_t kMaxModelJsonBytes = uint64_t{16} << 20;
// A sanity bound on weights.bin (1 TiB), far above any model a job can dump.
constexpr uint64_t kMaxModelFileBytes = uint64_t{1} << 40;
// model.manifest names two files in a few hundred bytes.
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 10;
// A reader finding files other than the manifest names reads again this many
// times in all, this far apart, before it gives up.
// model.json alone differing is taken after kDescriptionAttempts.
constexpr int kManifestAttempts = 10;
constexpr int kDescriptionAttempts = 3;
constexpr int kManifestRetryMs = 100;

// The fixed part of weights.bin: what the model is and how large its parts
// are, each field checked against what a job can write.
struct ModelHeader {
  uint32_t job = 0, predictor = 0, num_classes = 0, num_factors = 0;
  bool use_bias = false;
  uint32_t width = 0, bias_width = 0;
  uint64_t count = 0;

  // Header, `count` rows of a feature index and `width` weights, the bias,
  // the checksum. Never overflows: count is bounded by kMaxModelFileBytes.
  uint64_t FileBytes() const {
    return kModelHeaderBytes + count * RowBytes() + sizeof(float) * uint64_t{bias_width} +
           sizeof(uint64_t);
  }
  uint64_t RowBytes() const { return sizeof(uint64_t) + sizeof(float) * uint64_t{width}; }
  void Into(Hyperparameters* h) const {
    h->job = static_cast<JobKind>(job);
    h->predictor_type = static_cast<PredictorType>(predictor);
    h->num_classes = static_cast<int>(num_classes);
    h->num_factors = static_cast<int>(num_factors);
    h->use_bias = use_bias;
  }
};

// The model's kind: a job and predictor type that go together, and the
// classes or factors its weights' width depends on within what training allows.
void ReadModelKind(ByteReader* in, ModelHeader* header) {
  const size_t at = in->offset();
  header->job = in->GetBounded<uint32_t>("the job", 0, 1);
  header->predictor = in->GetBounded<uint32_t>("the predictor type", 0, 2);
  Hyperparameters h;
  header->Into(&h);
  if (h.job == JobKind::kFactorizationMachines &&
      h.predictor_type == PredictorType::kMulticlassClassifier) {
    throw in->ErrorAt(at, "a factorization machine cannot be a multiclass_classifier");
  }
  const bool multiclass = h.predictor_type == PredictorType::kMulticlassClassifier;
  const bool factors = h.job == JobKind::kFactorizationMachines;
  header->num_classes = in->GetBounded<uint32_t>("num_classes", multiclass ? 3 : 0,
                                                 multiclass ? kMaxClasses : INT32_MAX);
  header->num_factors =
      in->GetBounded<uint32_t>("num_factors", factors ? 1 : 0, factors ? kMaxFactors : INT32_MAX);
  header->use_bias = in->GetBounded<uint32_t>("use_bias", 0, 1) != 0;
}

// A width that must be `expected`, the one the model's kind has.
uint32_t ReadWidth(ByteReader* in, const char* what, uint32_t expected) {
  const size_t at = in->offset();
  const auto width = in->Get<uint32_t>(what);
  if (width != expected) {
    throw in->ErrorAt(at, what, " ", width, " is not the ", expected, " a model of its kind has");
  }
  return width;
}

// The header, every field checked before anything is allocated: the widths
// must be the ones the model's kind has, the feature count within the sanity
// bound on the file's size.
ModelHeader ReadModelHeader(ByteReader* in) {
  char magic[sizeof(kMagic)];
  in->Bytes(magic, sizeof(magic), "the magic");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    throw MakeError(in->where(), ": not a Keel model");
  }
  const uint32_t version = in->Get<uint32_t>("the version");
  if (version != kModelFormatVersion) {
    throw MakeError(in->where(), ": format version ", version, " (this keel reads ",
                    kModelFormatVersion, ")");
  }
  ModelHeader header;
  ReadModelKind(in, &header);
  Hyperparameters h;
  header.Into(&h);
  const auto width = static_cast<uint32_t>(h.weight_width());
  const auto bias_width = static_cast<uint32_t>(h.bias_width());
  header.width = ReadWidth(in, "the weight width", width);
  header.bias_width = ReadWidth(in, "the bias width", bias_width);
  const uint64_t fixed = kModelHeaderBytes + sizeof(float) * bias_width + sizeof(uint64_t);
  header.count = in->GetBounded<uint64_t>("the feature count", 0,
                                          (kMaxModelFileBytes - fixed) / header.RowBytes());
  return header;
}

// The file is exactly as long as its header says.
void CheckModelFileSize(const ModelHeader& header, std::string_view bytes,
                        const std::string& where) {
  const uint64_t expected = header.FileBytes();
  if (bytes.size() < expected) {
    throw MakeError(where, ": truncated: ", bytes.size(), " bytes, where its header's ",
                    header.count, " features of width ", header.width, " make ", expected);
  }
  if (bytes.size() > expected) {
    throw MakeError(where, ": ", bytes.size() - expected, " bytes after the 8-byte checksum",
                    " that should end the file (its header's sizes make ", expected, " bytes)");
  }
}

// The last 8 bytes are the checksum of all the others.
void CheckModelChecksum(std::string_view bytes, const std::string& where) {
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, sizeof(stored));
  if (stored != Checksum64::Of(bytes.data(), body)) {
    throw MakeError(where, ": checksum mismatch (the file is corrupted)");
  }
}

// For messages: "DIR/NAME" for a local folder, the object's URI otherwise.
std::string NameOf(const std::string& dir, const Storage& storage, const std::string& name) {
  return IsStorageUri(dir) ? storage.UriOf(name) : dir + "/" + name;
}

// A model folder's files as read at one moment: weights.bin, model.json (""
// when there is none) and model.manifest ("" when there is none).
struct ModelFiles {
  std::string weights, description, manifest;
  bool has_description = false, has_manifest = false;
};

// Reads the text of `name` (at most `max_bytes`), or false if there is none.
bool ReadOptional(Storage& storage, const std::string& name, uint64_t max_bytes, const char* what,
                  std::string* text) {
  try {
    *text = GetAtMost(storage, name, max_bytes, what);
    return true;
  } catch (const NotFoundError&) {
    return false;
  }
}

ModelFiles ReadModelFiles(const std::string& dir, Storage& storage) {
  ModelFiles files;
  files.has_manifest = ReadOptional(storage, "model.manifest", kMaxManifestBytes,
                                    "a model.manifest", &files.manifest);
  const std::string path = NameOf(dir, storage, "weights.bin");
  try {
    // The header says how large the file must be; nothing more is read.
    const uint64_t size =
        ModelFileBytes(storage.GetRange("weights.bin", 0, kModelHeaderBytes), path);
    files.weights = GetAtMost(storage, "weights.bin", size, "the model file its header describes");
  } catch (const NotFoundError&) {
    throw MakeError("cannot read the model at ", path, " (is --model_dir right?)");
  }
  files.has_description =
      ReadOptional(storage, "model.json", kMaxModelJsonBytes, "a model.json", &files.description);
  return files;
}

// The model.manifest of files `names` with `contents`: each one's size and checksum.
std::string ManifestOf(const std::vector<std::pair<std::string, const std::string*>>& files) {
  std::string text = "{\"keel_model_manifest\":1,\"files\":[";
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& bytes = *files[i].second;
    text += std::string(i > 0 ? "," : "") + "{\"name\":" + JsonQuote(files[i].first) +
            ",\"bytes\":" + std::to_string(bytes.size()) + ",\"checksum\":\"" +
            ChecksumHex(Checksum64::Of(bytes.data(), bytes.size())) + "\"}";
  }
  return text + "]}\n";
}

// What differs between `files` and their manifest: `weights` for weights.bin,
// `description` for model.json ("" where they agree).
struct ManifestMismatch {
  std::string weights, description;
};

ManifestMismatch CompareWithManifest(const ModelFiles& files, const std::string& manifest_path) {
  const JsonValue manifest = ParseJson(files.manifest, manifest_path);
  const JsonValue* listed = manifest.Find("files");
  if (listed == nullptr || listed->type() != JsonValue::Type::kArray) {
    throw MakeError(manifest_path, ": no \"files\" array");
  }
  ManifestMismatch mismatch;
  for (const JsonValue& entry : listed->AsArray()) {
    const JsonValue* name = entry.Find("name");
    const JsonValue* bytes = entry.Find("bytes");
    const JsonValue* checksum = entry.Find("checksum");
    if (name == nullptr || bytes == nullptr || checksum == nullptr) {
      throw MakeError(manifest_path, ": byte ", entry.offset(),
                      ": a file entry needs \"name\", \"bytes\" and \"checksum\"");
    }
    const bool is_weights = name->AsString() == "weights.bin";
    if (!is_weights && name->AsString() != "model.json") continue;
    std::string& problem = is_weights ? mismatch.weights : mismatch.description;
    if (!is_weights && !files.has_description) {
      problem = "model.json is missing";
      continue;
    }
    const std::string& content = is_weights ? files.weights : files.description;
    const std::string found = ChecksumHex(Checksum64::Of(content.data(), content.size()));
    if (content.size() != bytes->AsUint64() || found != checksum->AsString()) {
      problem = name->AsString() + " has " + std::to_string(content.size()) + " bytes, checksum " +
                found + ", where the manifest names " + std::to_string(bytes->AsUint64()) +
                " bytes, checksum " + checksum->AsString();
    }
  }
  return mismatch;
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
  // A model is published files first, then the small manifest naming their
  // sizes and checksums: a reader that finds files other than the manifest
  // names (a publication under way, or one cut short) waits and reads again,
  // and never takes half of one model and half of another.
  const std::string description = ModelJson(*this);
  const std::unique_ptr<Storage> storage = OpenStorage(dir);
  storage->Put("weights.bin", bytes);
  storage->Put("model.json", description);
  storage->Put("model.manifest",
               ManifestOf({{"weights.bin", &bytes}, {"model.json", &description}}));
}

uint64_t ModelFileBytes(std::string_view header, const std::string& where) {
  ByteReader reader(header, where);
  return ReadModelHeader(&reader).FileBytes();
}

ModelArtifact ParseModelArtifact(std::string_view bytes, const std::string& where) {
  ByteReader reader(bytes, where);
  const ModelHeader header = ReadModelHeader(&reader);
  CheckModelFileSize(header, bytes, where);
  CheckModelChecksum(bytes, where);
  ModelArtifact model;
  header.Into(&model.hyperparameters);
  const uint32_t width = header.width;
  model.features.resize(header.count);
  model.weights.resize(header.count * width);
  for (uint64_t i = 0; i < header.count; ++i) {
    model.features[i] = reader.Get<uint64_t>("a feature index");
    reader.Bytes(model.weights.data() + i * width, sizeof(float) * width, "weights");
  }
  model.bias.resize(header.bias_width);
  reader.Bytes(model.bias.data(), sizeof(float) * header.bias_width, "the bias");
  return model;
}

ModelArtifact ModelArtifact::Read(const std::string& dir) {
  const std::unique_ptr<Storage> storage = OpenStorage(dir);
  const std::string weights_path = NameOf(dir, *storage, "weights.bin");
  const std::string manifest_path = NameOf(dir, *storage, "model.manifest");
  ModelFiles files;
  ModelArtifact model;
  for (int attempt = 1;; ++attempt) {
    files = ReadModelFiles(dir, *storage);
    // Each file is replaced whole, so a damaged weights.bin is damage, not a
    // publication under way: it fails at once.
    model = ParseModelArtifact(files.weights, weights_path);
    if (!files.has_manifest) break;  // a model from before manifests: its files as they are
    const ManifestMismatch mismatch = CompareWithManifest(files, manifest_path);
    if (mismatch.weights.empty() && mismatch.description.empty()) break;
    if (!mismatch.weights.empty() && attempt == kManifestAttempts) {
      throw MakeError(dir, ": ", mismatch.weights, " (", manifest_path,
                      "): the model is being written, or its writing was cut short");
    }
    // model.json alone differing for a while is a hand edit (a threshold
    // changed, say): taken, since it must still agree with weights.bin.
    if (mismatch.weights.empty() && attempt == kDescriptionAttempts) {
      LOG(WARNING) << dir << ": " << mismatch.description << " (" << manifest_path
                   << "); taking model.json as it is (edited after the model was written?)";
      break;
    }
    LOG(INFO) << dir << ": " << (mismatch.weights.empty() ? mismatch.description : mismatch.weights)
              << "; reading again (a model being written)";
    std::this_thread::sleep_for(std::chrono::milliseconds(kManifestRetryMs));
  }
  const std::string description_path = NameOf(dir, *storage, "model.json");
  if (files.has_description) {
    ReadModelJson(files.description, description_path, &model);
  } else {
    LOG(INFO) << "no " << description_path << ": the model is scored with default hyperparameters";
  }
  return model;
}

}  // namespace keel
