// Data statistics taken before training: each feature's scale (and, for
// features present in most rows, its mean), a regressor's label offset and scale, and the class
// weights (SageMaker Linear Learner's normalize_data, unbias_data,
// normalize_label, unbias_label, num_point_for_scaler,
// positive_example_weight_mult, balance_multiclass_weights).
//
// Training sees x' = (x - mean) / scale per feature and y' = (y - offset) /
// scale for a regressor's label; the saved model has the statistics folded in
// (FoldStatistics), so that it scores raw features and predicts labels on
// their original scale.
//
// Every worker reads the same sample (ReadStatisticsSample) and computes the
// statistics from it in double precision, so all workers, and a resumed job,
// train with identical statistics without exchanging them. The statistics do
// not depend on the data's format: the same rows as CSV, libsvm or sparse
// recordIO give the same statistics and the same scaled rows.
#ifndef KEEL_WORKER_DATA_STATISTICS_H_
#define KEEL_WORKER_DATA_STATISTICS_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/batch.h"
#include "io/readers.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"

namespace keel {

struct DataStatistics {
  // Rows the statistics were taken from, and the training channel's rows
  // (ChannelSample::channel_rows; 0: not known).
  uint64_t sample_rows = 0;
  uint64_t training_rows = 0;
  // Features seen in the sample, sorted by index, with x' = (x - mean) / scale.
  // Features not listed keep mean 0 and scale 1.
  std::vector<uint64_t> features;
  std::vector<double> means;   // 0 for a feature not centred
  std::vector<double> scales;  // positive
  // The frequency prior in force (0: off; Hyperparameters::frequency_prior,
  // never on dense data), and the scale of every feature the sample lacks
  // (1 unless the prior is on).
  double frequency_prior = 0.0;
  double unsampled_scale = 1.0;
  bool features_scaled = false;
  // Features centred on their mean (a non-zero one).
  uint64_t centred_features = 0;
  bool features_centred() const { return centred_features > 0; }
  // A regressor's label: y' = (y - label_offset) / label_scale.
  bool label_scaled = false;
  bool label_centred = false;
  double label_offset = 0.0;
  double label_scale = 1.0;
  // The weight of an example's loss by its class: binary classifiers
  // {negative, positive}, multiclass one per class. Empty: every example
  // weighs 1.
  std::vector<float> class_weights;

  // True when the statistics change neither the features nor the label
  // (normalisation off, or every mean 0 and every scale 1, as for 0/1
  // features): training then skips scaling and folding.
  bool LeavesDataAlone() const;
  // The statistics in force, as a JSON object, for model.json (the means and
  // scales themselves are not listed: they are folded into the weights).
  std::string Json() const;
};

// The statistics' sample of a channel, and the channel's rows.
struct ChannelSample {
  Batch rows;
  // The rows of the whole channel: counted where the sample read a piece to
  // its end, elsewhere the piece's bytes over the bytes the sample read per
  // row. 0 when not known (a pipe).
  uint64_t channel_rows = 0;
};

// Up to `rows` rows of `channel` (a file, folder or storage URI; not a pipe),
// the same on every call: the channel cut into 8 pieces as if for 8 workers,
// and the first rows/8 (rounded up) rows of each piece, so that a channel
// sorted by file or by time is sampled across its length. `reader` as for
// training (bad records throw or are skipped as it says; held-out rows are
// not counted). Throws Error.
ChannelSample ReadStatisticsSample(const std::string& channel, const ReaderOptions& reader,
                                   uint64_t rows);

// The statistics of `sample` under `hyperparameters`' settings, the same
// whatever the data's format: every figure is taken over all the sample's
// rows, a row that lacks a feature counting as a 0 (a zero written out, as in
// CSV, and one left out, as in libsvm or sparse recordIO, are the same).
//   centring (unbias_data): auto (on when normalize_data and use_bias are)
//     centres each feature present (non-zero) in at least half the rows on
//     its mean; true centres every feature with a non-zero mean (sparse rows
//     then gain every sampled feature); false none. DataScaler adds to each
//     row the centred features it lacks, so that the row is centred as a
//     dense one would be; the means fold into the bias.
//   scale (normalize_data): a centred feature is divided by its standard
//     deviation, any other by the root mean square of its non-zero values. A
//     feature whose scale is 0 keeps scale 1.
//   frequency prior (Hyperparameters::FrequencyPrior(training_rows) F > 0,
//     features not centred): a feature in a share p < F of the sample's rows
//     has its scale divided by p / F (so its values are multiplied by p / F);
//     a feature the sample lacks counts as half a row. `training_rows` is the
//     training channel's (ChannelSample::channel_rows; 0: not known).
//   label (regressor, normalize_label auto or true): divided by its standard
//     deviation, centred (unbias_label auto or true) on its mean.
//   class weights: positive_example_weight_mult (a number, or balanced:
//     negatives / positives of the sample) for a binary classifier;
//     rows / (classes x class rows) per class with balance_multiclass_weights
//     (a class absent from the sample weighs 1).
// Throws Error for a balanced weight without both classes in the sample.
DataStatistics ComputeDataStatistics(const Batch& sample, const Hyperparameters& hyperparameters,
                                     uint64_t training_rows = 0);

// Applies statistics to minibatches as they are prepared. Thread-safe for
// concurrent use (read only once built).
class DataScaler {
 public:
  explicit DataScaler(const DataStatistics& statistics);
  // Scales the features (and a regressor's labels) of `batch` in place,
  // drops the zeros of features not centred, and adds to each row the
  // centred features it lacks (their value, 0, centred and scaled) after its
  // own: the same rows as CSV, libsvm or sparse recordIO then train alike
  // (optimizers such as adam move a weight pushed a zero gradient). True when
  // entries were dropped or added: the batch's keys are to be prepared again.
  bool Apply(Batch* batch) const;

