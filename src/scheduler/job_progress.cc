#include "scheduler/job_progress.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "base/time.h"

namespace keel {
namespace {

// Why `metrics` is refused ("" if it is taken).
std::string CheckMetrics(const google::protobuf::Map<std::string, double>& metrics,
                         const char* what) {
  if (metrics.size() > static_cast<size_t>(kMaxProgressMetrics)) {
    return std::string(what) + " has " + std::to_string(metrics.size()) + " metrics (at most " +
           std::to_string(kMaxProgressMetrics) + ")";
  }
  for (const auto& [name, value] : metrics) {
    if (name.empty() || name.size() > kMaxProgressNameBytes) {
      return std::string(what) + " has a metric name of " + std::to_string(name.size()) +
             " bytes (1 to " + std::to_string(kMaxProgressNameBytes) + ")";
    }
  }
  return "";
}

bool EpochInBounds(int64_t epoch) { return epoch >= 0 && epoch <= kMaxProgressEpochs; }

MetricSet MetricsOf(const google::protobuf::Map<std::string, double>& metrics) {
  return MetricSet(metrics.begin(), metrics.end());
}

// The validation:* members of `metrics`.
MetricSet ValidationOf(const MetricSet& metrics) {
  MetricSet validation;
  for (const auto& [name, value] : metrics) {
    if (name.rfind("validation:", 0) == 0) validation[name] = value;
  }
  return validation;
}

}  // namespace

std::string CheckProgressReport(int rank, const proto::WorkerCursor* cursor,
                                const proto::ProgressReport& report) {
  if (!EpochInBounds(report.epochs())) {
    return "a progress report of " + std::to_string(report.epochs()) + " epochs (0 to " +
           std::to_string(kMaxProgressEpochs) + ")";
  }
  if (cursor && !EpochInBounds(cursor->epoch())) {
    return "a progress report at epoch " + std::to_string(cursor->epoch());
  }
  if ((report.has_decided() || report.has_outcome()) && rank != 0) {
    return "an epoch's figures or the job's outcome from worker " + std::to_string(rank) +
           " (only worker 0 decides epochs)";
  }
  if (report.has_decided()) {
    const int epoch = report.decided().epoch();
    if (epoch < 1 || epoch > report.epochs()) {
      return "the figures of epoch " + std::to_string(epoch) + " of a job of " +
             std::to_string(report.epochs());
    }
    const double seconds = report.decided().seconds();
    if (!(seconds >= 0 && seconds <= kMaxProgressSeconds)) {
      return "the figures of epoch " + std::to_string(epoch) + " at " + std::to_string(seconds) +
             " s";
    }
    if (std::string why = CheckMetrics(report.decided().metrics(), "an epoch's figures");
        !why.empty()) {
      return why;
    }
  }
  if (report.has_outcome()) {
    if (!EpochInBounds(report.outcome().epochs_run())) {
      return "an outcome of " + std::to_string(report.outcome().epochs_run()) + " epochs";
    }
    if (report.outcome().model_dir().size() > kMaxProgressPathBytes) {
      return "an outcome whose model folder has " +
             std::to_string(report.outcome().model_dir().size()) + " bytes (at most " +
             std::to_string(kMaxProgressPathBytes) + ")";
    }
    return CheckMetrics(report.outcome().metrics(), "the job's outcome");
  }
  return "";
}

JobProgress::JobProgress(int num_workers) : num_workers_(num_workers) {}

std::string JobProgress::OnReport(int node_id, int rank, const proto::WorkerCursor* cursor,
                                  double reading_seconds, const proto::ProgressReport& report,
                                  double now) {
  if (rank < 0 || rank >= num_workers_) {
    return "a progress report from worker rank " + std::to_string(rank) + " of " +
           std::to_string(num_workers_);
  }
  if (std::string why = CheckProgressReport(rank, cursor, report); !why.empty()) return why;
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_report_ < 0) first_report_ = now;
  WorkerProgress& worker = workers_[rank];
  worker.rank = rank;
  worker.node_id = node_id;
  worker.last_update_wall = WallSeconds();
  if (report.epochs() > 0) epochs_ = report.epochs();
  if (report.share_examples() > 0) worker.share_examples = report.share_examples();
  if (cursor) TakeCursor(&worker, *cursor, reading_seconds, now);
  if (report.has_decided()) TakeDecided(&worker, report.decided());
  if (report.has_outcome()) TakeOutcome(report.outcome());
  ++version_;
  changed_.notify_all();
  return "";
}

void JobProgress::TakeCursor(WorkerProgress* worker, const proto::WorkerCursor& cursor,
                             double reading_seconds, double now) {
  // What it read since its last report: in the same epoch the difference,
  // in a new one all of it (a replacement starting over counts nothing).
  auto last = report_times_.find(worker->rank);
  const bool same_epoch = last != report_times_.end() && cursor.epoch() == worker->epoch;
  uint64_t read = cursor.epoch() > worker->epoch ? cursor.examples() : 0;
  if (same_epoch && cursor.examples() > worker->examples) {
    read = cursor.examples() - worker->examples;
  }
  // Over what reading time: a worker that says how long it has read the
  // epoch gives it exactly (no pause between epochs in it, and an epoch's
  // first report counts too: with epochs shorter than the reports' interval
  // most reports are firsts). Else since its last report of the same epoch;
  // a first report then only sets a baseline.
  const double since = same_epoch ? last->second : now;
  if (reading_seconds > 0) {
    const double spent = same_epoch && worker->reading_seconds > 0
                             ? reading_seconds - worker->reading_seconds
                             : reading_seconds;
    worker->reading = read > 0;
    if (spent > 0 && read > 0) worker->examples_per_second = static_cast<double>(read) / spent;
    worker->rate_heard = now;
  } else {
    worker->reading = same_epoch && read > 0;
    if (same_epoch && now > last->second) {
      worker->examples_per_second = static_cast<double>(read) / (now - last->second);
    }
  }
  worker->reading_seconds = reading_seconds;
  report_times_[worker->rank] = now;
  examples_read_ += read;
  worker->epoch = cursor.epoch();
  worker->examples = cursor.examples();
  worker->epoch_done = cursor.epoch_done();
  worker->loss = cursor.examples() > 0 ? cursor.loss() / static_cast<double>(cursor.examples()) : 0;
  MeterRate(worker->reading ? read : 0, since, now);
}

