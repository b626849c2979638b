// Writes the binary seed corpora of the fuzz targets with the code's own
// writers: make_seeds CORPUS_ROOT writes CORPUS_ROOT/<target>/<name> for the
// message, snapshot, model_artifact and recordio_reader targets, and the
// recordIO seeds of the inference_request target (the text seeds are written
// by hand). Run by tests/fuzz/make_seeds.sh.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "base/files.h"
#include "fuzz_util.h"
#include "io/checkpoint.h"
#include "io/recordio.h"
#include "kv/message.h"
#include "worker/model_artifact.h"

namespace {

using keel::fuzz::WriteScratchFile;

// The message target's framing (message_fuzzer.cc) of Encode's frames.
std::string Framed(const keel::Message& message) {
  std::vector<zmq::message_t> frames = keel::Encode(message);
  std::string out(1, static_cast<char>(frames.size()));
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i + 1 < frames.size()) {
      const uint32_t length = static_cast<uint32_t>(frames[i].size());
      out.append(reinterpret_cast<const char*>(&length), sizeof(length));
    }
    out.append(static_cast<const char*>(frames[i].data()), frames[i].size());
  }
  return out;
}

template <typename T>
keel::Bytes FrameOf(const std::vector<T>& items) {
  auto owned = std::make_shared<std::vector<T>>(items);
  return keel::Bytes(owned, reinterpret_cast<char*>(owned->data()), owned->size() * sizeof(T));
}

void WriteMessageSeeds(const std::string& dir) {
  keel::Message push;
  push.meta.set_command(keel::proto::PUSH);
  push.meta.set_sender(9);
  push.meta.set_sequence(17);
  push.meta.set_epoch(1);
  push.meta.set_key_count(3);
  push.meta.set_value_width(2);
  push.frames = {FrameOf(std::vector<uint64_t>{3, 8, 1000}),
                 FrameOf(std::vector<float>{0.5f, -1, 2, 0, 0.25f, 4})};
  WriteScratchFile(dir + "/push", Framed(push));

  keel::Message pull = push;
  pull.meta.set_command(keel::proto::PULL);
  pull.frames.pop_back();
  WriteScratchFile(dir + "/pull", Framed(pull));

  keel::Message dump;
  dump.meta.set_command(keel::proto::DUMP);
  dump.meta.set_table(1);
  dump.meta.set_value_width(4);
  WriteScratchFile(dir + "/dump", Framed(dump));

  keel::Message shutdown;
  shutdown.meta.set_command(keel::proto::SHUTDOWN);
  WriteScratchFile(dir + "/shutdown", Framed(shutdown));
}

void WriteSnapshotSeeds(const std::string& dir) {
  keel::ServerSnapshot snapshot;
  snapshot.server_rank = 1;
  snapshot.spans = {{0, 99}, {200, 299}};
  keel::SnapshotTable weights;
  weights.table = 0;
  weights.weight_width = 1;
  weights.row_width = 2;
  weights.keys = {4, 7, 90};
  weights.rows = {0.5f, 1, -0.25f, 2, 3, 0};
  snapshot.tables.push_back(weights);
  keel::SnapshotTable bias;
  bias.table = 1;
  bias.weight_width = 1;
  bias.row_width = 1;
  bias.keys = {0};
  bias.rows = {0.125f};
  snapshot.tables.push_back(bias);
  WriteScratchFile(dir + "/two_tables.snap", keel::EncodeSnapshot(snapshot, nullptr));
  WriteScratchFile(dir + "/empty.snap", keel::EncodeSnapshot(keel::ServerSnapshot{}, nullptr));
  // A delta: removed keys and admission counters.
  keel::ServerSnapshot delta;
  delta.delta = true;
  delta.server_rank = 0;
  delta.spans = {{0, ~uint64_t{0}}};
  keel::SnapshotTable changed;
  changed.table = 0;
  changed.weight_width = 1;
  changed.row_width = 1;
  changed.keys = {5};
  changed.rows = {1.5f};
  changed.deleted = {3, 9};
  keel::RangeSketch counters;
  counters.first = 0;
  counters.last = ~uint64_t{0};
  counters.depth = 4;
  counters.width = 1024;
  counters.counters.assign(4 * 1024, 0);
  counters.counters[7] = 2;
  changed.sketches.push_back(counters);
  changed.clocks.push_back(keel::RangeClock{0, ~uint64_t{0}, 40});
  changed.pushed_at = {38};
  delta.tables.push_back(changed);
  WriteScratchFile(dir + "/delta.snap", keel::EncodeSnapshot(delta, nullptr));
}

