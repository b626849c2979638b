// The built-in training jobs on the command line: the worker's training run,
// `keel predict` (serve/batch_predict.h) and `keel datagen`. Their flags are
// in cli/job_flags.h.
#include <glog/logging.h>

#include <iostream>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "cli/tool_flags.h"
#include "io/input_split.h"
#include "models/metrics.h"
#include "worker/auto_minibatch.h"
#include "worker/datagen.h"
#include "worker/model_artifact.h"
#include "worker/trainer.h"
#include "worker/training_share.h"

namespace keel {
namespace {

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
  // Epochs not given are raised for small data (RaisesEpochs: which jobs).
  const bool validates = !options.validation.empty() || options.holdout > 0;
  const bool auto_epochs = !EpochsGiven() && RaisesEpochs(hyperparameters, validates);
  if ((hyperparameters.mini_batch_size == 0 || auto_epochs) && !IsPipeChannel(options.train)) {
    // A pipe is read once: it keeps the defaults, uncounted.
    // The workers that split this worker's channel (all, or its host's).
    const int workers = WorkersSharingChannel(options, node->view()->num_workers());
    const uint64_t rows = CountTrainingRows(options.train, options.reader, workers,
                                            auto_epochs ? hyperparameters.epochs : 0);
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
  PredictFile(std::move(artifact), h, reader, options);
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
