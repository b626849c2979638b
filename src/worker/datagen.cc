#include "worker/datagen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "io/recordio.h"
#include "models/losses.h"
#include "record.pb.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

struct PlantedModel {
  float bias = 0;
  std::vector<float> linear;   // per feature
  std::vector<float> factors;  // per feature x k (fm only)
  int k = 0;
  int classes = 1;  // multiclass: linear holds features x classes
  // The dense features' weights on their standardized values (per class for
  // multiclass): dense x classes.
  std::vector<float> dense;

  // Multiclass: the `classes` scores of `row` and the dense features'
  // standardized values `z` into `scores`.
  void ClassScores(const std::vector<uint64_t>& row, const std::vector<float>& z,
                   float* scores) const {
    for (int c = 0; c < classes; ++c) scores[c] = 0;
    for (uint64_t f : row) {
      for (int c = 0; c < classes; ++c) scores[c] += linear[f * classes + c];
    }
    for (size_t j = 0; j < z.size(); ++j) {
      for (int c = 0; c < classes; ++c) scores[c] += dense[j * classes + c] * z[j];
    }
  }

  float Score(const std::vector<uint64_t>& row, const std::vector<float>& z) const {
    float score = bias;
    for (uint64_t f : row) score += linear[f];
    for (size_t j = 0; j < z.size(); ++j) score += dense[j] * z[j];
    if (k > 0) {
      for (int c = 0; c < k; ++c) {
        float sum = 0, squares = 0;
        for (uint64_t f : row) {
          const float v = factors[f * k + c];
          sum += v;
          squares += v * v;
        }
        score += 0.5f * (sum * sum - squares);
      }
    }
    return score;
  }
};

// A data file of generated rows in `format`: the sparse features' values (1,
// or each feature's scale), then the dense features' values. libsvm: 1-based
// indices, the dense features after the sparse ones; CSV: every column, zeros
// written; recordIO: sparse records (0-based keys, shape the feature count).
class DataFile {
 public:
  // `scales`: empty for value 1, else one per sparse feature. `real_labels`:
  // labels written as reals ("%.9g") rather than integers.
  DataFile(const std::string& path, DataFormat format, const std::vector<float>& scales,
           uint64_t sparse_features, bool real_labels)
      : path_(path),
        format_(format),
        scales_(scales),
        sparse_features_(sparse_features),
        real_labels_(real_labels) {
    if (format_ == DataFormat::kRecordIO) {
      recordio_ = std::make_unique<RecordIOWriter>(path);
    } else {
      file_ = std::fopen(path.c_str(), "w");
      if (!file_) throw MakeError("cannot write ", path);
    }
  }
  ~DataFile() {
    if (file_) std::fclose(file_);
  }
  void Write(float label, const std::vector<uint64_t>& row, const std::vector<float>& dense) {
    switch (format_) {
      case DataFormat::kLibsvm:
        WriteLabel(label);
        for (uint64_t f : row) {
          std::fprintf(file_, " %llu:%.7g", static_cast<unsigned long long>(f + 1),
                       scales_.empty() ? 1.0f : scales_[f]);
        }
        for (size_t j = 0; j < dense.size(); ++j) {
          std::fprintf(file_, " %llu:%.9g",
                       static_cast<unsigned long long>(sparse_features_ + j + 1), dense[j]);
        }
        std::fputc('\n', file_);
        return;
      case DataFormat::kCsv: {
        WriteLabel(label);
        size_t next = 0;  // the row's features are sorted
        for (uint64_t f = 0; f < sparse_features_; ++f) {
          if (next < row.size() && row[next] == f) {
            std::fprintf(file_, ",%.7g", scales_.empty() ? 1.0f : scales_[f]);
            ++next;
          } else {
            std::fputs(",0", file_);
          }
        }
        for (const float value : dense) std::fprintf(file_, ",%.9g", value);
        std::fputc('\n', file_);
        return;
      }
      case DataFormat::kRecordIO: {
        aialgs::data::Record record;
        auto& features = *(*record.mutable_features())["values"].mutable_float32_tensor();
        for (uint64_t f : row) {
          features.add_keys(f);
          features.add_values(Value(f));
        }
        for (size_t j = 0; j < dense.size(); ++j) {
          features.add_keys(sparse_features_ + j);
          features.add_values(dense[j]);
        }
        features.add_shape(sparse_features_ + dense.size());
        (*record.mutable_label())["values"].mutable_float32_tensor()->add_values(label);
        recordio_->Write(record);
        return;
      }
    }
  }
  void Close() {
    if (recordio_) {
      recordio_->Flush();
      return;
    }
    if (std::fclose(file_) != 0) throw MakeError("cannot write ", path_);
    file_ = nullptr;
  }

