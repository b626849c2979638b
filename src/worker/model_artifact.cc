#include "worker/model_artifact.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "io/storage.h"
#include "kv/error.h"

namespace keel {
namespace {

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'M', 'D', 'L', '1'};

// FNV-1a over the bytes written so far.
class Checksum {
 public:
  void Add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) hash_ = (hash_ ^ bytes[i]) * 0x100000001b3ULL;
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename T>
  void Put(const T& value) {
    Bytes(&value, sizeof(T));
  }
  void Bytes(const void* data, size_t size) {
    checksum_.Add(data, size);
    out_->append(static_cast<const char*>(data), size);
  }
  uint64_t checksum() const { return checksum_.value(); }

 private:
  std::string* out_;
  Checksum checksum_;
};

class Reader {
 public:
  Reader(const std::string& text, const std::string& path) : text_(text), path_(path) {}
  template <typename T>
  T Get(const char* what) {
    T value;
    Bytes(&value, sizeof(T), what);
    return value;
  }
  void Bytes(void* data, size_t size, const char* what) {
    if (offset_ + size > text_.size()) {
      throw MakeError(path_, ": truncated at byte ", offset_, " (reading ", what, ")");
    }
    std::memcpy(data, text_.data() + offset_, size);
    checksum_.Add(data, size);
    offset_ += size;
  }
  size_t offset() const { return offset_; }
  uint64_t checksum() const { return checksum_.value(); }

 private:
  const std::string& text_;
  std::string path_;
  size_t offset_ = 0;
  Checksum checksum_;
};

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// For messages: "DIR/NAME" for a local folder, the object's URI otherwise.
std::string NameOf(const std::string& dir, const Storage& storage, const std::string& name) {
  return IsStorageUri(dir) ? storage.UriOf(name) : dir + "/" + name;
}

}  // namespace

void MakeDirectories(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') partial = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    partial += part + "/";
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw MakeError("cannot create folder ", partial, ": ", strerror(errno));
    }
  }
}

void ModelArtifact::Write(const std::string& dir) const {
  const Hyperparameters& h = hyperparameters;
  const uint32_t width = static_cast<uint32_t>(h.weight_width());
  if (weights.size() != features.size() * width) {
    throw MakeError("model artifact: ", weights.size(), " weights for ", features.size(),
                    " features of width ", width);
  }
  std::string bytes;
  bytes.reserve(64 + features.size() * (sizeof(uint64_t) + sizeof(float) * width) +
                sizeof(float) * bias.size());
  Writer writer(&bytes);
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
  const uint64_t checksum = writer.checksum();
  bytes.append(reinterpret_cast<const char*>(&checksum), sizeof(checksum));

  std::ostringstream json;
  json << "{\"format_version\":" << kModelFormatVersion << ",\"job\":" << JsonString(h.JobName())
       << ",\"predictor_type\":" << JsonString(h.PredictorName())
       << ",\"num_classes\":" << h.classes()
       << ",\"num_factors\":" << (h.job == JobKind::kFactorizationMachines ? h.num_factors : 0)
       << ",\"use_bias\":" << (h.use_bias ? "true" : "false") << ",\"weight_width\":" << width
       << ",\"features\":" << features.size() << ",\"weights_file\":\"weights.bin\""
       << ",\"hyperparameters\":" << (hyperparameter_json.empty() ? "{}" : hyperparameter_json)
       << "}\n";

  // Each file is replaced whole (a local one through a temporary file and a
  // rename), so a reader never sees half a model file.
  const std::unique_ptr<Storage> storage = OpenStorage(dir);
  storage->Put("weights.bin", bytes);
  storage->Put("model.json", json.str());
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
  Reader reader(text, path);
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
  const uint64_t expected = reader.checksum();
  uint64_t stored = 0;
  if (reader.offset() + sizeof(stored) != text.size()) {
    throw MakeError(path, ": ", text.size() - reader.offset(), " bytes where the 8-byte checksum",
                    " should end the file");
  }
  std::memcpy(&stored, text.data() + reader.offset(), sizeof(stored));
  if (stored != expected) throw MakeError(path, ": checksum mismatch (the file is corrupted)");
  return model;
}

}  // namespace keel
