#include "worker/data_statistics.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "base/checksum.h"
#include "base/error.h"
#include "base/json.h"
#include "io/input_split.h"
#include "models/factorization_machine.h"

namespace keel {
namespace {

// The sample is read as if by this many workers, a share from each.
constexpr int kSamplePieces = 8;

// unbias_data=auto centres the features present (non-zero) in at least this
// share of the sample's rows, whatever the data's format. A sparse row gains
// an entry for each centred feature it lacks, so the rule bounds what
// centring adds: at most as many entries as the rows held.
constexpr double kCentredShare = 0.5;

// "auto" resolves to `automatic`.
bool Resolve(const std::string& setting, bool automatic) {
  return setting == "auto" ? automatic : setting == "true";
}

// A positive, finite scale; anything else (a constant feature) is 1.
double UsableScale(double scale) { return std::isfinite(scale) && scale > 0 ? scale : 1.0; }

// What the frequency prior multiplies a feature's values by: p / F below F.
double PriorFactor(double share, double frequency_prior) {
  return share < frequency_prior ? share / frequency_prior : 1.0;
}

// Which features are centred: none, those in at least kCentredShare of the
// sample's rows, or every one with a non-zero mean.
enum class CentreRule { kNone, kFrequent, kEvery };

struct FeatureSums {
  double sum = 0, sum_of_squares = 0;
  uint64_t count = 0;
  bool seen = false;
};

// Feature indices below this are summed in a flat table (64 MiB at most),
// when the sample has at least an eighth as many non-zeros as the table slots.
constexpr uint64_t kFlatStatistics = uint64_t{1} << 21;

// Each feature's mean and scale, from sums over every row of the sample (a
// row that lacks a feature counts as a 0, so a zero written out, as in CSV,
// and one left out, as in libsvm, give the same figures): a centred feature
// its mean and standard deviation, any other the root mean square of its
// non-zero values under the frequency prior.
void FeatureStatistics(const Batch& sample, CentreRule centre, DataStatistics* out) {
  // Each feature's sums, added up in the sample's order: by index in a flat
  // table when the indices are small (a hash map's lookup per non-zero took
  // most of the statistics' time), else in a hash map.
  std::vector<FeatureSums> flat;
  std::unordered_map<uint64_t, FeatureSums> hashed;
  const uint64_t largest =
      sample.nnz() == 0 ? 0 : *std::max_element(sample.indices.begin(), sample.indices.end());
  const bool use_flat = sample.nnz() > 0 && largest < kFlatStatistics && largest / 8 < sample.nnz();
  if (use_flat) flat.resize(largest + 1);
  for (size_t i = 0; i < sample.nnz(); ++i) {
    FeatureSums& s = use_flat ? flat[sample.indices[i]] : hashed[sample.indices[i]];
    s.sum += sample.values[i];
    s.sum_of_squares += static_cast<double>(sample.values[i]) * sample.values[i];
    if (sample.values[i] != 0.0f) ++s.count;
    s.seen = true;
  }
  std::vector<const FeatureSums*> sums;
  if (use_flat) {
    for (uint64_t feature = 0; feature < flat.size(); ++feature) {
      if (!flat[feature].seen) continue;
      out->features.push_back(feature);
      sums.push_back(&flat[feature]);
    }
  } else {
    for (const auto& entry : hashed) out->features.push_back(entry.first);
    std::sort(out->features.begin(), out->features.end());
    for (const uint64_t feature : out->features) sums.push_back(&hashed.at(feature));
  }
  const double rows = static_cast<double>(sample.rows());
  for (const FeatureSums* s : sums) {
    // A feature whose sampled values are all 0 is as rare as one the sample
    // lacks (its share 0 would make the scale infinite).
    const double share = s->count > 0 ? static_cast<double>(s->count) / rows : 0.5 / rows;
    const double average = s->sum / rows;
    const bool centred = average != 0.0 && (centre == CentreRule::kEvery ||
                                            (centre == CentreRule::kFrequent &&
                                             share >= kCentredShare));
    double mean = 0, scale = 1, prior = 1;
    if (centred) {
      mean = average;
      scale = std::sqrt(std::max(0.0, s->sum_of_squares / rows - average * average));
      ++out->centred_features;
    } else {
      if (s->count > 0) scale = std::sqrt(s->sum_of_squares / static_cast<double>(s->count));
      prior = PriorFactor(share, out->frequency_prior);
    }
    out->means.push_back(mean);
    out->scales.push_back((out->features_scaled ? UsableScale(scale) : 1.0) / prior);
  }
  // A feature the sample lacks is rarer than one row in it: half a row's share.
  out->unsampled_scale = 1.0 / PriorFactor(0.5 / rows, out->frequency_prior);
}

void LabelStatistics(const Batch& sample, DataStatistics* out) {
  double sum = 0, sum_of_squares = 0;
  for (const float label : sample.labels) sum += label;
  const double mean = sample.labels.empty() ? 0.0 : sum / static_cast<double>(sample.labels.size());
  for (const float label : sample.labels) sum_of_squares += (label - mean) * (label - mean);
  const double variance =
      sample.labels.empty() ? 0.0 : sum_of_squares / static_cast<double>(sample.labels.size());
  out->label_offset = out->label_centred ? mean : 0.0;
  out->label_scale = out->label_scaled ? UsableScale(std::sqrt(variance)) : 1.0;
}

std::vector<float> BinaryClassWeights(const Batch& sample, const std::string& mult) {
  if (mult != "balanced") {
    const double positive = std::strtod(mult.c_str(), nullptr);
    if (positive == 1.0) return {};
    return {1.0f, static_cast<float>(positive)};
  }
  const uint64_t positives = static_cast<uint64_t>(
      std::count_if(sample.labels.begin(), sample.labels.end(), [](float y) { return y > 0.5f; }));
  const uint64_t negatives = sample.labels.size() - positives;
  if (positives == 0 || negatives == 0) {
    throw MakeError("--positive_example_weight_mult balanced: the sample of ", sample.rows(),
                    " training rows holds ", positives, " positive and ", negatives,
                    " negative examples (both are needed)");
  }
  return {1.0f, static_cast<float>(static_cast<double>(negatives) / positives)};
}

std::vector<float> MulticlassWeights(const Batch& sample, int classes) {
  std::vector<uint64_t> counts(classes, 0);
  for (const float label : sample.labels) {
    const int class_id = LabelToClass(label, classes);
    if (class_id >= 0) ++counts[class_id];
  }
  std::vector<float> weights(classes, 1.0f);
  const double rows = static_cast<double>(sample.labels.size());
  for (int c = 0; c < classes; ++c) {
    if (counts[c] > 0) weights[c] = static_cast<float>(rows / (classes * double(counts[c])));
  }
  return weights;
}

// Each feature's statistics (mean 0 and the unsampled scale for a feature not
// sampled), for features asked in ascending order, as a model's are: from
// where the last one was found, by steps that double, then a binary search
// within the last step (a binary search over all of them per feature took
// most of a fold's time). A smaller feature than the last searches them all.
class StatisticsCursor {
 public:
  explicit StatisticsCursor(const DataStatistics& statistics) : statistics_(statistics) {}