void WriteModelSeed(const keel::ModelArtifact& model, const std::string& path) {
  const std::string folder = keel::fuzz::ScratchFolder() + "/model";
  model.Write(folder);
  WriteScratchFile(path, keel::ReadFile(folder + "/weights.bin") + "\n--model.json--\n" +
                             keel::ReadFile(folder + "/model.json"));
}

void WriteModelSeeds(const std::string& dir) {
  keel::ModelArtifact linear;
  linear.features = {1, 5, 42};
  linear.weights = {0.5f, -1, 2};
  linear.bias = {0.1f};
  WriteModelSeed(linear, dir + "/linear");

  keel::ModelArtifact fm;
  fm.hyperparameters.job = keel::JobKind::kFactorizationMachines;
  fm.hyperparameters.num_factors = 2;
  fm.features = {3, 9};
  fm.weights = {1, 0.5f, -0.5f, 2, 0.25f, 0};
  fm.bias = {0};
  WriteModelSeed(fm, dir + "/factorization_machines");
}

aialgs::data::Record DenseRecord(const std::vector<float>& values, float label) {
  aialgs::data::Record record;
  auto* features = (*record.mutable_features())["values"].mutable_float32_tensor();
  for (float value : values) features->add_values(value);
  (*record.mutable_label())["values"].mutable_float32_tensor()->add_values(label);
  return record;
}

void WriteRecordIOSeeds(const std::string& dir) {
  {
    keel::RecordIOWriter writer(dir + "/dense.rec");
    writer.Write(DenseRecord({1, 0, 2}, 1));
    writer.Write(DenseRecord({3, 4, 0}, 0));
    writer.Flush();
  }
  {
    keel::RecordIOWriter writer(dir + "/sparse.rec");
    aialgs::data::Record record = DenseRecord({0.5f, -1}, 1);
    auto* features = (*record.mutable_features())["values"].mutable_float32_tensor();
    features->add_keys(3);
    features->add_keys(70);
    features->add_shape(100);
    writer.Write(record);
    writer.Flush();
  }
  {
    // A payload holding the magic at an aligned offset is written in parts.
    keel::RecordIOWriter writer(dir + "/multi_part.rec");
    float magic;
    std::memcpy(&magic, &keel::kRecordIOMagic, sizeof(magic));
    writer.Write(DenseRecord({1, magic, 2, magic}, 0));
    writer.Flush();
  }
}

// The inference_request target's input: a selector byte (format, libsvm
// indexing, input width; inference_request_fuzzer.cc) and recordIO records.
void WriteInferenceRequestSeed(char selector, const std::vector<aialgs::data::Record>& records,
                               const std::string& path) {
  std::ostringstream body;
  keel::RecordIOWriter writer(&body);
  for (const aialgs::data::Record& record : records) writer.Write(record);
  writer.Flush();
  WriteScratchFile(path, selector + body.str());
}

void WriteInferenceRequestSeeds(const std::string& dir) {
  // '@': recordIO, input width 3; ',': recordIO, no input width.
  WriteInferenceRequestSeed('@', {DenseRecord({1, 0, 2}, 1), DenseRecord({3, 4, 0}, 0)},
                            dir + "/recordio_dense_width_3.rec");
  float magic;
  std::memcpy(&magic, &keel::kRecordIOMagic, sizeof(magic));
  WriteInferenceRequestSeed(',', {DenseRecord({1, magic, 2, magic}, 0)},
                            dir + "/recordio_multi_part.rec");
  aialgs::data::Record sparse = DenseRecord({0.5f, -1}, 1);
  auto* features = (*sparse.mutable_features())["values"].mutable_float32_tensor();
  features->add_keys(3);
  features->add_keys(70);
  features->add_shape(100);
  WriteInferenceRequestSeed(',', {sparse}, dir + "/recordio_sparse.rec");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " CORPUS_ROOT\n";
    return 2;
  }
  keel::fuzz::QuietLogging();
  const std::string root = argv[1];
  for (const char* target :
       {"message", "snapshot", "model_artifact", "recordio_reader", "inference_request"}) {
    std::filesystem::create_directories(root + "/" + target);
  }
  WriteMessageSeeds(root + "/message");
  WriteSnapshotSeeds(root + "/snapshot");
  WriteModelSeeds(root + "/model_artifact");
  WriteRecordIOSeeds(root + "/recordio_reader");
  WriteInferenceRequestSeeds(root + "/inference_request");
  return 0;
}
