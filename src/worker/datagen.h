// Synthetic data drawn from a planted model, for experiments and tests.
//
// Rows have `nnz` distinct features (value 1) drawn from `features` with a
// power-law popularity (density proportional to rank^(-2/3)); labels are sampled from the planted
// model's probability (logistic link), so the planted model's own validation metrics are the best
// any learner can reach. Files are libsvm with 1-based indices.
#ifndef KEEL_WORKER_DATAGEN_H_
#define KEEL_WORKER_DATAGEN_H_

#include <cstdint>
#include <string>

#include "models/metrics.h"

namespace keel {

struct DatagenOptions {
  std::string model = "linear";  // "linear" or "fm"
  uint64_t rows = 100000;        // training rows; validation and test get rows / 10 each
  uint64_t features = 10000;
  int nnz = 20;
  int num_factors = 4;  // fm: factors of the planted model
  uint64_t seed = 1;
  int train_files = 4;
  std::string out;
};

// Writes <out>/train/part-N.libsvm, <out>/validation/part-0.libsvm,
// <out>/test/part-0.libsvm and <out>/oracle.json, and returns the oracle's
// validation metrics. Throws Error on bad options or a failed write.
MetricSet GenerateData(const DatagenOptions& options);

}  // namespace keel

#endif  // KEEL_WORKER_DATAGEN_H_