 private:
  // A sparse feature's value as the text formats write it (7 significant
  // digits, as before dense features and other formats were added), so that
  // recordIO holds the same number. Dense values are written exactly (%.9g).
  float Value(uint64_t f) const {
    if (scales_.empty()) return 1.0f;
    char text[32];
    std::snprintf(text, sizeof(text), "%.7g", scales_[f]);
    return std::strtof(text, nullptr);
  }
  void WriteLabel(float label) {
    if (real_labels_) {
      std::fprintf(file_, "%.9g", label);
    } else {
      std::fprintf(file_, "%d", static_cast<int>(label));
    }
  }

  std::string path_;
  DataFormat format_;
  FILE* file_ = nullptr;
  std::unique_ptr<RecordIOWriter> recordio_;
  const std::vector<float>& scales_;
  const uint64_t sparse_features_;
  const bool real_labels_;
};

// Throws Error naming the flag unless `options` can make a data set.
void CheckOptions(const DatagenOptions& options) {
  if (options.model != "linear" && options.model != "fm") {
    throw MakeError("--model '", options.model, "' is not linear or fm");
  }
  if (options.out.empty()) throw MakeError("--out FOLDER is required");
  if (options.features < 2 || options.nnz < 1 ||
      static_cast<uint64_t>(options.nnz) > options.features / 2) {
    throw MakeError("--nnz ", options.nnz, " must be between 1 and half of --features (",
                    options.features, ")");
  }
  if (options.rows < 10 || options.train_files < 1) {
    throw MakeError("--rows must be at least 10 and there must be at least one training file");
  }
  if (options.predictor_type == PredictorType::kMulticlassClassifier &&
      (options.model != "linear" || options.num_classes < 3 || options.num_classes > 1000)) {
    throw MakeError("datagen multiclass_classifier needs --model=linear and --num_classes in 3..",
                    "1000 (got --model=", options.model, " --num_classes=", options.num_classes,
                    ")");
  }
  if (!std::isfinite(options.label_offset) || !(options.label_scale > 0) ||
      !std::isfinite(options.label_scale)) {
    throw MakeError("--label_offset must be finite and --label_scale finite and above 0 (got ",
                    options.label_offset, " and ", options.label_scale, ")");
  }
  if (!(options.feature_scale_spread >= 0 && options.feature_scale_spread <= 20)) {
    throw MakeError("--feature_scale_spread ", options.feature_scale_spread,
                    " must be between 0 and 20 decades");
  }
  if (options.dense_features > 10000) {
    throw MakeError("--dense_features ", options.dense_features, " must be at most 10000");
  }
  if (!(options.dense_offset_decades >= 0 && options.dense_offset_decades <= 6)) {
    throw MakeError("--dense_offset_decades ", options.dense_offset_decades,
                    " must be between 0 and 6");
  }
}

