#include "worker/training_health.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/json.h"
#include "worker/hyperparameters.h"

namespace keel {
namespace {

// An epoch's figures of table t: at kHealthFeature + (epoch x kHealthTables +
// t) x kFigures + figure.
constexpr uint64_t kHealthFeature = 1000000000;
enum Figure : uint64_t { kNormSum, kMinibatches, kValues, kNonFinite, kFigures };

uint64_t HealthKey(int epoch, int table, Figure figure) {
  return kHealthFeature +
         (static_cast<uint64_t>(epoch) * kHealthTables + static_cast<uint64_t>(table)) * kFigures +
         figure;
}

constexpr uint32_t kHealthTableIds[kHealthTables] = {kWeightTable, kBiasTable};

// A finite number for JSON (non-finite ones as 0, as history.jsonl writes metrics).
double Finite(double value) { return std::isfinite(value) ? value : 0.0; }

// The figures of `count` values `stride` apart from `values`.
GradientFigures MeasureStrided(const float* values, size_t count, size_t stride) {
  GradientFigures figures;
  figures.values = count;
  for (size_t i = 0; i < count; ++i) {
    const double value = values[i * stride];
    if (std::isfinite(value)) {
      figures.square_sum += value * value;
    } else {
      ++figures.non_finite;
    }
  }
  return figures;
}

}  // namespace

const char* HealthTableName(int table) { return table == 0 ? "weights" : "bias"; }

double GradientFigures::norm() const { return std::sqrt(square_sum); }

void GradientFigures::Add(const GradientFigures& more) {
  square_sum += more.square_sum;
  values += more.values;
  non_finite += more.non_finite;
}

GradientFigures MeasureGradients(const float* values, size_t count) {
  return MeasureStrided(values, count, 1);
}

std::vector<GradientFigures> MeasureModelColumns(const std::vector<float>& values, size_t width,
                                                 size_t models) {
  std::vector<GradientFigures> figures(models);
  const size_t columns = models == 0 ? 0 : width / models;
  if (columns == 0) return figures;
  // Columns past the models' (a width that is not a multiple) are not measured.
  const size_t rows = values.size() / width, measured = columns * models;
  // Each column's sum of squares, row after row; a non-finite value makes its
  // column's sum non-finite, and only such a column is read again to count
  // it and sum the rest.
  std::vector<double> squares(width, 0.0);
  // Blocks of kBlock columns summed in local accumulators, which the compiler
  // keeps in vector registers (summed in memory, each row's additions waited
  // for the last row's stores). The same additions in the same order.
  constexpr size_t kBlock = 8;
  size_t first = 0;
  for (; first + kBlock <= width; first += kBlock) {
    double sums[kBlock] = {};
    for (size_t row = 0; row < rows; ++row) {
      const float* line = values.data() + row * width + first;
      for (size_t c = 0; c < kBlock; ++c) {
        const double value = line[c];
        sums[c] += value * value;
      }
    }
    std::copy(sums, sums + kBlock, squares.begin() + static_cast<std::ptrdiff_t>(first));
  }
  for (size_t row = 0; first < width && row < rows; ++row) {
    const float* line = values.data() + row * width;
    for (size_t column = first; column < width; ++column) {
      const double value = line[column];
      squares[column] += value * value;
    }
  }
  for (size_t column = 0; column < measured; ++column) {
    GradientFigures& model = figures[column / columns];
    if (std::isfinite(squares[column])) {
      model.values += rows;
      model.square_sum += squares[column];
    } else {
      model.Add(MeasureStrided(values.data() + column, rows, width));
    }
  }
  return figures;
}

void GradientTally::Add(const GradientFigures& minibatch) {
  if (minibatch.values == 0) return;
  norm_sum += minibatch.norm();
  ++minibatches;
  values += minibatch.values;
  non_finite += minibatch.non_finite;
}

void GradientTally::Add(const GradientTally& other) {
  norm_sum += other.norm_sum;
  minibatches += other.minibatches;
  values += other.values;
  non_finite += other.non_finite;
}

void AddGradients(const MinibatchGradients& minibatch, EpochGradients* epoch) {
  for (int t = 0; t < kHealthTables; ++t) (*epoch)[t].Add(minibatch[t]);
}

void AddGradients(const EpochGradients& add, EpochGradients* sum) {
  for (int t = 0; t < kHealthTables; ++t) (*sum)[t].Add(add[t]);
}

std::string HealthJson(const HealthReport& report) {
  JsonObject json;
  for (const auto& [table, health] : report) {
    json.Add(table, JsonObject()
                        .Number("weight_norm", Finite(health.weight_norm))
                        .Number("gradient_norm", Finite(health.gradient_norm))
                        .Number("nonfinite_share", Finite(health.nonfinite_share))
                        .Count("rows_created", health.rows_created)
                        .Close());
  }
  return json.Close();
}

MetricSet HealthMetrics(const HealthReport& report) {
  MetricSet metrics;
  for (const auto& [table, health] : report) {
    const std::string prefix = "health:" + table + ":";
    metrics[prefix + "weight_norm"] = health.weight_norm;
    metrics[prefix + "gradient_norm"] = health.gradient_norm;
    metrics[prefix + "nonfinite_share"] = health.nonfinite_share;
    metrics[prefix + "rows_created"] = static_cast<double>(health.rows_created);
  }
  return metrics;
}

void AddEpochGradients(ControlTable* control, int epoch, const EpochGradients& gradients) {
  for (int t = 0; t < kHealthTables; ++t) {
    const GradientTally& tally = gradients[t];
    if (tally.minibatches == 0) continue;
    // Summed as a float on the servers, which refuse an infinity.
    control->AddReal(HealthKey(epoch, t, kNormSum),
                     std::min(tally.norm_sum, double{std::numeric_limits<float>::max()}));
    control->Add(HealthKey(epoch, t, kMinibatches), tally.minibatches);
    control->Add(HealthKey(epoch, t, kValues), tally.values);
    control->Add(HealthKey(epoch, t, kNonFinite), tally.non_finite);
  }
}

EpochGradients ReadEpochGradients(ControlTable* control, int epoch) {
  EpochGradients gradients;
  for (int t = 0; t < kHealthTables; ++t) {
    GradientTally& tally = gradients[t];
    tally.minibatches = control->Read(HealthKey(epoch, t, kMinibatches));
    if (tally.minibatches == 0) continue;
    tally.norm_sum = control->ReadReal(HealthKey(epoch, t, kNormSum));
    tally.values = control->Read(HealthKey(epoch, t, kValues));
    tally.non_finite = control->Read(HealthKey(epoch, t, kNonFinite));
  }
  return gradients;
}

std::array<TableRows, kHealthTables> ReadTableRows(KVWorker* client,
                                                   const std::array<int, kHealthTables>& widths) {
  std::array<TableRows, kHealthTables> tables;
  for (int t = 0; t < kHealthTables; ++t) {
    if (widths[t] == 0) continue;
    const proto::TableSummary summary = client->Summarize(kHealthTableIds[t], widths[t]);
    tables[t].rows = summary.rows();
    tables[t].weight_norm = std::sqrt(summary.weight_square_sum());
  }
  return tables;
}

HealthReport MakeHealthReport(const EpochGradients& gradients,
                              const std::array<TableRows, kHealthTables>& rows,
                              const std::array<TableRows, kHealthTables>& before,
                              const std::array<int, kHealthTables>& widths) {
  HealthReport report;
  for (int t = 0; t < kHealthTables; ++t) {
    if (widths[t] == 0) continue;
    const GradientTally& tally = gradients[t];
    TableHealth& health = report[HealthTableName(t)];
    health.weight_norm = rows[t].weight_norm;
    health.gradient_norm =
        tally.minibatches ? tally.norm_sum / static_cast<double>(tally.minibatches) : 0.0;
    health.nonfinite_share =
        tally.values ? static_cast<double>(tally.non_finite) / static_cast<double>(tally.values)
                     : 0.0;
    // Rows are never removed during training.
    health.rows_created = rows[t].rows >= before[t].rows ? rows[t].rows - before[t].rows : 0;
  }
  return report;
}

void LatestHealth::Set(int epoch, HealthReport report) {
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = Snapshot{epoch, std::move(report)};
}

LatestHealth::Snapshot LatestHealth::Get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

}  // namespace keel
