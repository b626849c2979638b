#include "worker/model_artifact.h"

#include <cstring>
#include <string>
#include <utility>

#include "base/binary.h"
#include "base/checksum.h"
#include "base/error.h"
#include "base/piece_writer.h"

namespace keel {
namespace {

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'M', 'D', 'L', '1'};
// A sanity bound on weights.bin (1 TiB), far above any model a job can dump.
constexpr uint64_t kMaxModelFileBytes = uint64_t{1} << 40;

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

}  // namespace

EncodedModelFile EncodeModelArtifact(const ModelArtifact& model,
                                     const std::function<void(std::string_view)>& sink) {
  const Hyperparameters& h = model.hyperparameters;
  const uint32_t width = static_cast<uint32_t>(h.weight_width());
  if (model.weights.size() != model.features.size() * width) {
    throw MakeError("model artifact: ", model.weights.size(), " weights for ",
                    model.features.size(), " features of width ", width);
  }
  // Pieces of about 8 MiB: the file is never whole in memory.
  PieceWriter writer(sink, size_t{8} << 20);
  writer.Bytes(kMagic, sizeof(kMagic));
  writer.Put<uint32_t>(kModelFormatVersion);
  writer.Put<uint32_t>(static_cast<uint32_t>(h.job));
  writer.Put<uint32_t>(static_cast<uint32_t>(h.predictor_type));
  writer.Put<uint32_t>(static_cast<uint32_t>(h.num_classes));
  writer.Put<uint32_t>(static_cast<uint32_t>(h.num_factors));
  writer.Put<uint32_t>(h.use_bias ? 1 : 0);
  writer.Put<uint32_t>(width);
  writer.Put<uint32_t>(static_cast<uint32_t>(model.bias.size()));
  writer.Put<uint64_t>(model.features.size());
  for (size_t i = 0; i < model.features.size(); ++i) {
    writer.Put<uint64_t>(model.features[i]);
    writer.Bytes(model.weights.data() + i * width, sizeof(float) * width);
  }
  writer.Bytes(model.bias.data(), sizeof(float) * model.bias.size());
  // The file ends with the checksum of every byte before it; the manifest's
  // checksum (file.checksum) runs on over those last 8 bytes.
  writer.Finish();
  EncodedModelFile file;
  file.bytes = writer.bytes();
  file.checksum = writer.checksum();
  return file;
}

std::string EncodeModelArtifact(const ModelArtifact& model) {
  std::string bytes;
  bytes.reserve(64 + model.features.size() * (sizeof(uint64_t) + sizeof(float) *
                                                 static_cast<size_t>(model.hyperparameters.weight_width())) +
                sizeof(float) * model.bias.size());
  EncodeModelArtifact(model, [&](std::string_view piece) { bytes.append(piece); });
  return bytes;
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

}  // namespace keel
