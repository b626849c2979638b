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
#include "cli/tool_flags.h"
#include "io/inference_format.h"
#include "io/input_split.h"
#include "models/metrics.h"
#include "worker/auto_minibatch.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/datagen.h"
#include "worker/evaluator.h"
#include "worker/model_artifact.h"
#include "worker/scorer.h"
#include "worker/trainer.h"
#include "worker/training_share.h"

namespace keel {
namespace {

// Predict scores at most this many examples at a time, and at most as many
// as keep a batch's predictions within kPredictionBytes: a model of a million
// classes (4 MB of predictions an example) scores 16 at a time. Its batches'
// gathered weights (one row per feature in the batch) shrink with it.
constexpr size_t kPredictBatchRows = 4096;
constexpr size_t kPredictionBytes = size_t{64} << 20;

// The examples predict scores at a time for a model of `prediction_width`
// predictions an example. Throws Error, naming the model's weights.bin and its
// width, when one example's predictions alone exceed kPredictionBytes.
size_t PredictBatchRows(int prediction_width, const std::string& model_dir) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(std::max(1, prediction_width));
  if (row_bytes > kPredictionBytes) {
    throw MakeError(model_dir, "/weights.bin: ", prediction_width,
                    " predictions per example (num_classes) need ", row_bytes,
                    " bytes an example, more than predict's ", kPredictionBytes,
                    " bytes for a batch's predictions");
  }
  return std::min(kPredictBatchRows, kPredictionBytes / row_bytes);
}

}  // namespace

int RunTraining(Node* node, SchedulerLink* scheduler, KVWorker* client,
                TrainingCounters* counters) {
  Hyperparameters hyperparameters = HyperparametersFromFlags();
  TrainerOptions options = TrainerOptionsFromFlags();
  options.counters = counters;
  if (counters) options.health = &counters->health;
  options.hyperparameter_json = HyperparameterJson();
  if (options.model_dir.empty()) {  // a worker started alone: the model is kept all the same
    options.model_dir = DefaultModelDirFromFlags();
    if (node->rank() == 0) {
      LOG(WARNING) << "no --model_dir given: worker 0 writes the model to " << options.model_dir;
    }
  }
  options.reader = ResolveDataFormat(options.train, options.reader, node->rank() == 0);
  // The factorization machine keeps its default epochs: its interactions
  // overfit, then diverge, with more (boston: exploding gradients by epoch 31).
  const bool auto_epochs =
      !EpochsGiven() && hyperparameters.job == JobKind::kLinearLearner;
  if ((hyperparameters.mini_batch_size == 0 || auto_epochs) && !IsPipeChannel(options.train)) {
    // A pipe is read once: it keeps the defaults, uncounted.
    // The workers that split this worker's channel (all, or its host's).
    const int workers = WorkersSharingChannel(options, node->view()->num_workers());
    const uint64_t rows = CountTrainingRows(options.train, options.reader, workers);
    if (hyperparameters.mini_batch_size == 0) {
      hyperparameters.mini_batch_size = AutoMinibatchSize(rows, workers);
    }
    if (auto_epochs) {
      hyperparameters.epochs =
          AutoEpochs(rows, workers, hyperparameters.mini_batch_size, hyperparameters.epochs);
    }
    LOG(INFO) << "worker " << node->rank() << ": " << options.train << " over " << workers
              << " worker(s): minibatches of " << hyperparameters.mini_batch_size << ", "
              << hyperparameters.epochs << " epoch(s)";
  }
  if (hyperparameters.mini_batch_size == 0) hyperparameters.mini_batch_size = kAutoMinibatchMost;
  Trainer trainer(node, scheduler, client, hyperparameters, options);
  trainer.Run();
  return 0;
}

int RunPredict() {
  const PredictOptions options = PredictOptionsFromFlags();
  ModelArtifact artifact = ModelArtifact::Read(options.model_dir);
  const Hyperparameters h = ScoringHyperparametersFromFlags(artifact, options.model_dir);
  ReaderOptions reader = PredictReaderOptionsFromFlags(artifact, h);
  if (!IsSet("data_format")) {
    // The data's own format when its first bytes show one (a model trained
    // on CSV scores libsvm rows too); else the model's training format.
    const DataFormat trained = reader.format;
    std::string note;
    reader = ResolveDataFormat(options.data, reader, /*log=*/false, &note);
    if (reader.format != trained) {
      std::cerr << "keel predict: " << note << " (the model trained on "
                << DataFormatName(trained) << " data)" << std::endl;
    }
  }
  const Scorer scorer(std::move(artifact), h, options.device, options.threads);
  const std::vector<InputSplit> splits = ResolveChannel(options.data, 0, 1);
  // Data to score need not be labelled: the first record says which it is.
  // (The first split of a file that is not empty: an empty part file says nothing.)
  const auto first = std::find_if(splits.begin(), splits.end(), [](const InputSplit& split) {
    return split.is_pipe || split.file_size > 0;
  });
  reader.labelled =
      first == splits.end() || FirstRecordLabelled(*first, reader, scorer.input().input_dim);
  BatchStream stream(splits, reader, PredictBatchRows(scorer.prediction_width(), options.model_dir));

  const bool to_stdout = options.out == "-";
  std::ofstream file;
  if (!to_stdout) {
    file.open(options.out, std::ios::binary);
    if (!file) throw MakeError("cannot write ", options.out);
  }
  std::ostream& out = to_stdout ? std::cout : file;
  PredictionTally tally(h);
  double loss_sum = 0.0;
  size_t examples = 0;
  PreparedBatch batch;
  Predictions predictions;
  PredictionWriter writer(options.format, &out);
  uint64_t unseen = 0;
  const std::string destination = to_stdout ? "standard output" : options.out;
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
          << destination << " as " << ContentTypeOf(options.format) << " (" << unseen
          << " feature occurrences the model has not seen)\n";
  if (reader.labelled) {
    const MetricSet metrics =
        tally.Metrics(loss_sum / static_cast<double>(std::max<size_t>(1, examples)));
    for (const auto& [name, value] : metrics) summary << "  " << name << " " << value << "\n";
  }
  return 0;
}

int RunDatagen() {
  const DatagenOptions options = DatagenOptionsFromFlags();
  const MetricSet oracle = GenerateData(options);
  std::cout << "wrote " << options.rows << " training rows to " << options.out << "/train, "
            << options.rows / 10 << " each to validation and test\n";
  for (const auto& [name, value] : oracle) std::cout << "  oracle " << name << " " << value << "\n";
  return 0;
}

}  // namespace keel