// The planted weights, drawn from `random`. Common features carry most of
// the signal, as in real logs; the rare tail matters less (it would otherwise
// be noise no learner could estimate), and interactions, whose pairs are
// rarer still, live mostly among common features.
PlantedModel PlantModel(const DatagenOptions& options, std::mt19937_64* random) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  PlantedModel planted;
  // Scores with a standard deviation near 2: informative but noisy labels.
  const float linear_scale = 1.6f / std::sqrt(static_cast<float>(options.nnz));
  planted.linear.resize(options.features);
  auto influence = [&](uint64_t f) {
    return std::pow(1.0f + 100.0f * static_cast<float>(f) / options.features, -0.75f);
  };
  for (uint64_t f = 0; f < options.features; ++f) {
    planted.linear[f] = 2.0f * linear_scale * influence(f) * normal(*random);
  }
  planted.bias = -0.3f;
  if (options.predictor_type == PredictorType::kMulticlassClassifier) {
    planted.classes = options.num_classes;
    planted.linear.resize(options.features * planted.classes);
    for (uint64_t f = 0; f < options.features; ++f) {
      for (int c = 0; c < planted.classes; ++c) {
        planted.linear[f * planted.classes + c] =
            2.0f * linear_scale * influence(f) * normal(*random);
      }
    }
    return planted;
  }
  if (options.model != "fm") return planted;
  planted.k = options.num_factors;
  const float pairs = 0.5f * options.nnz * (options.nnz - 1);
  const float factor_scale = std::sqrt(1.2f / std::sqrt(pairs * static_cast<float>(planted.k)));
  planted.factors.resize(options.features * planted.k);
  for (uint64_t f = 0; f < options.features; ++f) {
    for (int c = 0; c < planted.k; ++c) {
      planted.factors[f * planted.k + c] =
          2.0f * factor_scale * influence(f) * influence(f) * normal(*random);
    }
  }
  return planted;
}

// Rows of `nnz` distinct features, sorted. Feature popularity follows a power
// law, as in click logs: density proportional to rank^(-2/3), so a few
// features are common and most are rare.
class RowSampler {
 public:
  RowSampler(uint64_t features, int nnz) : features_(features), nnz_(nnz) {}

  void Draw(std::mt19937_64* random, std::vector<uint64_t>* row) {
    row->clear();
    while (row->size() < static_cast<size_t>(nnz_)) {
      const uint64_t f = Feature(random);
      if (std::find(row->begin(), row->end(), f) == row->end()) row->push_back(f);
    }
    std::sort(row->begin(), row->end());
  }

 private:
  uint64_t Feature(std::mt19937_64* random) {
    const double u = unit_(*random);
    return std::min<uint64_t>(features_ - 1, static_cast<uint64_t>(features_ * u * u * u));
  }

  const uint64_t features_;
  const int nnz_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
};

// The dense features: each present in every row, its value offset_j +
// spread_j z_j with z_j standard normal, drawn per row (the planted model
// weighs z_j), as measurements such as a blood pressure are: 10^u, u uniform
// in [0, dense_offset_decades], with a spread of 3% to 50% of it.
struct DenseFeatures {
  std::vector<float> offsets, spreads;

  // The next row's standardized draws `z` and their values.
  void Draw(std::mt19937_64* random, std::vector<float>* z, std::vector<float>* values) {
    for (size_t j = 0; j < offsets.size(); ++j) {
      (*z)[j] = normal(*random);
      (*values)[j] = offsets[j] + spreads[j] * (*z)[j];
    }
  }
  std::normal_distribution<float> normal{0.0f, 1.0f};
};

