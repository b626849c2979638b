// The built-in training jobs on the command line: the worker's training run,
// `keel predict` and `keel datagen`. Their flags are in cli/job_flags.h.
#include <glog/logging.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <unordered_map>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "io/inference_format.h"
#include "io/input_split.h"
#include "models/metrics.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/datagen.h"
#include "worker/evaluator.h"
#include "worker/model_artifact.h"
#include "worker/scorer.h"
#include "worker/trainer.h"

namespace keel {
namespace {

bool FlagGiven(const char* name) { return !gflags::GetCommandLineFlagInfoOrDie(name).is_default; }

// Throws Error when flag `name`, given on the command line as `given`,
// contradicts the model's `recorded` value.
void RefuseContradiction(const char* name, const std::string& given, const std::string& recorded) {
  if (!FlagGiven(name) || given == recorded) return;
  throw MakeError("--", name, " ", given, " contradicts the model in ", FLAGS_model_dir, " (",
                  recorded, "): predict scores a model as it was trained; leave the flag out");
}

// The model's hyperparameters, with the flags predict may change (--f_beta and
// --accuracy_top_k: metrics only) applied. Throws Error for a flag that
// contradicts the model: --job, --predictor_type, --num_classes, --num_factors, --loss.
Hyperparameters ScoringHyperparameters(const ModelArtifact& artifact) {
  Hyperparameters h = artifact.hyperparameters;
  RefuseContradiction("job", FLAGS_job, h.JobName());
  RefuseContradiction("predictor_type", FLAGS_predictor_type, h.PredictorName());
  if (h.predictor_type == PredictorType::kMulticlassClassifier) {
    RefuseContradiction("num_classes", std::to_string(FLAGS_num_classes),
                        std::to_string(h.num_classes));
  }
  if (h.job == JobKind::kFactorizationMachines) {
    RefuseContradiction("num_factors", std::to_string(FLAGS_num_factors),
                        std::to_string(h.num_factors));
  }
  if (FlagGiven("loss")) {
    RefuseContradiction("loss", LossName(LossKindOf(h.predictor_type, FLAGS_loss)),
                        LossName(h.loss_function().kind));
  }
  if (FlagGiven("f_beta")) h.f_beta = FLAGS_f_beta;
  if (FlagGiven("accuracy_top_k")) h.accuracy_top_k = FLAGS_accuracy_top_k;
  h.Validate();
  return h;
}

// How predict reads --data: the model's data format and libsvm indexing unless
// the flags say otherwise, the model's label rule, no feature_dim (a feature
// the model has not seen weighs zero).
ReaderOptions PredictReaderOptions(const ModelArtifact& artifact, const Hyperparameters& h) {
  ReaderOptions reader = ReaderOptionsFromFlags();
  if (!FlagGiven("data_format")) reader.format = artifact.data_format;
  if (!FlagGiven("libsvm_zero_based")) reader.zero_based = artifact.libsvm_zero_based;
  reader.feature_dim = 0;
  return WithLabelRule(reader, h);
}

// Predict scores at most this many examples at a time, and at most as many
// as keep a batch's predictions within kPredictionBytes: a model of a million
// classes (4 MB of predictions an example) scores 16 at a time. Its batches'
// gathered weights (one row per feature in the batch) shrink with it.
constexpr size_t kPredictBatchRows = 4096;
constexpr size_t kPredictionBytes = size_t{64} << 20;

// The examples predict scores at a time for a model of `prediction_width`
// predictions an example. Throws Error, naming the model's weights.bin and its
// width, when one example's predictions alone exceed kPredictionBytes.
size_t PredictBatchRows(int prediction_width) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(std::max(1, prediction_width));
  if (row_bytes > kPredictionBytes) {
    throw MakeError(FLAGS_model_dir, "/weights.bin: ", prediction_width,
                    " predictions per example (num_classes) need ", row_bytes,
                    " bytes an example, more than predict's ", kPredictionBytes,
                    " bytes for a batch's predictions");
  }
  return std::min(kPredictBatchRows, kPredictionBytes / row_bytes);
}

}  // namespace

int RunTraining(Node* node, SchedulerLink* scheduler, KVWorker* client,
                TrainingCounters* counters) {
  const Hyperparameters hyperparameters = HyperparametersFromFlags();
  TrainerOptions options = TrainerOptionsFromFlags();
  options.counters = counters;
  if (counters) options.health = &counters->health;
  options.hyperparameter_json = HyperparameterJson();
  if (options.model_dir.empty()) {  // a worker started alone: the model is kept all the same
    options.model_dir = DefaultModelDir(FLAGS_job);
    if (node->rank() == 0) {
      LOG(WARNING) << "no --model_dir given: worker 0 writes the model to " << options.model_dir;
    }
  }
  options.reader = ResolveDataFormat(options.train, options.reader, node->rank() == 0);
  Trainer trainer(node, scheduler, client, hyperparameters, options);
  trainer.Run();
  return 0;
}

