// Training health: per table and per epoch, the figures SageMaker Debugger's
// built-in rules look at, as a training job records them (history.jsonl's
// `health` object, metrics.json's health:* names).
//
// Per table (the weights and, with --use_bias, the bias):
// - weight_norm: the L2 norm of the table's weights at the end of the epoch
//   (every row's weight columns, every model's with num_models > 1; the
//   optimizer's state left out), summed by the servers (KVWorker::Summarize);
// - gradient_norm: the mean, over the epoch's minibatches on every worker, of
//   the L2 norm of the gradient a minibatch pushes to the table (the
//   minibatch-mean gradient, every model's columns);
// - nonfinite_share: the share of NaN or infinite values among the gradient
//   values computed for the table in the epoch (a push holding one is refused
//   whole by the servers, so the share counts them before the push);
// - rows_created: the rows the servers created for the table in the epoch (a
//   row is created by the first push to its key).
//
// Workers measure their gradients (MeasureGradients), add up an epoch's
// figures (GradientTally) and add them to the servers' control table before
// the epoch's "counted" barrier (AddEpochGradients); worker 0 then reads the
// sums (ReadEpochGradients) and the servers' table summaries (TableRows) and
// makes the epoch's HealthReport.
#ifndef KEEL_WORKER_TRAINING_HEALTH_H_
#define KEEL_WORKER_TRAINING_HEALTH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kv/kv_worker.h"
#include "models/metrics.h"
#include "worker/control_table.h"

namespace keel {

// The tables health is measured on, in this order: kWeightTable, kBiasTable.
constexpr int kHealthTables = 2;
// Their names in the health object: "weights", "bias".
const char* HealthTableName(int table);

// One minibatch's gradient for one table.
struct GradientFigures {
  double square_sum = 0;  // of the finite values
  uint64_t values = 0;
  uint64_t non_finite = 0;  // NaN or infinite values
  double norm() const;      // sqrt(square_sum)
  // Adds `more`, the figures of other values.
  void Add(const GradientFigures& more);
};

// The figures of `count` gradient values.
GradientFigures MeasureGradients(const float* values, size_t count);

// The figures of each of `models` models' columns of `values`, rows of
// `width` (a multiple of `models`: model k owns columns [k, k + 1) x width /
// models), in one pass over the rows: what MeasureGradients gives over each
// model's values.
std::vector<GradientFigures> MeasureModelColumns(const std::vector<float>& values, size_t width,
                                                 size_t models);

// A minibatch's gradients, one entry per health table (kHealthTables order).
using MinibatchGradients = std::array<GradientFigures, kHealthTables>;

// An epoch's gradients for one table, summed over minibatches.
struct GradientTally {
  double norm_sum = 0;  // of the minibatches' gradient norms
  uint64_t minibatches = 0;
  uint64_t values = 0;
  uint64_t non_finite = 0;
  // Counts one minibatch's gradient (one with no values is not counted).
  void Add(const GradientFigures& minibatch);
  void Add(const GradientTally& other);
};
using EpochGradients = std::array<GradientTally, kHealthTables>;

// Adds `minibatch` to `epoch`, table by table.
void AddGradients(const MinibatchGradients& minibatch, EpochGradients* epoch);
void AddGradients(const EpochGradients& add, EpochGradients* sum);

// A table's figures after an epoch (see the top of this file).
struct TableHealth {
  double weight_norm = 0;
  double gradient_norm = 0;
  double nonfinite_share = 0;
  uint64_t rows_created = 0;
};
// By table name; a table the job does not have is absent.
using HealthReport = std::map<std::string, TableHealth>;

// {"weights": {"weight_norm": .., "gradient_norm": .., "nonfinite_share": ..,
// "rows_created": ..}, ...}: history.jsonl's `health` object.
std::string HealthJson(const HealthReport& report);
// The same figures as metrics, named health:<table>:<figure>.
MetricSet HealthMetrics(const HealthReport& report);

// Adds this worker's gradient figures of `epoch` (>= 1) to the job's sums on
// the control table. Call once per worker and epoch, before the barrier after
// which ReadEpochGradients is called. Throws Error if a request fails.
void AddEpochGradients(ControlTable* control, int epoch, const EpochGradients& gradients);
// Every worker's figures of `epoch` summed (norm sums as floats: about 7
// significant digits). Throws Error if a request fails.
EpochGradients ReadEpochGradients(ControlTable* control, int epoch);

// A table's rows and weight norm on the servers.
struct TableRows {
  uint64_t rows = 0;
  double weight_norm = 0;
};
// The servers' figures of each health table (`widths`: each table's weights
// per row; 0 for a table the job does not have, which reads as empty). Throws
// Error if a request fails.
std::array<TableRows, kHealthTables> ReadTableRows(KVWorker* client,
                                                   const std::array<int, kHealthTables>& widths);

// The epoch's report: `gradients` (ReadEpochGradients), the servers' tables
// now (`rows`) and at the previous epoch's end (`before`). Tables whose width
// is 0 are left out.
HealthReport MakeHealthReport(const EpochGradients& gradients,
                              const std::array<TableRows, kHealthTables>& rows,
                              const std::array<TableRows, kHealthTables>& before,
                              const std::array<int, kHealthTables>& widths);

// The latest epoch's report, for readers on other threads (a metrics
// endpoint). Safe for concurrent use.
class LatestHealth {
 public:
  struct Snapshot {
    int epoch = 0;  // 0: no epoch reported yet
    HealthReport report;
  };
  void Set(int epoch, HealthReport report);
  Snapshot Get() const;

 private:
  mutable std::mutex mutex_;
  Snapshot latest_;
};

}  // namespace keel

#endif  // KEEL_WORKER_TRAINING_HEALTH_H_
