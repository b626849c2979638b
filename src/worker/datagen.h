// Synthetic data drawn from a planted model, for experiments and tests.
//
// Rows have `nnz` distinct features (value 1) drawn from `features` with a
// power-law popularity (density proportional to rank^(-2/3)); labels are sampled from the planted
// model's probability (logistic link), so the planted model's own validation metrics are the best
// any learner can reach. Files are libsvm with 1-based indices.
//
// Other tasks, by predictor_type:
// - regressor: label = label_offset + label_scale * (z + e), z the planted
//   score standardized (mean 0, deviation 1, measured on 10^4 rows drawn
//   apart) and e Gaussian noise of the same level, N(0, 1). The labels then
//   have mean label_offset and deviation label_scale * sqrt(2), and the
//   oracle (label_offset + label_scale * z) has MSE label_scale^2.
// - multiclass_classifier (model linear): num_classes planted weight vectors
//   and biases; the label is drawn from the softmax of their scores.
// feature_scale_spread S > 0 multiplies each feature's values by 10^u, u
// uniform in [-S/2, S/2] per feature, drawn apart so that rows and labels are
// those of S = 0: the oracle's metrics are unchanged, but a learner sees
// features of unstandardized scales. dense_features D > 0 adds D features
// (indices after the sparse ones) present in every row, as measurements are:
// feature j's value is offset_j + spread_j z_j, z_j standard normal per row,
// offset_j 10^u with u uniform in [0, dense_offset_decades], spread_j 3% to
// 50% of it; the planted model weighs z_j (weights N(0, 1/D): a score
// deviation near 1 from them). Rows are written in `format`: libsvm, CSV
// (every column, zeros written: for few features) or sparse recordIO, the same
// rows and labels in each for a seed. Existing options give the same bytes as
// before these were added.
#ifndef KEEL_WORKER_DATAGEN_H_
#define KEEL_WORKER_DATAGEN_H_

#include <cstdint>
#include <string>

#include "io/example_reader.h"
#include "models/metrics.h"
#include "worker/hyperparameters.h"

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
  PredictorType predictor_type = PredictorType::kBinaryClassifier;
  int num_classes = 3;              // multiclass_classifier
  double label_offset = 0;          // regressor
  double label_scale = 1;           // regressor
  double feature_scale_spread = 0;  // decades; 0: every value is 1
  // Dense features after the sparse ones, in every row, with offsets of up to
  // dense_offset_decades decades (see above).
  int dense_features = 0;
  double dense_offset_decades = 3;
  DataFormat format = DataFormat::kLibsvm;  // of every file
};

// The extension of a data file datagen writes in `format`: ".libsvm", ".csv"
// or ".recordio".
const char* DataFileExtension(DataFormat format);

// Writes <out>/train/part-N.EXT, <out>/validation/part-0.EXT,
// <out>/test/part-0.EXT (EXT: libsvm, csv or recordio) and <out>/oracle.json, and returns the oracle's
// validation and test metrics ("validation:roc_auc_score"; the regression and
// multiclass metric names of models/metrics.h for those tasks). Throws Error
// on bad options or a failed write.
MetricSet GenerateData(const DatagenOptions& options);

}  // namespace keel

#endif  // KEEL_WORKER_DATAGEN_H_