int RunPredict() {
  if (FLAGS_model_dir.empty() || FLAGS_data.empty() || FLAGS_out.empty()) {
    throw MakeError(
        "keel predict needs --model_dir, --data and --out (--out=- for standard "
        "output)");
  }
  const InferenceFormat format = ParseFormatName(FLAGS_accept);
  if (format == InferenceFormat::kLibsvm) {
    throw MakeError("--accept libsvm: predictions are written as csv, json, jsonlines or recordio");
  }
  ModelArtifact artifact = ModelArtifact::Read(FLAGS_model_dir);
  const Hyperparameters h = ScoringHyperparameters(artifact);
  ReaderOptions reader = PredictReaderOptions(artifact, h);
  const Scorer scorer(std::move(artifact), h, FLAGS_device, FLAGS_threads);
  const std::vector<InputSplit> splits = ResolveChannel(FLAGS_data, 0, 1);
  // Data to score need not be labelled: the first record says which it is.
  // (The first split of a file that is not empty: an empty part file says nothing.)
  const auto first = std::find_if(splits.begin(), splits.end(), [](const InputSplit& split) {
    return split.is_pipe || split.file_size > 0;
  });
  reader.labelled =
      first == splits.end() || FirstRecordLabelled(*first, reader, scorer.input().input_dim);
  BatchStream stream(splits, reader, PredictBatchRows(scorer.prediction_width()));

  const bool to_stdout = FLAGS_out == "-";
  std::ofstream file;
  if (!to_stdout) {
    file.open(FLAGS_out, std::ios::binary);
    if (!file) throw MakeError("cannot write ", FLAGS_out);
  }
  std::ostream& out = to_stdout ? std::cout : file;
  PredictionTally tally(h);
  double loss_sum = 0.0;
  size_t examples = 0;
  PreparedBatch batch;
  Predictions predictions;
  PredictionWriter writer(format, &out);
  uint64_t unseen = 0;
  const std::string destination = to_stdout ? "standard output" : FLAGS_out;
  try {
    while (stream.Next(&batch)) {
      loss_sum += scorer.Score(batch, &predictions, &unseen);
      writer.Write(predictions);
      examples += batch.batch.rows();
      if (reader.labelled) tally.Add(predictions.scores, batch.batch.labels);
    }
    writer.Finish();
  } catch (const Error& e) {
    if (!out) throw MakeError("cannot write ", destination);
    throw;
  }
  // With the predictions on standard output, the summary goes to standard error.
  std::ostream& summary = to_stdout ? std::cerr : std::cout;
  summary << "scored " << examples << (reader.labelled ? "" : " unlabelled") << " examples into "
          << destination << " as " << ContentTypeOf(format) << " (" << unseen
          << " feature occurrences the model has not seen)\n";
  if (reader.labelled) {
    const MetricSet metrics =
        tally.Metrics(loss_sum / static_cast<double>(std::max<size_t>(1, examples)));
    for (const auto& [name, value] : metrics) summary << "  " << name << " " << value << "\n";
  }
  return 0;
}

int RunDatagen() {
  DatagenOptions options;
  options.model = FLAGS_model;
  options.rows = FLAGS_rows;
  options.features = FLAGS_features;
  options.nnz = FLAGS_nnz;
  options.num_factors = FLAGS_num_factors;
  options.seed = FLAGS_seed;
  options.train_files = FLAGS_train_files;
  options.out = FLAGS_out;
  options.predictor_type = ParsePredictorType(FLAGS_predictor_type);
  options.num_classes = FLAGS_num_classes;
  if (!gflags::GetCommandLineFlagInfoOrDie("num_classes").is_default &&
      options.predictor_type != PredictorType::kMulticlassClassifier) {
    throw MakeError("--num_classes ", FLAGS_num_classes,
                    " needs --predictor_type=multiclass_classifier");
  }
  options.label_offset = FLAGS_label_offset;
  options.label_scale = FLAGS_label_scale;
  options.feature_scale_spread = FLAGS_feature_scale_spread;
  const MetricSet oracle = GenerateData(options);
  std::cout << "wrote " << options.rows << " training rows to " << options.out << "/train, "
            << options.rows / 10 << " each to validation and test\n";
  for (const auto& [name, value] : oracle) std::cout << "  oracle " << name << " " << value << "\n";
  return 0;
}

}  // namespace keel
