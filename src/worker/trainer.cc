#include "worker/trainer.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <future>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include "base/checksum.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "base/time.h"
#include "worker/barriers.h"
#include "worker/best_epoch_store.h"
#include "worker/compute_backend_factory.h"
#include "worker/early_stopping.h"
#include "worker/gate_report.h"
#include "worker/metrics_files.h"
#include "worker/model_dump.h"
#include "worker/model_selection.h"
#include "worker/progress_reports.h"
#include "worker/shard_check.h"
#include "worker/training_cursor.h"
#include "worker/training_loss.h"
#include "worker/training_share.h"

namespace keel {
namespace {

// The machine's memory, which bounds what a worker keeps of its data.
uint64_t PhysicalMemoryBytes() {
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// The reader checks feature indices against --feature_dim and labels by the
// predictor type.
// `options` with the data's checks (labels, feature_dim), and its holdout
// applied: the training reader skips the held-out rows, which are the
// validation channel (read with HeldOutReader).
TrainerOptions WithDataChecks(TrainerOptions options, const Hyperparameters& hyperparameters) {
  options.reader = WithLabelRule(options.reader, hyperparameters);
  options.reader.feature_dim = hyperparameters.feature_dim;
  if (options.holdout > 0) {
    options.validation = options.train;
    options.reader.holdout_share = options.holdout;
    options.reader.holdout_side = false;
  }
  return options;
}

// `reader` for the held-out rows alone (with a holdout), or for every row.
ReaderOptions HeldOutReader(ReaderOptions reader) {
  reader.holdout_side = true;
  return reader;
}

// `reader` for every row of a channel (the test channel).
ReaderOptions EveryRowReader(ReaderOptions reader) {
  reader.holdout_share = 0.0;
  return reader;
}

void LogEpochDone(int rank, int epoch, const EpochResult& result) {
  LOG(INFO) << "worker " << rank << " epoch " << epoch << " done: " << result.examples
            << " examples"
            << (result.resumed_examples
                    ? " (" + std::to_string(result.resumed_examples) + " of them before a resume)"
                    : std::string())
            << " in " << std::fixed << std::setprecision(2) << result.seconds << " s ("
            << static_cast<uint64_t>((result.examples - result.resumed_examples) /
                                     std::max(result.seconds, 1e-9))
            << " examples/s), mean training loss "
            << (result.examples ? result.losses[0] / result.examples : 0.0)
            << (result.losses.size() > 1 ? " (model 0)" : "") << "; waiting for data "
            << result.read_wait << " s, for rows " << result.pull_wait << " s, computing "
            << result.compute << " s, pushing " << result.push << " s";
}

}  // namespace

Trainer::Trainer(Node* node, SchedulerLink* scheduler, KVWorker* client,
                 const Hyperparameters& hyperparameters, TrainerOptions options)
    : node_(node),
      scheduler_(scheduler),
      client_(client),
      hyperparameters_(hyperparameters),
      options_(WithDataChecks(std::move(options), hyperparameters)),
      backend_(MakeComputeBackend(options_.device, options_.threads, hyperparameters)),
      model_(*backend_),
      one_model_(
          hyperparameters.num_models > 1
              ? MakeComputeBackend(options_.device, options_.threads, hyperparameters.Model(0))
              : nullptr),
      control_(client),
      evaluator_(client, backend_.get(), one_model_ ? one_model_.get() : backend_.get(),
                 hyperparameters, EveryRowReader(options_.reader)),
      validation_reader_(HeldOutReader(options_.reader)),
      epoch_trainer_(node, scheduler, client, backend_.get(), hyperparameters, options_, &state_) {
  if (options_.train.empty()) throw MakeError("--train is required");
  if (options_.holdout > 0 && node_->rank() == 0) {
    std::cout << "no --validation: " << options_.holdout * 100 << "% of the training rows are held "
              << "out to select the model and the epoch and to stop early (--holdout=0 trains on "
              << "every row)" << std::endl;
  }
}

void Trainer::Run() {
  state_.set_best_loss(std::numeric_limits<double>::infinity());
  const proto::WorkerCursor resume = StartingPoint(scheduler_, &state_);
  if (node_->rank() == 0) RestoreBestEpoch();
  // Time already spent by the run this one resumes.
  const double started = MonotonicSeconds() - state_.elapsed_seconds();
  timeline_ = std::make_unique<TimelineRecorder>(options_.model_dir, node_->rank(),
                                                 /*resumed=*/resume.epoch() > 0);
  timeline_->set_client(client_);
  epoch_trainer_.set_timeline(timeline_.get());
  const int first_epoch = std::max(1, resume.epoch());
  PrepareData(first_epoch);
  // Rows the servers had before this run's first epoch (resumed: from the checkpoint).
  if (node_->rank() == 0) rows_before_ = ReadTableRows(client_, HealthWidths());
  scheduler_->SetProgressReport(ShareReport(hyperparameters_.epochs, share_examples_));
  int epoch = first_epoch;
  for (; epoch <= hyperparameters_.epochs && !state_.stopped(); ++epoch) {
    timeline_->BeginEpoch();
    const EpochResult result = epoch_trainer_.Train(epoch, resume);
    CountEpoch(epoch, result);
    const std::string tag = "epoch " + std::to_string(epoch);
    node_->Barrier(kWorkerGroup, kBarrierTimeoutS, tag + " counted");
    if (node_->rank() == 0) DecideEpoch(epoch, result.epoch_examples, started);
    node_->Barrier(kWorkerGroup, kBarrierTimeoutS, tag + " decided");
    if (control_.Read(ControlTable::kStopFeature) > 0) state_.set_stopped(true);
  }
  if (checkpoints()) {
    // The job's last checkpoint (answered once committed; skipped by the
    // scheduler when the job resumed from it).
    state_.set_elapsed_seconds(MonotonicSeconds() - started);
    StopForCheckpoint(scheduler_, CursorAt(epoch, 0, 0, {}), state_, /*final=*/true);
  }
  MetricSet final_metrics(state_.metrics().begin(), state_.metrics().end());
  ReportGate(node_, client_, &control_, options_.staleness, state_.training_seconds(),
             state_.pull_wait_seconds(), &final_metrics);
  timeline_->Flush();
  if (node_->rank() != 0) return;
  FinishJob(epoch - 1, &final_metrics);
  scheduler_->ReportProgress(OutcomeReport(hyperparameters_.epochs, epoch - 1, state_.stopped(),
                                           final_metrics, options_.model_dir));
}

void Trainer::PrepareData(int first_epoch) {
  const double started = MonotonicSeconds();
  OpenCache(first_epoch);
  // Worker 0 scores the validation rows after every epoch: their prepared
  // batches are kept in memory for the next epoch's pass (as the training
  // share's are cached), up to the cache's bound and a sixteenth of the
  // machine's memory; --cache_dir=none parses them every epoch.
  if (options_.cache_dir != "none") {
    evaluator_.HoldChannels(std::min(options_.cache_max_bytes, PhysicalMemoryBytes() / 16));
  }
  if (IsPipeChannel(options_.train)) HoldPipeHead();
  // The statistics' sample is read while the shard is checked: both only
  // read, and start-up waits for both. (The check's error comes first: the
  // future waits for the sample as it goes out of scope.)
  // A resumed job's statistics take the rows it began with (its checkpoint's).
  const std::optional<uint64_t> recorded_rows =
      state_.has_statistics_rows() ? std::optional<uint64_t>(state_.statistics_rows())
                                   : std::nullopt;
  std::future<DataStatistics> statistics = std::async(std::launch::async, [this, recorded_rows] {
    const ChannelSample sample = StatisticsSample();
    trivial_ = FitTrivialPredictor(sample.rows, hyperparameters_);
    return ComputeDataStatistics(sample.rows, hyperparameters_,
                                 recorded_rows.value_or(sample.channel_rows));
  });
  if (!options_.reader.skip_bad_records && !IsPipeChannel(options_.train)) {
    share_examples_ = CheckTrainingShard();
  }
  statistics_ = statistics.get();
  state_.set_statistics_rows(statistics_.training_rows);
  LOG(INFO) << "worker " << node_->rank() << ": data statistics " << statistics_.Json()
            << " (checks and statistics took " << std::fixed << std::setprecision(2)
            << MonotonicSeconds() - started << " s)";
  model_.SetClassWeights(statistics_.class_weights);
  if (one_model_) one_model_->SetClassWeights(statistics_.class_weights);
  if (!statistics_.LeavesDataAlone()) {
    scaler_ = std::make_unique<DataScaler>(statistics_);
    epoch_trainer_.set_scaler(scaler_.get());
  }
}

void Trainer::OpenCache(int first_epoch) {
  if (options_.cache_dir == "none") return;
  std::string folder = options_.cache_dir;
  if (folder.empty()) {
    if (first_epoch >= hyperparameters_.epochs) {
      // Writing it would slow the only epoch left for nothing (a pipe, read
      // once, needs no second pass either). A folder the user names keeps
      // its cache for a later job, so it is written there.
      const std::string why = first_epoch > hyperparameters_.epochs ? "no epoch is left to run"
                              : first_epoch > 1
                                  ? "only epoch " + std::to_string(first_epoch) + " is left"
                                  : "the job has one epoch";
      LOG(INFO) << "worker " << node_->rank() << ": no batch cache: " << why;
      TemporaryCacheFolder::RemoveAbandoned();
      return;
    }
    try {
      cache_folder_ = std::make_unique<TemporaryCacheFolder>();
    } catch (const Error& e) {
      LOG(WARNING) << "worker " << node_->rank() << ": no batch cache: " << e.what();
      return;
    }
    folder = cache_folder_->path();
  }
  // One file per channel and rank: jobs on other data in the same folder
  // keep theirs.
  const std::string name = "train-" + ChecksumHex(Checksum64::Of(options_.train.data(),
                                                                 options_.train.size())) +
                           "-worker-" + std::to_string(node_->rank()) + ".batches";
  try {
    cache_ = std::make_unique<BatchCache>(folder, name, options_.cache_max_bytes);
  } catch (const Error& e) {
    throw MakeError("--cache_dir=", options_.cache_dir, ": ", e.what());
  }
  epoch_trainer_.set_cache(cache_.get());
  LOG(INFO) << "worker " << node_->rank() << ": its share's minibatches are cached in "
            << cache_->path() << (cache_folder_ ? " (removed at the end)" : "");
}

uint64_t Trainer::CheckTrainingShard() {
  const double started = MonotonicSeconds();
  const std::vector<InputSplit> splits =
      TrainingShare(options_, node_->rank(), node_->view()->num_workers());
  uint64_t rows = 0;
  bool cached = false;
  try {
    // A cache of this very input was checked when it was written (the first
    // epoch writes it: there the parse overlaps training, here it would not).
    std::unique_ptr<BatchCacheReader> reader;
    if (cache_) {
      reader = cache_->OpenReader(BatchCacheKey(
          splits, options_.reader, static_cast<size_t>(hyperparameters_.mini_batch_size)));
    }
    if (reader) {
      rows = reader->rows();
      cached = true;
    } else {
      // The rows read are kept for the first epoch (which then parses
      // nothing) when they fit in an eighth of the machine's memory and the
      // cache's bound; --cache_dir=none parses every epoch.
      const bool keep = options_.cache_dir != "none";
      const uint64_t keep_max = std::min(options_.cache_max_bytes, PhysicalMemoryBytes() / 8);
      rows = CheckShard(splits, options_.reader, /*threads=*/0, uint64_t{8} << 20,
                        keep ? &checked_ : nullptr, keep_max);
      if (keep && checked_.empty() && !IsPipeChannel(options_.train)) {
        LOG(INFO) << "worker " << node_->rank() << ": the first epoch parses its share again "
                  << "(its rows take more than " << keep_max / (1 << 20)
                  << " MiB, the least of an eighth of the memory and --cache_max_bytes)";
      }
      epoch_trainer_.set_checked_rows(&checked_);
    }
  } catch (const Error& e) {
    throw MakeError("before the first minibatch: ", e.what());
  }
  if (!checked_.empty()) {
    LOG(INFO) << "worker " << node_->rank() << ": the first epoch takes the " << rows
              << " rows as checked (" << checked_.held_bytes / (1 << 20) << " MiB held)";
  }
  LOG(INFO) << "worker " << node_->rank() << ": the labels of its " << rows
            << " training rows are good (" << (cached ? "read from " : "checked in ")
            << (cached ? cache_->path() + ", checked when it was written, in " : "")
            << std::fixed << std::setprecision(2) << MonotonicSeconds() - started << " s)";
  return rows;
}

void Trainer::HoldPipeHead() {
  const std::vector<InputSplit> splits =
      TrainingShare(options_, node_->rank(), node_->view()->num_workers());
  uint64_t rows = 0;
  try {
    AwaitStream(splits[0], kPassStreamWaitS);
    rows = HoldStreamHead(splits[0], options_.reader,
                          static_cast<uint64_t>(hyperparameters_.num_point_for_scaler), &checked_);
  } catch (const Error& e) {
    throw MakeError("before the first minibatch: ", e.what());
  }
  epoch_trainer_.set_checked_rows(&checked_);
  LOG(INFO) << "worker " << node_->rank() << ": the data statistics come from the first " << rows
            << " rows of " << splits[0].Describe() << ", a pipe read once (held for the first "
            << "epoch to train on before the rest of the stream)";
}

ChannelSample Trainer::StatisticsSample() const {
  if (IsPipeChannel(options_.train)) {
    // A pipe's rows are not known before it ends.
    return {checked_.empty() || checked_.chunks[0].empty() ? Batch() : checked_.chunks[0][0], 0};
  }
  ChannelSample sample =
      ReadStatisticsSample(options_.train, options_.reader,
                           static_cast<uint64_t>(hyperparameters_.num_point_for_scaler));
  // With split_within_host the channel is this host's share of the job's
  // files: the job's rows are about the hosts' count times its own.
  const int workers = node_->view()->num_workers();
  const int sharing = WorkersSharingChannel(options_, workers);
  if (sharing > 0 && sharing < workers) {
    sample.channel_rows =
        sample.channel_rows * static_cast<uint64_t>(workers) / static_cast<uint64_t>(sharing);
  }
  return sample;
}

void Trainer::CountEpoch(int epoch, const EpochResult& result) {
  ModelLosses losses = result.losses;
  AddLosses(result.departed_losses, &losses);
  AddEpochLoss(&control_, epoch, losses, result.examples + result.departed_examples);
  AddEpochGradients(&control_, epoch, result.gradients);
  state_.set_training_seconds(state_.training_seconds() + result.seconds);
  state_.set_pull_wait_seconds(state_.pull_wait_seconds() + result.pull_wait);
  timeline_->EndEpoch(epoch, result, client_->gate_stats());
  LogEpochDone(node_->rank(), epoch, result);
}

void Trainer::DecideEpoch(int epoch, uint64_t examples, double started) {
  auto& metrics = *state_.mutable_metrics();
  state_.set_total_examples(state_.total_examples() + examples);
  metrics["train:examples_per_epoch"] = static_cast<double>(examples);
  metrics["train:epochs"] = epoch;
  const int models = hyperparameters_.num_models;
  const ModelLosses losses = ReadEpochLosses(&control_, epoch, models);
  MetricSet figures;
  for (int k = 0; models > 1 && k < models; ++k) {
    Record(OfModel(k, {{"train:objective_loss", losses[k]}}), &figures);
  }
  std::cout << "epoch " << epoch << ": " << examples << " examples across "
            << node_->view()->num_workers() << " worker(s)";
  // Without a validation channel the models compete on training loss (but
  // for the fast-beta ones).
  int selected = BestOnTraining(losses, hyperparameters_.variants);
  const bool stop = !options_.validation.empty() && ValidateEpoch(epoch, &figures, &selected);
  const MetricSet train = {{"train:objective_loss", losses[selected]}};
  Record(train, &figures);
  std::cout << "; " << FormatMetrics(train);
  if (models > 1) {
    Record({{"train:selected_model", selected}}, &figures);
    std::cout << " (model " << selected << " of " << models << ")";
  }
  state_.set_best_model(selected);
  if (best_.epoch == epoch) {
    best_.figures = figures;
    if (state_.best_epoch() == epoch) {
      state_.mutable_best_figures()->insert(figures.begin(), figures.end());
    }
  }
  AppendHistory(options_.model_dir, epoch, MonotonicSeconds() - started, examples, figures,
                RecordHealth(epoch));
  if (stop) {
    std::cout << "; no gain for " << state_.epochs_without_gain() << " epoch(s): stopping early";
  }
  std::cout << std::endl;
  scheduler_->ReportProgress(EpochReport(hyperparameters_.epochs, epoch, examples,
                                         state_.total_examples(), MonotonicSeconds() - started,
                                         figures, stop));
  if (stop) control_.Add(ControlTable::kStopFeature, 1);
  state_.set_elapsed_seconds(MonotonicSeconds() - started);
}

std::array<int, kHealthTables> Trainer::HealthWidths() const {
  return {model_.weight_width(), hyperparameters_.use_bias ? model_.bias_width() : 0};
}

std::string Trainer::RecordHealth(int epoch) {
  const std::array<int, kHealthTables> widths = HealthWidths();
  const std::array<TableRows, kHealthTables> rows = ReadTableRows(client_, widths);
  HealthReport report =
      MakeHealthReport(ReadEpochGradients(&control_, epoch), rows, rows_before_, widths);
  rows_before_ = rows;
  for (const auto& [name, value] : HealthMetrics(report)) (*state_.mutable_metrics())[name] = value;
  const std::string json = HealthJson(report);
  if (options_.health) options_.health->Set(epoch, std::move(report));
  return json;
}

void Trainer::Record(const MetricSet& named, MetricSet* figures) {
  auto& metrics = *state_.mutable_metrics();
  for (const auto& [name, value] : named) {
    metrics[name] = value;
    (*figures)[name] = value;
  }
}

bool Trainer::ValidateEpoch(int epoch, MetricSet* figures, int* selected) {
  // Validation scores each model's artifact as predict will: the
  // statistics folded in, on raw data, and a feature the model lacks (seen
  // only in validation) weighing nothing. (The servers' weights would give
  // such a feature a row with its initial weights: a factorization machine's
  // random factors.)
  std::vector<ModelArtifact> folded = DumpFoldedModels();
  const ModelArtifact joined = JoinModels(folded, hyperparameters_);
  const std::vector<ChannelPredictions> scored =
      evaluator_.PredictModels(options_.validation, &joined, &validation_reader_);
  // Each model's figures (sorts of every validation row's score) on up to 4
  // threads, one per core: each holds a copy of the scores while it sorts.
  std::vector<MetricSet> per_model(scored.size());
  std::vector<ModelScore> scores(scored.size());
  const int threads = std::min(ThreadsUpTo(4), static_cast<int>(scored.size()));
  // A model's error is kept by model, so that the lowest model's is the one
  // reported, whichever thread ran it.
  std::vector<std::exception_ptr> errors(scored.size());
  ThreadPool pool(threads);
  pool.Run([&](int part) {
    for (size_t k = static_cast<size_t>(part); k < scored.size(); k += threads) {
      const ChannelPredictions& model = scored[k];
      try {
        per_model[k] =
            PredictionMetrics(hyperparameters_, model.predictions, model.labels, model.mean_loss);
        scores[k] = ScoreModel(hyperparameters_, model.predictions, model.labels, model.mean_loss);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  });
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  std::vector<const std::vector<float>*> predictions;
  for (const ChannelPredictions& model : scored) predictions.push_back(&model.predictions);
  *selected = BestOnValidation(hyperparameters_, scores, predictions, scored.front().labels);
  // A factorization machine's interactions must beat its linear model (the
  // last) clearly, not by luck on a few rows.
  const int linear = static_cast<int>(scored.size()) - 1;
  if (hyperparameters_.variants.back().linear_only && *selected != linear &&
      !ClearlyBetter(hyperparameters_, scored[*selected].predictions, scored[linear].predictions,
                     scored[*selected].labels, InteractionStandardErrors(scored.size() - 1))) {
    *selected = linear;
  }
  for (int k = 0; per_model.size() > 1 && k < static_cast<int>(per_model.size()); ++k) {
    Record(OfModel(k, OfChannel("validation", per_model[k])), figures);
    if (TunesThreshold(hyperparameters_)) {
      Record(OfModel(k, ThresholdMetrics("validation", hyperparameters_, scores[k].choice())),
             figures);
    }
  }
  if (options_.holdout > 0) {
    Record({{"train:held_out_examples", static_cast<double>(scored[*selected].labels.size())}},
           figures);
  }
  if (trivial_figures_.count("validation") == 0) {
    // Every model scored the same rows.
    trivial_figures_["validation"] =
        TrivialMetrics(trivial_, hyperparameters_, scored[*selected].labels);
  }
  const MetricSet& validation = per_model[*selected];
  const MetricSet named = OfChannel("validation", validation);
  Record(named, figures);
  std::cout << "; " << FormatMetrics(named);
  // A model that cannot be selected on these rows (a fast-beta one on too
  // few) keeps no job training.
  const bool fast_beta_compete = FastBetaCanWinOn(hyperparameters_, scored.front().labels.size());
  std::vector<double> model_losses;
  for (size_t k = 0; k < per_model.size(); ++k) {
    const bool out = IsFastBeta(hyperparameters_.variants[k]) && !fast_beta_compete;
    model_losses.push_back(out ? std::numeric_limits<double>::quiet_NaN()
                               : StoppingLoss(per_model[k]));
  }
  const EpochVerdict verdict = JudgeEpoch(validation, model_losses, hyperparameters_, &state_);
  // The job's model is its best validation epoch's: dumped now, written at the end.
  if (verdict.improved && options_.keep_best_epoch) {
    best_ = BestEpoch{};
    best_.epoch = epoch;
    best_.validation = validation;
    best_.model = std::move(folded[*selected]);
    // Validation scored the artifact written: its threshold stands.
    const size_t rows = scored[*selected].labels.size();
    if (TunesThreshold(hyperparameters_) &&
        rows <= hyperparameters_.num_calibration_samples) {
      best_.threshold = scores[*selected].choice();
      best_.threshold_rows = rows;
    }
    KeepBestForResume();
  }
  return verdict.stop;
}

void Trainer::KeepBestForResume() {
  const std::string uri = node_->view()->checkpoint_uri();
  if (!checkpoints() || uri.empty()) return;
  state_.set_best_epoch(0);
  state_.clear_best_model_folder();
  state_.clear_best_validation();
  state_.clear_best_figures();
  try {
    state_.set_best_model_folder(KeepBestModel(uri, best_.epoch, best_.model));
  } catch (const Error& e) {
    LOG(WARNING) << "the model of epoch " << best_.epoch << ", the best so far, was not kept in "
                 << uri << " (" << e.what() << "): a job resumed from a later checkpoint keeps "
                 << "the best epoch after the resume";
    return;
  }
  state_.set_best_epoch(best_.epoch);
  state_.mutable_best_validation()->insert(best_.validation.begin(), best_.validation.end());
}

void Trainer::RestoreBestEpoch() {
  if (state_.best_epoch() <= 0 || !options_.keep_best_epoch) return;
  const std::string uri = node_->view()->resume_uri();
  try {
    best_.model = ReadBestModel(uri, state_.best_model_folder());
  } catch (const Error& e) {
    LOG(WARNING) << "the best epoch before the resume (" << state_.best_epoch()
                 << ") cannot be kept: " << e.what();
    std::cout << "the model of epoch " << state_.best_epoch()
              << ", the best before the resume, cannot be read (" << e.what()
              << "): the job keeps the best epoch after the resume, or the last" << std::endl;
    state_.set_best_epoch(0);
    state_.clear_best_model_folder();
    return;
  }
  best_.epoch = state_.best_epoch();
  best_.validation = MetricSet(state_.best_validation().begin(), state_.best_validation().end());
  best_.figures = MetricSet(state_.best_figures().begin(), state_.best_figures().end());
  LOG(INFO) << "the model of epoch " << best_.epoch << ", the best before the resume, read from "
            << uri << "/" << state_.best_model_folder();
}

void Trainer::FinishJob(int last_epoch, MetricSet* final_metrics) {
  ChooseModel(last_epoch, final_metrics);
  TuneThreshold(final_metrics);
  if (!options_.test.empty()) {
    std::vector<float> labels;
    const MetricSet metrics =
        OfChannel("test", evaluator_.Evaluate(options_.test, &best_.model, &labels));
    for (const auto& [name, value] : metrics) (*final_metrics)[name] = value;
    std::cout << FormatMetrics(metrics) << std::endl;
    trivial_figures_["test"] = TrivialMetrics(trivial_, hyperparameters_, labels);
  }
  GuardAgainstTrivial(final_metrics);
  // Every worker's examples over the workers' summed training time per worker.
  (*final_metrics)["train:examples_per_second"] =
      state_.training_seconds() > 0
          ? static_cast<double>(state_.total_examples()) / state_.training_seconds()
          : 0;
  if (options_.model_dir.empty()) return;
  best_.model.Write(options_.model_dir);
  LOG(INFO) << "wrote the model (" << best_.model.features.size() << " features) to "
            << options_.model_dir;
  WriteMetricsFile(options_.model_dir, *final_metrics);
}

void Trainer::GuardAgainstTrivial(MetricSet* final_metrics) {
  for (const auto& [channel, trivial] : trivial_figures_) {
    if (trivial.empty()) continue;
    MetricSet model;
    const std::string prefix = channel + ":";
    for (const auto& [name, value] : *final_metrics) {
      if (name.compare(0, prefix.size(), prefix) == 0) model[name.substr(prefix.size())] = value;
    }
    for (const auto& [name, value] : trivial) (*final_metrics)["trivial:" + channel + ":" + name] = value;
    const std::vector<std::string> worse = WorseThanTrivial(model, trivial);
    (*final_metrics)["trivial:" + channel + ":worse"] = static_cast<double>(worse.size());
    if (worse.empty()) continue;
    std::string figures;
    for (const std::string& figure : worse) figures += (figures.empty() ? "" : ", ") + figure;
    const std::string which = hyperparameters_.num_models > 1
                                  ? "model " + std::to_string(state_.best_model()) + " of " +
                                        std::to_string(hyperparameters_.num_models) + ", kept,"
                                  : "the model";
    LOG(WARNING) << which << " is worse on " << channel
                 << " than a constant prediction of the training labels: " << figures;
    std::cout << "WARNING: " << which << " is worse on " << channel
              << " than a constant prediction of the training labels: " << figures << std::endl;
  }
}

void Trainer::ChooseModel(int last_epoch, MetricSet* final_metrics) {
  // Without a validation channel (or after a resume that saw no gain yet) the
  // model is the last epoch's.
  if (best_.epoch == 0) {
    best_.model = DumpServersModel(state_.best_model());
    if (hyperparameters_.num_models > 1) {
      std::cout << "keeping model " << state_.best_model() << " of " << hyperparameters_.num_models
                << ", the best on "
                << (options_.validation.empty() ? "training loss"
                    : options_.holdout > 0      ? "the held-out rows"
                                                : "validation")
                << std::endl;
    }
    return;
  }
  // That epoch's figures (every model's, the selection), not the last one's.
  for (const auto& [name, value] : best_.figures) (*final_metrics)[name] = value;
  for (const auto& [name, value] : best_.validation) {
    (*final_metrics)["validation:" + name] = value;
  }
  (*final_metrics)["train:best_epoch"] = best_.epoch;
  if (hyperparameters_.num_models > 1) {
    (*final_metrics)["train:selected_model"] = best_.model.selected_model;
  }
  if (best_.epoch != last_epoch) {
    std::cout << "keeping the model of epoch " << best_.epoch << ", the best on "
              << (options_.holdout > 0 ? "the held-out rows" : "validation") << std::endl;
  }
}

void Trainer::TuneThreshold(MetricSet* final_metrics) {
  if (!TunesThreshold(hyperparameters_)) return;
  // With held-out rows the threshold, one number, is tuned on every training
  // row: the held-out ones alone are few on small data (70 rows of anes96's
  // 944 put a linear model's test accuracy at 0.87 where its training rows
  // gave 0.92).
  const bool on_validation = !options_.validation.empty() && options_.holdout == 0;
  const std::string& channel = on_validation ? options_.validation : options_.train;
  const ReaderOptions every_row = EveryRowReader(options_.reader);
  Hyperparameters& model = best_.model.hyperparameters;
  if (channel.rfind("pipe:", 0) == 0) {
    std::cout << "decision threshold " << model.DecisionThreshold() << " (the loss's): the "
              << "training channel is a pipe, read once, and there is no validation channel"
              << std::endl;
    return;
  }
  // The kept epoch's validation scored the model on every row already.
  ThresholdChoice choice;
  size_t rows = best_.threshold_rows;
  if (on_validation && best_.threshold) {
    choice = *best_.threshold;
  } else {
    const ChannelPredictions scored =
        evaluator_.Predict(channel, &best_.model, hyperparameters_.num_calibration_samples,
                           on_validation ? &validation_reader_ : &every_row);
    choice = ChooseThreshold(scored.predictions, scored.labels, model.threshold_criterion(),
                             model.DecisionThreshold());
    rows = scored.labels.size();
  }
  model.threshold = choice.threshold;
  const MetricSet metrics = ThresholdMetrics(on_validation ? "validation" : "train", model, choice);
  for (const auto& [name, value] : metrics) (*final_metrics)[name] = value;
  std::cout << "decision threshold tuned for " << SelectionCriterionName(model.selection_criterion)
            << " on " << rows << " rows of " << channel << ": "
            << FormatMetrics(metrics) << std::endl;
}

ModelArtifact Trainer::FoldedModel(const ModelArtifact& all, int k) const {
  ModelArtifact model = hyperparameters_.num_models > 1 ? SliceModel(all, k) : all;
  Fold(&model);
  return model;
}

void Trainer::Fold(ModelArtifact* model) const {
  model->data_format = options_.reader.format;
  model->libsvm_zero_based = options_.reader.zero_based;
  FoldStatistics(statistics_, model);
}

std::vector<ModelArtifact> Trainer::DumpFoldedModels() {
  std::vector<ModelArtifact> models;
  if (hyperparameters_.num_models == 1) {
    models.push_back(DumpServersModel(0));
    return models;
  }
  const ModelArtifact all = DumpModel(client_, hyperparameters_, options_.hyperparameter_json,
                                      model_.weight_width(), model_.bias_width());
  for (int k = 0; k < hyperparameters_.num_models; ++k) models.push_back(FoldedModel(all, k));
  return models;
}

ModelArtifact Trainer::DumpServersModel(int k) {
  ModelArtifact all = DumpModel(client_, hyperparameters_, options_.hyperparameter_json,
                                model_.weight_width(), model_.bias_width());
  if (hyperparameters_.num_models > 1) return FoldedModel(all, k);
  Fold(&all);  // the one model folded where it lies, not copied
  return all;
}

}  // namespace keel
