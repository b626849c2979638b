// The metric files a training job leaves in --model_dir beside the model
// artifact: history.jsonl (one line per epoch) and metrics.json
// (the job's final metrics). `model_dir` is a folder or a storage URI
// (file://, s3://; io/storage.h).
#ifndef KEEL_WORKER_METRICS_FILES_H_
#define KEEL_WORKER_METRICS_FILES_H_

#include <cstdint>
#include <string>

#include "models/metrics.h"

namespace keel {

// Appends one line to <model_dir>/history.jsonl: the epoch, wall seconds
// since the job started, the examples read, and the epoch's `metrics` under
// their full names (train:objective_loss, validation:...; non-finite ones as
// 0), and `health` (a JSON object: worker/training_health.h) as "health" when
// not empty. Epoch 1 starts the file anew. Does nothing when `model_dir` is
// empty. Throws Error if the write fails.
void AppendHistory(const std::string& model_dir, int epoch, double seconds, uint64_t examples,
                   const MetricSet& metrics, const std::string& health = "");

// Writes <model_dir>/metrics.json (MetricsJson), replacing it whole. Throws
// Error if the write fails.
void WriteMetricsFile(const std::string& model_dir, const MetricSet& metrics);

}  // namespace keel

#endif  // KEEL_WORKER_METRICS_FILES_H_