void JobProgress::MeterRate(uint64_t read, double since, double now) {
  // The rate is the job's while it reads: the pauses between epochs
  // (validation, barriers) and while every worker waits are left out.
  for (const auto& [rank, worker] : workers_) {
    if (worker.reading) {
      rate_.Add(read, since, now);
      return;
    }
  }
  rate_.Pause();
}

void JobProgress::TakeDecided(WorkerProgress* worker, const proto::EpochFigures& figures) {
  if (!decided_.empty() && figures.epoch() <= decided_.back().epoch) return;  // seen
  DecidedEpoch epoch;
  epoch.epoch = figures.epoch();
  epoch.examples = figures.examples();
  epoch.total_examples = figures.total_examples();
  epoch.seconds = figures.seconds();
  if (!decided_.empty()) {
    // A leading worker that replaced another counts its seconds and running
    // total from its own start: neither goes back.
    const DecidedEpoch& before = decided_.back();
    epoch.seconds = std::max(epoch.seconds, before.seconds);
    if (before.total_examples > 0) {
      epoch.total_examples = std::max(epoch.total_examples, before.total_examples + epoch.examples);
    }
  }
  epoch.metrics = MetricsOf(figures.metrics());
  epoch.stop = figures.stop();
  worker->validation = ValidationOf(epoch.metrics);
  decided_.push_back(std::move(epoch));
}

void JobProgress::TakeOutcome(const proto::JobOutcome& outcome) {
  JobEnd end;
  end.epochs_run = outcome.epochs_run();
  end.stopped_early = outcome.stopped_early();
  end.metrics = MetricsOf(outcome.metrics());
  end.model_dir = outcome.model_dir();
  end_ = std::move(end);
}

uint64_t JobProgress::EpochExpectedLocked() const {
  if (!decided_.empty()) return decided_.back().examples;
  if (static_cast<int>(workers_.size()) < num_workers_) return 0;
  uint64_t sum = 0;
  for (const auto& [rank, worker] : workers_) {
    if (worker.share_examples == 0) return 0;
    sum += worker.share_examples;
  }
  return sum;
}

double JobProgress::SecondsPerExampleLocked() const {
  if (decided_.empty()) return 0;
  if (decided_.size() == 1) {
    const DecidedEpoch& only = decided_.front();
    return only.examples > 0 ? only.seconds / static_cast<double>(only.examples) : 0;
  }
  uint64_t examples = 0;
  for (size_t i = 1; i < decided_.size(); ++i) examples += decided_[i].examples;
  const double seconds = decided_.back().seconds - decided_.front().seconds;
  return examples > 0 && seconds > 0 ? seconds / static_cast<double>(examples) : 0;
}

double JobProgress::RateLocked(double now) const {
  // The sum of the rates of the workers that say how long they read, while
  // they report; else the meter's.
  double sum = 0;
  for (const auto& [rank, worker] : workers_) {
    if (worker.rate_heard >= 0 && now - worker.rate_heard <= kRateHeardWithinS) {
      sum += worker.examples_per_second;
    }
  }
  return sum > 0 ? sum : rate_.rate();
}

ProgressSnapshot JobProgress::Snapshot(double now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  ProgressSnapshot snapshot;
  snapshot.version = version_;
  snapshot.epochs = epochs_;
  for (const auto& [rank, worker] : workers_)
    snapshot.epoch = std::max(snapshot.epoch, worker.epoch);
  double loss_sum = 0;
  for (const auto& [rank, worker] : workers_) {
    snapshot.workers.push_back(worker);
    if (worker.epoch != snapshot.epoch) continue;
    snapshot.epoch_done += worker.examples;
    loss_sum += worker.loss * static_cast<double>(worker.examples);
  }
  if (snapshot.epoch_done > 0)
    snapshot.training_loss = loss_sum / static_cast<double>(snapshot.epoch_done);
  // Reports of the next epoch may not have come yet.
  if (!decided_.empty()) snapshot.epoch = std::max(snapshot.epoch, decided_.back().epoch);
  snapshot.epoch_expected = EpochExpectedLocked();
  snapshot.examples_per_second = RateLocked(now);
  snapshot.examples_read = examples_read_;
  snapshot.seconds = first_report_ < 0 ? 0 : now - first_report_;
  snapshot.decided = decided_;
  snapshot.end = end_;
  ProgressCounts counts;
  counts.epoch = snapshot.epoch;
  counts.epochs = epochs_;
  counts.epoch_done = snapshot.epoch_done;
  counts.epoch_expected = snapshot.epoch_expected;
  counts.rate = snapshot.examples_per_second;
  counts.seconds_per_example = SecondsPerExampleLocked();
  if (!decided_.empty()) {
    counts.stopping = decided_.back().stop;
    // Between a decided epoch and the next one's first report the epoch is done.
    if (decided_.back().epoch >= snapshot.epoch) counts.epoch_done = counts.epoch_expected;
  }
  snapshot.figures = EstimateProgress(counts);
  return snapshot;
}

uint64_t JobProgress::WaitForChange(uint64_t seen, double timeout_s) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                    [&] { return version_ > seen; });
  return version_;
}

}  // namespace keel