  // What Apply does, as a number: two scalers with the same fingerprint scale
  // every batch alike (the batch cache keeps scaled batches under it). Never
  // 0, which stands for no scaling.
  uint64_t fingerprint() const { return fingerprint_; }
  // The features Apply centres (and adds to a row that lacks them).
  size_t centred_features() const { return centred_.size(); }

 private:
  static constexpr int32_t kNotCentred = -1;
  struct Transform {
    float mean, inverse_scale;
    int32_t centred;  // the feature's place in centred_, or kNotCentred
  };
  // The transform of a sampled feature; nullptr for one the sample lacks.
  const Transform* Find(uint64_t index) const;
  // Apply's dropping and adding; true when the entries changed.
  bool Rebuild(Batch* batch) const;
  // Indices up to this many are looked up in a flat table, larger ones in a
  // hash map (a lookup per non-zero: the flat one is several times faster).
  static constexpr uint64_t kFlatFeatures = uint64_t{1} << 21;
  std::vector<Transform> flat_;                       // by index: every index below its size
  // flat_'s inverse scales alone, when no feature is centred (every mean 0):
  // a third of its bytes for the lookup per non-zero of a batch kept as it is.
  std::vector<float> flat_inverse_scale_;
  std::unordered_map<uint64_t, Transform> features_;  // when flat_ is empty
  std::vector<uint64_t> centred_;                     // the centred features, ascending
  std::vector<float> centred_absent_;                 // their value where a row lacks them
  float unsampled_inverse_scale_;
  bool label_scaled_;
  double label_offset_, label_scale_;
  uint64_t fingerprint_ = 1;
};

// Folds the statistics into a linear model trained on scaled data, so that it
// gives the same scores on raw data: w_jc / scale_j, bias_c - sum_j w_jc
// mean_j / scale_j, then for a regressor's label score x label_scale +
// label_offset. `weights` is features.size() x classes, `bias` classes floats.
void FoldIntoLinear(const DataStatistics& statistics, const std::vector<uint64_t>& features,
                    int classes, float* weights, float* bias);

// The same for a factorization machine with `k` factors (`params`:
// features.size() x (1 + k), [w, v_1..v_k]; `bias`: 1 float). With u_j =
// v_j / scale_j and c = sum_j u_j mean_j, the centred score expands into
// FM form: v'_j = u_j, w'_j = w_j / scale_j - <u_j, c> + |u_j|^2 mean_j,
// bias' = bias - sum_j w_j mean_j / scale_j + |c|^2 / 2 - sum_j |u_j|^2
// mean_j^2 / 2; then the label scale multiplies w' and bias' and its square
// root the factors, and the offset adds to the bias.
void FoldIntoFactorizationMachine(const DataStatistics& statistics,
                                  const std::vector<uint64_t>& features, int k, float* params,
                                  float* bias);

// Folds the statistics into `model` (FoldIntoLinear or
// FoldIntoFactorizationMachine) and records them in its model.json. A model
// trained without --use_bias gains a bias when the statistics give it an
// offset (centred features or label).
void FoldStatistics(const DataStatistics& statistics, ModelArtifact* model);

}  // namespace keel

#endif  // KEEL_WORKER_DATA_STATISTICS_H_