// The dense features of `options`, and their planted weights into `planted`,
// each drawn with its own generator (so that the sparse features' weights are
// those of a set without dense ones).
DenseFeatures MakeDenseFeatures(const DatagenOptions& options, PlantedModel* planted) {
  DenseFeatures dense;
  std::mt19937_64 random(options.seed ^ 0xde45e0ffULL);
  std::uniform_real_distribution<double> decades(0.0, options.dense_offset_decades);
  std::uniform_real_distribution<double> spread(-1.5, -0.3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int d = options.dense_features;
  for (int j = 0; j < d; ++j) {
    const double offset = std::pow(10.0, decades(random));
    dense.offsets.push_back(static_cast<float>(offset));
    dense.spreads.push_back(static_cast<float>(offset * std::pow(10.0, spread(random))));
  }
  // Scores from the dense part with a deviation near 1.
  const float weight = d > 0 ? 1.0f / std::sqrt(static_cast<float>(d)) : 0.0f;
  planted->dense.resize(static_cast<size_t>(d) * planted->classes);
  for (float& w : planted->dense) w = weight * normal(random);
  return dense;
}

// How a regression label is made from the planted score: standardized, then
// scaled and offset (see datagen.h).
struct LabelScaling {
  float score_mean = 0;
  float score_deviation = 1;
  float offset = 0;
  float scale = 1;
};

// The planted model's generator: rows, and labels drawn from its probability
// (or, for regression, its score plus noise).
class Generator {
 public:
  Generator(const PlantedModel& planted, PredictorType task, LabelScaling scaling, RowSampler rows,
            DenseFeatures dense, std::mt19937_64 random)
      : planted_(planted),
        task_(task),
        scaling_(scaling),
        rows_(std::move(rows)),
        dense_(std::move(dense)),
        random_(std::move(random)),
        z_(dense_.offsets.size()),
        dense_values_(dense_.offsets.size()),
        oracle_(task == PredictorType::kMulticlassClassifier ? planted.classes : 1) {}

  // Draws the next row (row()) and returns its label; oracle() is then the
  // planted model's prediction for it (the probability of 1, the regression
  // value, or the class probabilities).
  float Next() {
    rows_.Draw(&random_, &row_);
    dense_.Draw(&random_, &z_, &dense_values_);
    switch (task_) {
      case PredictorType::kBinaryClassifier:
        oracle_[0] = Sigmoid(planted_.Score(row_, z_));
        return uniform_(random_) < oracle_[0] ? 1.0f : 0.0f;
      case PredictorType::kRegressor: {
        const float z = (planted_.Score(row_, z_) - scaling_.score_mean) / scaling_.score_deviation;
        oracle_[0] = scaling_.offset + scaling_.scale * z;
        return oracle_[0] + scaling_.scale * normal_(random_);
      }
      case PredictorType::kMulticlassClassifier:
        break;
    }
    planted_.ClassScores(row_, z_, oracle_.data());
    Softmax(oracle_.data(), planted_.classes, oracle_.data());
    const float u = uniform_(random_);
    float cumulative = 0;
    for (int c = 0; c + 1 < planted_.classes; ++c) {
      cumulative += oracle_[c];
      if (u < cumulative) return static_cast<float>(c);
    }
    return static_cast<float>(planted_.classes - 1);
  }
  const std::vector<uint64_t>& row() const { return row_; }
  // The dense features' values of the row.
  const std::vector<float>& dense() const { return dense_values_; }
  const std::vector<float>& oracle() const { return oracle_; }

 private:
  const PlantedModel& planted_;
  const PredictorType task_;
  const LabelScaling scaling_;
  RowSampler rows_;
  DenseFeatures dense_;
  std::mt19937_64 random_;
  std::uniform_real_distribution<float> uniform_{0.0f, 1.0f};
  std::normal_distribution<float> normal_{0.0f, 1.0f};
  std::vector<uint64_t> row_;
  std::vector<float> z_, dense_values_;
  std::vector<float> oracle_;
};

// The regression label scaling: the planted score's mean and deviation on
// 10^4 rows drawn with their own generator (the data's draws stay as they are).
LabelScaling MeasureScaling(const DatagenOptions& options, const PlantedModel& planted,
                            DenseFeatures dense) {
  LabelScaling scaling;
  scaling.offset = static_cast<float>(options.label_offset);
  scaling.scale = static_cast<float>(options.label_scale);
  std::mt19937_64 random(options.seed ^ 0x5eedca1eULL);
  RowSampler rows(options.features, options.nnz);
  std::vector<uint64_t> row;
  std::vector<float> z(dense.offsets.size()), values(dense.offsets.size());
  constexpr int kRows = 10000;
  double sum = 0, squares = 0;
  for (int r = 0; r < kRows; ++r) {
    rows.Draw(&random, &row);
    dense.Draw(&random, &z, &values);
    const double score = planted.Score(row, z);
    sum += score;
    squares += score * score;
  }
  const double mean = sum / kRows;
  scaling.score_mean = static_cast<float>(mean);
  scaling.score_deviation =
      static_cast<float>(std::sqrt(std::max(squares / kRows - mean * mean, 1e-12)));
  return scaling;
}

// Each feature's value, 10^u with u uniform in [-spread/2, spread/2], drawn
// with its own generator; empty when spread is 0 (every value 1).
std::vector<float> FeatureScales(const DatagenOptions& options) {
  if (options.feature_scale_spread <= 0) return {};
  std::mt19937_64 random(options.seed ^ 0xfea75ca1eULL);
  std::uniform_real_distribution<double> u(-0.5 * options.feature_scale_spread,
                                           0.5 * options.feature_scale_spread);
  std::vector<float> scales(options.features);
  for (float& scale : scales) scale = static_cast<float>(std::pow(10.0, u(random)));
  return scales;
}

// <out>/<channel>/part-N.<format>, a data file of the channel.
std::unique_ptr<DataFile> OpenDataFile(const DatagenOptions& options, const std::string& channel,
                                       int n, const std::vector<float>& scales) {
  const std::string path = options.out + "/" + channel + "/part-" + std::to_string(n) +
                           DataFileExtension(options.format);
  return std::make_unique<DataFile>(path, options.format, scales, options.features,
                                    options.predictor_type == PredictorType::kRegressor);
}

// <out>/train/part-N.<format>: `rows` rows, dealt to the files in turn.
void WriteTrainingChannel(const DatagenOptions& options, const std::vector<float>& scales,
                          Generator* generator) {
  std::vector<std::unique_ptr<DataFile>> train;
  for (int i = 0; i < options.train_files; ++i) {
    train.push_back(OpenDataFile(options, "train", i, scales));
  }
  for (uint64_t r = 0; r < options.rows; ++r) {
    const float label = generator->Next();
    train[r % train.size()]->Write(label, generator->row(), generator->dense());
  }
  for (auto& file : train) file->Close();
}

// The metrics of the task (models/metrics.h) of the oracle's predictions.
MetricSet OracleMetrics(const DatagenOptions& options, const std::vector<float>& predictions,
                        const std::vector<float>& labels) {
  switch (options.predictor_type) {
    case PredictorType::kBinaryClassifier:
      break;
    case PredictorType::kRegressor:
      return RegressionMetrics(predictions, labels);
    case PredictorType::kMulticlassClassifier:
      return MulticlassMetrics(predictions, labels, options.num_classes);
  }
  return BinaryClassificationMetrics(predictions, labels);
}

// <out>/<channel>/part-0.<format>: rows / 10 rows. Returns the planted
// model's metrics on them, named "<channel>:<metric>".
MetricSet WriteEvaluationChannel(const DatagenOptions& options, const std::string& channel,
                                 const std::vector<float>& scales, Generator* generator) {
  const std::unique_ptr<DataFile> file = OpenDataFile(options, channel, 0, scales);
  std::vector<float> predictions, labels;
  for (uint64_t r = 0; r < options.rows / 10; ++r) {
    const float label = generator->Next();
    file->Write(label, generator->row(), generator->dense());
    predictions.insert(predictions.end(), generator->oracle().begin(), generator->oracle().end());
    labels.push_back(label);
  }
  file->Close();
  MetricSet oracle;
  for (const auto& [name, value] : OracleMetrics(options, predictions, labels)) {
    oracle[channel + ":" + name] = value;
  }
  return oracle;
}

void WriteOracle(const std::string& out, const MetricSet& oracle) {
  const std::string path = out + "/oracle.json";
  std::ofstream file(path);
  file << MetricsJson(oracle);
  if (!file) throw MakeError("cannot write ", path);
}

}  // namespace