  std::pair<double, double> MeanAndScale(uint64_t feature) {
    const std::vector<uint64_t>& features = statistics_.features;
    size_t begin = 0, end = features.size();
    if (asked_ && feature >= last_) {
      // Every feature before at_ is below the last one asked, so below this
      // one: the first at or past it is at_ or later.
      begin = at_;
      size_t step = 1;
      while (begin + step < end && features[begin + step] < feature) {
        begin += step;
        step *= 2;
      }
      end = std::min(end, begin + step + 1);
    }
    at_ = static_cast<size_t>(
        std::lower_bound(features.begin() + begin, features.begin() + end, feature) -
        features.begin());
    asked_ = true;
    last_ = feature;
    if (at_ == features.size() || features[at_] != feature) {
      return {0.0, statistics_.unsampled_scale};
    }
    return {statistics_.means[at_], statistics_.scales[at_]};
  }

 private:
  const DataStatistics& statistics_;
  bool asked_ = false;
  uint64_t last_ = 0;  // the feature asked last
  size_t at_ = 0;      // where it was found, or would go
};

}  // namespace

bool DataStatistics::LeavesDataAlone() const {
  if (label_offset != 0.0 || label_scale != 1.0 || unsampled_scale != 1.0) return false;
  for (size_t i = 0; i < features.size(); ++i) {
    if (means[i] != 0.0 || scales[i] != 1.0) return false;
  }
  return true;
}

std::string DataStatistics::Json() const {
  // Every digit a double keeps: the statistics are read back from model.json.
  constexpr int kDigits = 17;
  constexpr auto kCompact = JsonObject::Style::kCompact;
  std::vector<std::string> weights;
  for (double weight : class_weights) weights.push_back(JsonNumberOrNull(weight, kDigits));
  return JsonObject(kCompact)
      .Count("sample_rows", sample_rows)
      .Count("training_rows", training_rows)
      .Bool("features_scaled", features_scaled)
      .Bool("features_centred", features_centred())
      .Count("centred_features", centred_features)
      .Count("sampled_features", features.size())
      .Number("frequency_prior", frequency_prior, kDigits)
      .Number("unsampled_scale", unsampled_scale, kDigits)
      .Bool("label_scaled", label_scaled)
      .Bool("label_centred", label_centred)
      .Number("label_offset", label_offset, kDigits)
      .Number("label_scale", label_scale, kDigits)
      .Add("class_weights", JsonArray(weights, kCompact))
      .Close();
}

ChannelSample ReadStatisticsSample(const std::string& channel, const ReaderOptions& reader,
                                   uint64_t rows) {
  if (channel.rfind("pipe:", 0) == 0) {
    throw MakeError("cannot sample ", channel, " for the data statistics: a pipe is read once");
  }
  ChannelSample sample;
  double channel_rows = 0;
  const uint64_t share = (rows + kSamplePieces - 1) / kSamplePieces;
  for (int piece = 0; piece < kSamplePieces; ++piece) {
    // The piece's bytes, and those its sampled rows took.
    uint64_t taken = 0, bytes = 0, bytes_read = 0;
    for (const InputSplit& split : ResolveChannel(channel, piece, kSamplePieces)) {
      bytes += std::min(split.end, split.file_size) - std::min(split.begin, split.file_size);
      if (taken >= share) continue;
      const auto split_reader = OpenReader(split, reader);
      while (taken < share) {
        const size_t got = split_reader->Read(share - taken, &sample.rows);
        if (got == 0) break;
        taken += got;
      }
      bytes_read += split_reader->bytes_read();
    }
    // A piece that ran out before its share was read whole: its rows are
    // counted. Otherwise its rows are estimated at the sample's bytes a row.
    channel_rows += taken < share || bytes <= bytes_read
                        ? static_cast<double>(taken)
                        : static_cast<double>(taken) * static_cast<double>(bytes) /
                              static_cast<double>(bytes_read);
  }
  sample.channel_rows = static_cast<uint64_t>(std::llround(channel_rows));
  return sample;
}

DataStatistics ComputeDataStatistics(const Batch& sample, const Hyperparameters& h,
                                     uint64_t training_rows) {
  DataStatistics out;
  out.sample_rows = sample.rows();
  out.training_rows = training_rows;
  out.features_scaled = h.normalize_data;
  out.frequency_prior = h.FrequencyPrior(training_rows);
  const CentreRule centre = h.unbias_data == "true" ? CentreRule::kEvery
                            : Resolve(h.unbias_data, h.normalize_data && h.use_bias)
                                ? CentreRule::kFrequent
                                : CentreRule::kNone;
  if (out.features_scaled || centre != CentreRule::kNone || out.frequency_prior > 0) {
    FeatureStatistics(sample, centre, &out);
  }
  if (h.predictor_type == PredictorType::kRegressor) {
    out.label_scaled = Resolve(h.normalize_label, true);
    out.label_centred = Resolve(h.unbias_label, out.label_scaled && h.use_bias);
    LabelStatistics(sample, &out);
  }
  if (h.predictor_type == PredictorType::kBinaryClassifier) {
    out.class_weights = BinaryClassWeights(sample, h.positive_example_weight_mult);
  } else if (h.predictor_type == PredictorType::kMulticlassClassifier &&
             h.balance_multiclass_weights) {
    out.class_weights = MulticlassWeights(sample, h.num_classes);
  }
  return out;
}

DataScaler::DataScaler(const DataStatistics& statistics)
    : unsampled_inverse_scale_(static_cast<float>(1.0 / statistics.unsampled_scale)),
      label_scaled_(statistics.label_scaled || statistics.label_centred),
      label_offset_(statistics.label_offset),
      label_scale_(statistics.label_scale) {
  features_.reserve(statistics.features.size());
  for (size_t i = 0; i < statistics.features.size(); ++i) {
    const bool unchanged = statistics.means[i] == 0.0 && statistics.scales[i] == 1.0;
    if (unchanged && statistics.unsampled_scale == 1.0) continue;
    Transform transform{static_cast<float>(statistics.means[i]),
                        static_cast<float>(1.0 / statistics.scales[i]), kNotCentred};
    if (statistics.means[i] != 0.0) {
      transform.centred = static_cast<int32_t>(centred_.size());
      centred_.push_back(statistics.features[i]);
      centred_absent_.push_back((0.0f - transform.mean) * transform.inverse_scale);
    }
    features_[statistics.features[i]] = transform;
  }
  // Every figure Apply reads, feature by feature in index order, after the
  // version of its arithmetic (raise it when Apply computes otherwise: a kept
  // batch cache holds batches scaled by it).
  constexpr uint32_t kApplyVersion = 1;
  Checksum64 sum;
  const auto add = [&sum](const auto& value) { sum.Add(&value, sizeof(value)); };
  add(kApplyVersion);
  add(unsampled_inverse_scale_);
  add(label_scaled_);
  add(label_offset_);
  add(label_scale_);
  for (size_t i = 0; i < statistics.features.size(); ++i) {
    const auto found = features_.find(statistics.features[i]);
    if (found == features_.end()) continue;
    add(statistics.features[i]);
    add(found->second.mean);
    add(found->second.inverse_scale);
    add(found->second.centred);
  }
  fingerprint_ = sum.value() == 0 ? 1 : sum.value();
  // The features are sorted by index: the last is the largest.
  if (!features_.empty() && statistics.features.back() < kFlatFeatures) {
    // An unsampled feature's (x - 0) * scale is x * scale, bit for bit.
    flat_.assign(statistics.features.back() + 1,
                 Transform{0.0f, unsampled_inverse_scale_, kNotCentred});
    for (const auto& [index, transform] : features_) flat_[index] = transform;
    features_.clear();
    if (centred_.empty()) {
      flat_inverse_scale_.reserve(flat_.size());
      for (const Transform& transform : flat_)
        flat_inverse_scale_.push_back(transform.inverse_scale);
    }
  }
}

const DataScaler::Transform* DataScaler::Find(uint64_t index) const {
  if (!flat_.empty()) return index < flat_.size() ? &flat_[index] : nullptr;
  const auto found = features_.find(index);
  return found == features_.end() ? nullptr : &found->second;
}

bool DataScaler::Apply(Batch* batch) const {
  bool changed = false;
  if (!centred_.empty() ||
      std::find(batch->values.begin(), batch->values.end(), 0.0f) != batch->values.end()) {
    changed = Rebuild(batch);
  } else if (!flat_inverse_scale_.empty()) {
    // No mean to take off: (x - 0) * s is x * s, bit for bit.
    const size_t size = flat_inverse_scale_.size();
    for (size_t i = 0; i < batch->nnz(); ++i) {
      const uint64_t index = batch->indices[i];
      batch->values[i] *= index < size ? flat_inverse_scale_[index] : unsampled_inverse_scale_;
    }
  } else if (!flat_.empty() || !features_.empty() || unsampled_inverse_scale_ != 1.0f) {
    for (size_t i = 0; i < batch->nnz(); ++i) {
      const Transform* transform = Find(batch->indices[i]);
      batch->values[i] = transform == nullptr ? batch->values[i] * unsampled_inverse_scale_
                                              : (batch->values[i] - transform->mean) *
                                                    transform->inverse_scale;
    }
  }
  if (label_scaled_) {
    for (float& label : batch->labels) {
      label = static_cast<float>((label - label_offset_) / label_scale_);
    }
  }
  return changed;
}

bool DataScaler::Rebuild(Batch* batch) const {
  // Each row's entries, scaled, but for the zeros of features not centred
  // (which stay 0: a zero left out and one written out train alike); then
  // the centred features it lacks (a row of CSV lists them all, and gains
  // none).
  std::vector<uint64_t> indices;
  std::vector<float> values;
  std::vector<uint64_t> offsets = {0};
  indices.reserve(batch->nnz());
  values.reserve(batch->nnz());
  offsets.reserve(batch->row_offsets.size());
  // seen[c] == r + 1: row r lists centred feature c.
  std::vector<size_t> seen(centred_.size(), 0);
  for (size_t r = 0; r < batch->rows(); ++r) {
    for (uint64_t i = batch->row_offsets[r]; i < batch->row_offsets[r + 1]; ++i) {
      const Transform* transform = Find(batch->indices[i]);
      const bool centred = transform != nullptr && transform->centred != kNotCentred;
      if (batch->values[i] == 0.0f && !centred) continue;
      indices.push_back(batch->indices[i]);
      if (transform == nullptr) {
        values.push_back(batch->values[i] * unsampled_inverse_scale_);
        continue;
      }
      values.push_back((batch->values[i] - transform->mean) * transform->inverse_scale);
      if (centred) seen[static_cast<size_t>(transform->centred)] = r + 1;
    }
    for (size_t c = 0; c < centred_.size(); ++c) {
      if (seen[c] == r + 1) continue;
      indices.push_back(centred_[c]);
      values.push_back(centred_absent_[c]);
    }
    offsets.push_back(indices.size());
  }
  // The same entries in the same order (a CSV row that lists every centred
  // feature and no zero of another) keep the keys prepared for them.
  const bool changed = indices != batch->indices || offsets != batch->row_offsets;
  batch->indices = std::move(indices);
  batch->values = std::move(values);
  batch->row_offsets = std::move(offsets);
  return changed;
}

void FoldIntoLinear(const DataStatistics& statistics, const std::vector<uint64_t>& features,
                    int classes, float* weights, float* bias) {
  std::vector<double> bias_shift(classes, 0.0);
  StatisticsCursor cursor(statistics);
  for (size_t i = 0; i < features.size(); ++i) {
    const auto [mean, scale] = cursor.MeanAndScale(features[i]);
    for (int c = 0; c < classes; ++c) {
      float& weight = weights[i * classes + c];
      const double scaled = weight / scale;
      bias_shift[c] -= scaled * mean;
      weight = static_cast<float>(scaled * statistics.label_scale);
    }
  }
  for (int c = 0; c < classes; ++c) {
    bias[c] = static_cast<float>((bias[c] + bias_shift[c]) * statistics.label_scale +
                                 statistics.label_offset);
  }
}

void FoldIntoFactorizationMachine(const DataStatistics& statistics,
                                  const std::vector<uint64_t>& features, int k, float* params,
                                  float* bias) {
  const int width = FmRowWidth(k);
  // c = sum_j u_j mean_j, and the bias's shift.
  std::vector<double> centre(k, 0.0);
  double bias_shift = 0.0;
  std::vector<double> means(features.size()), scales(features.size());
  StatisticsCursor cursor(statistics);
  for (size_t i = 0; i < features.size(); ++i) {
    std::tie(means[i], scales[i]) = cursor.MeanAndScale(features[i]);
    const float* row = params + i * width;
    bias_shift -= row[0] / scales[i] * means[i];
    double norm = 0.0;
    for (int f = 0; f < k; ++f) {
      const double u = row[1 + f] / scales[i];
      centre[f] += u * means[i];
      norm += u * u;
    }
    bias_shift -= 0.5 * norm * means[i] * means[i];
  }
  for (int f = 0; f < k; ++f) bias_shift += 0.5 * centre[f] * centre[f];
  const double label_scale = statistics.label_scale;
  const double factor_scale = std::sqrt(label_scale);
  for (size_t i = 0; i < features.size(); ++i) {
    float* row = params + i * width;
    double linear = row[0] / scales[i];
    for (int f = 0; f < k; ++f) {
      const double u = row[1 + f] / scales[i];
      linear += u * (u * means[i] - centre[f]);
      row[1 + f] = static_cast<float>(u * factor_scale);
    }
    row[0] = static_cast<float>(linear * label_scale);
  }
  bias[0] = static_cast<float>((bias[0] + bias_shift) * label_scale + statistics.label_offset);
}

void FoldStatistics(const DataStatistics& statistics, ModelArtifact* model) {
  Hyperparameters& h = model->hyperparameters;
  model->data_statistics_json = statistics.Json();
  if (statistics.LeavesDataAlone()) return;
  if (model->bias.empty())
    model->bias.assign(h.job == JobKind::kFactorizationMachines ? 1 : h.classes(), 0.0f);
  if (h.job == JobKind::kFactorizationMachines) {
    FoldIntoFactorizationMachine(statistics, model->features, h.num_factors, model->weights.data(),
                                 model->bias.data());
  } else {
    FoldIntoLinear(statistics, model->features, h.classes(), model->weights.data(),
                   model->bias.data());
  }
  if (statistics.features_centred() || statistics.label_centred) h.use_bias = true;
}

}  // namespace keel
