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
  // Epochs not given are raised for tiny data, the held-out rows keeping the
  // best epoch and stopping the job early: for the linear learner, and for a
  // factorization machine regressor, whose interactions must beat its linear
  // model clearly (boston's 5 epochs of about 11 minibatches a worker left it
  // at a test MSE of 29; at 55, 18). A factorization machine classifier keeps
  // its 5: its linear model (unpenalized ftrl) grows overconfident on nearly
  // separable rows as epochs pass, and the few held-out rows do not stop it
  // (breast_cancer's test accuracy, medians: 0.965 at 5 epochs, 0.955 at 19,
  // 0.951 at 30, 0.944 at the rule's 53: docs/BENCHMARKS.md, "Real data").
  const bool auto_epochs =
      !EpochsGiven() && (hyperparameters.job == JobKind::kLinearLearner ||
                         hyperparameters.predictor_type == PredictorType::kRegressor);
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