const char* DataFileExtension(DataFormat format) {
  switch (format) {
    case DataFormat::kCsv:
      return ".csv";
    case DataFormat::kRecordIO:
      return ".recordio";
    case DataFormat::kLibsvm:
      break;
  }
  return ".libsvm";
}

MetricSet GenerateData(const DatagenOptions& options) {
  CheckOptions(options);
  std::mt19937_64 random(options.seed);
  PlantedModel planted = PlantModel(options, &random);
  const DenseFeatures dense = MakeDenseFeatures(options, &planted);
  for (const char* channel : {"train", "validation", "test"}) {
    MakeDirectories(options.out + "/" + channel);
  }
  const LabelScaling scaling = options.predictor_type == PredictorType::kRegressor
                                   ? MeasureScaling(options, planted, dense)
                                   : LabelScaling();
  const std::vector<float> scales = FeatureScales(options);
  Generator generator(planted, options.predictor_type, scaling,
                      RowSampler(options.features, options.nnz), dense, std::move(random));
  WriteTrainingChannel(options, scales, &generator);
  MetricSet oracle;
  for (const char* channel : {"validation", "test"}) {
    oracle.merge(WriteEvaluationChannel(options, channel, scales, &generator));
  }
  WriteOracle(options.out, oracle);
  return oracle;
}

}  // namespace keel
