#include "worker/datagen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "models/losses.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

struct PlantedModel {
  float bias = 0;
  std::vector<float> linear;   // per feature
  std::vector<float> factors;  // per feature x k (fm only)
  int k = 0;

  float Score(const std::vector<uint64_t>& row) const {
    float score = bias;
    for (uint64_t f : row) score += linear[f];
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

class LibsvmFile {
 public:
  explicit LibsvmFile(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "w")) {
    if (!file_) throw MakeError("cannot write ", path);
  }
  ~LibsvmFile() {
    if (file_) std::fclose(file_);
  }
  void Write(int label, const std::vector<uint64_t>& row) {
    std::fprintf(file_, "%d", label);
    for (uint64_t f : row) std::fprintf(file_, " %llu:1", static_cast<unsigned long long>(f + 1));
    std::fputc('\n', file_);
  }
  void Close() {
    if (std::fclose(file_) != 0) throw MakeError("cannot write ", path_);
    file_ = nullptr;
  }

 private:
  std::string path_;
  FILE* file_;
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

// The planted model's generator: rows, and labels drawn from its probability.
class Generator {
 public:
  Generator(const PlantedModel& planted, RowSampler rows, std::mt19937_64 random)
      : planted_(planted), rows_(std::move(rows)), random_(std::move(random)) {}

  // Draws the next row (row()); returns its label and sets `*probability`.
  int Next(float* probability) {
    rows_.Draw(&random_, &row_);
    *probability = Sigmoid(planted_.Score(row_));
    return uniform_(random_) < *probability ? 1 : 0;
  }
  const std::vector<uint64_t>& row() const { return row_; }

 private:
  const PlantedModel& planted_;
  RowSampler rows_;
  std::mt19937_64 random_;
  std::uniform_real_distribution<float> uniform_{0.0f, 1.0f};
  std::vector<uint64_t> row_;
};

// <out>/train/part-N.libsvm: `rows` rows, dealt to the files in turn.
void WriteTrainingChannel(const DatagenOptions& options, Generator* generator) {
  std::vector<std::unique_ptr<LibsvmFile>> train;
  for (int i = 0; i < options.train_files; ++i) {
    train.push_back(
        std::make_unique<LibsvmFile>(options.out + "/train/part-" + std::to_string(i) + ".libsvm"));
  }
  float probability;
  for (uint64_t r = 0; r < options.rows; ++r) {
    const int label = generator->Next(&probability);
    train[r % train.size()]->Write(label, generator->row());
  }
  for (auto& file : train) file->Close();
}

// <out>/<channel>/part-0.libsvm: rows / 10 rows. Returns the planted model's
// metrics on them, named "<channel>:<metric>".
MetricSet WriteEvaluationChannel(const DatagenOptions& options, const std::string& channel,
                                 Generator* generator) {
  LibsvmFile file(options.out + "/" + channel + "/part-0.libsvm");
  std::vector<float> probabilities, labels;
  float probability;
  for (uint64_t r = 0; r < options.rows / 10; ++r) {
    const int label = generator->Next(&probability);
    file.Write(label, generator->row());
    probabilities.push_back(probability);
    labels.push_back(static_cast<float>(label));
  }
  file.Close();
  MetricSet oracle;
  for (const auto& [name, value] : BinaryClassificationMetrics(probabilities, labels)) {
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

MetricSet GenerateData(const DatagenOptions& options) {
  CheckOptions(options);
  std::mt19937_64 random(options.seed);
  const PlantedModel planted = PlantModel(options, &random);
  for (const char* channel : {"train", "validation", "test"}) {
    MakeDirectories(options.out + "/" + channel);
  }
  Generator generator(planted, RowSampler(options.features, options.nnz), std::move(random));
  WriteTrainingChannel(options, &generator);
  MetricSet oracle;
  for (const char* channel : {"validation", "test"}) {
    oracle.merge(WriteEvaluationChannel(options, channel, &generator));
  }
  WriteOracle(options.out, oracle);
  return oracle;
}

}  // namespace keel
