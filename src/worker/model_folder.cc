// ModelArtifact::Write and ModelArtifact::Read (worker/model_artifact.h): a
// model folder's files published and read back, weights.bin
// (model_artifact.cc's encoding), model.json (model_json.h) and the
// model.manifest that names both.
#include <glog/logging.h>

#include <chrono>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/checksum.h"
#include "base/error.h"
#include "base/json.h"
#include "base/json_reader.h"
#include "io/storage.h"
#include "worker/model_artifact.h"
#include "worker/model_json.h"

namespace keel {
namespace {

// model.json is a page of text; anything near this is not one.
constexpr uint64_t kMaxModelJsonBytes = uint64_t{16} << 20;
// model.manifest names two files in a few hundred bytes.
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 10;
// A reader finding files other than the manifest names reads again this many
// times in all, this far apart, before it gives up.
// model.json alone differing is taken after kDescriptionAttempts.
constexpr int kManifestAttempts = 10;
constexpr int kDescriptionAttempts = 3;
constexpr int kManifestRetryMs = 100;
// weights.bin found other than its header, read just before, described is
// read again (header and whole) this many times in all before the reader
// gives up: each disagreement is a new file published between the two reads.
constexpr int kWeightsAttempts = 5;

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

// The bytes of weights.bin (`path` in messages), as one version of it. The
// header says how large the file must be, and nothing more is read (a byte
// more, to tell a larger file); the whole is read at once, a single version,
// but the file may have been replaced since its header was read (a model
// being published): if the whole begins with another header, both are read
// again, up to kWeightsAttempts times in all.
std::string ReadWeights(Storage& storage, const std::string& path) {
  for (int attempt = 1;; ++attempt) {
    const std::string header = storage.GetRange("weights.bin", 0, kModelHeaderBytes);
    const uint64_t size = ModelFileBytes(header, path);
    std::string bytes;
    try {
      bytes = storage.GetRange("weights.bin", 0, size + 1);
    } catch (const std::bad_alloc&) {
      throw MakeError(path, ": not enough memory to read the ", size,
                      " bytes of the model file its header describes");
    }
    if (bytes.compare(0, header.size(), header) == 0) {
      if (bytes.size() == size) return bytes;
      // The same header: not a new file but a damaged one. Too short, it is
      // truncated (ParseModelArtifact says so); too long, GetAtMost refuses
      // it, saying how long it is (unless replaced meanwhile: read again).
      if (bytes.size() < size) return bytes;
      GetAtMost(storage, "weights.bin", size, "the model file its header describes");
    }
    if (attempt == kWeightsAttempts) {
      throw MakeError(path, ": its header describes ", size, " bytes, but ", bytes.size(),
                      bytes.size() > size ? " or more" : "", " were read after it ",
                      kWeightsAttempts, " times: the file keeps changing while it is read");
    }
    LOG(INFO) << path << ": replaced while it was read; reading it again";
  }
}

ModelFiles ReadModelFiles(const std::string& dir, Storage& storage) {
  ModelFiles files;
  files.has_manifest = ReadOptional(storage, "model.manifest", kMaxManifestBytes,
                                    "a model.manifest", &files.manifest);
  const std::string path = NameOf(dir, storage, "weights.bin");
  try {
    files.weights = ReadWeights(storage, path);
  } catch (const NotFoundError&) {
    throw MakeError("cannot read the model at ", path, " (is --model_dir right?)");
  }
  files.has_description =
      ReadOptional(storage, "model.json", kMaxModelJsonBytes, "a model.json", &files.description);
  return files;
}

// A file a model.manifest names: its size and checksum.
struct ManifestEntry {
  std::string name;
  uint64_t bytes = 0;
  uint64_t checksum = 0;
};

ManifestEntry EntryOf(const std::string& name, const std::string& bytes) {
  return {name, bytes.size(), Checksum64::Of(bytes.data(), bytes.size())};
}

// The model.manifest of `files`.
std::string ManifestOf(const std::vector<ManifestEntry>& files) {
  constexpr auto kCompact = JsonObject::Style::kCompact;
  std::vector<std::string> entries;
  for (const ManifestEntry& file : files) {
    entries.push_back(JsonObject(kCompact)
                          .String("name", file.name)
                          .Count("bytes", file.bytes)
                          .String("checksum", ChecksumHex(file.checksum))
                          .Close());
  }
  return JsonObject(kCompact)
             .Integer("keel_model_manifest", 1)
             .Add("files", JsonArray(entries, kCompact))
             .Close() +
         "\n";
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

  // Each file is replaced whole (a local one through a temporary file and a
  // rename), so a reader never sees half a model file.
  // A model is published files first, then the small manifest naming their
  // sizes and checksums: a reader that finds files other than the manifest
  // names (a publication under way, or one cut short) waits and reads again,
  // and never takes half of one model and half of another.
  const std::string description = ModelJson(*this);
  const std::unique_ptr<Storage> storage = OpenStorage(dir);
  // weights.bin goes as it is encoded (a folder writes each piece as it
  // comes): the model is not held twice.
  EncodedModelFile weights;
  storage->PutPieces("weights.bin", [&](const Storage::PieceSink& sink) {
    weights = EncodeModelArtifact(*this, sink);
  });
  storage->Put("model.json", description);
  storage->Put("model.manifest", ManifestOf({{"weights.bin", weights.bytes, weights.checksum},
                                             EntryOf("model.json", description)}));
}

ModelArtifact ModelArtifact::Read(const std::string& dir) {
  const std::unique_ptr<Storage> storage = OpenStorage(dir);
  return Read(dir, *storage);
}

ModelArtifact ModelArtifact::Read(const std::string& dir, Storage& storage) {
  const std::string weights_path = NameOf(dir, storage, "weights.bin");
  const std::string manifest_path = NameOf(dir, storage, "model.manifest");
  ModelFiles files;
  ModelArtifact model;
  for (int attempt = 1;; ++attempt) {
    files = ReadModelFiles(dir, storage);
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
  const std::string description_path = NameOf(dir, storage, "model.json");
  if (files.has_description) {
    ReadModelJson(files.description, description_path, &model);
  } else {
    LOG(INFO) << "no " << description_path << ": the model is scored with default hyperparameters";
  }
  return model;
}

}  // namespace keel
