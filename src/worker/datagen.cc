#include "worker/datagen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
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

}  // namespace

MetricSet GenerateData(const DatagenOptions& options) {
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
  std::mt19937_64 random(options.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  PlantedModel planted;
  // Scores with a standard deviation near 2: informative but noisy labels.
  const float linear_scale = 1.6f / std::sqrt(static_cast<float>(options.nnz));
  planted.linear.resize(options.features);
  // Common features carry most of the signal, as in real logs; the rare tail
  // matters less (it would otherwise be noise no learner could estimate), and
  // interactions, whose pairs are rarer still, live mostly among common features.
  auto influence = [&](uint64_t f) {
    return std::pow(1.0f + 100.0f * static_cast<float>(f) / options.features, -0.75f);
  };
  for (uint64_t f = 0; f < options.features; ++f) {
    planted.linear[f] = 2.0f * linear_scale * influence(f) * normal(random);
  }
  planted.bias = -0.3f;
  if (options.model == "fm") {
    planted.k = options.num_factors;
    const float pairs = 0.5f * options.nnz * (options.nnz - 1);
    const float factor_scale = std::sqrt(1.2f / std::sqrt(pairs * static_cast<float>(planted.k)));
    planted.factors.resize(options.features * planted.k);
    for (uint64_t f = 0; f < options.features; ++f) {
      for (int c = 0; c < planted.k; ++c) {
        planted.factors[f * planted.k + c] =
            2.0f * factor_scale * influence(f) * influence(f) * normal(random);
      }
    }
  }

  const std::string out = options.out;
  MakeDirectories(out + "/train");
  MakeDirectories(out + "/validation");
  MakeDirectories(out + "/test");
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  // Feature popularity follows a power law, as in click logs: density
  // proportional to rank^(-2/3), so a few features are common and most are rare.
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto feature = [&](std::mt19937_64& generator) {
    const double u = unit(generator);
    return std::min<uint64_t>(options.features - 1,
                              static_cast<uint64_t>(options.features * u * u * u));
  };
  std::vector<uint64_t> row;
  auto draw_row = [&]() {
    row.clear();
    while (row.size() < static_cast<size_t>(options.nnz)) {
      const uint64_t f = feature(random);
      if (std::find(row.begin(), row.end(), f) == row.end()) row.push_back(f);
    }
    std::sort(row.begin(), row.end());
  };

  std::vector<std::unique_ptr<LibsvmFile>> train;
  for (int i = 0; i < options.train_files; ++i) {
    train.push_back(
        std::make_unique<LibsvmFile>(out + "/train/part-" + std::to_string(i) + ".libsvm"));
  }
  for (uint64_t r = 0; r < options.rows; ++r) {
    draw_row();
    const int label = uniform(random) < Sigmoid(planted.Score(row)) ? 1 : 0;
    train[r % train.size()]->Write(label, row);
  }
  for (auto& file : train) file->Close();

  MetricSet oracle;
  for (const char* channel : {"validation", "test"}) {
    LibsvmFile file(out + "/" + channel + "/part-0.libsvm");
    std::vector<float> probabilities, labels;
    for (uint64_t r = 0; r < options.rows / 10; ++r) {
      draw_row();
      const float p = Sigmoid(planted.Score(row));
      const int label = uniform(random) < p ? 1 : 0;
      file.Write(label, row);
      probabilities.push_back(p);
      labels.push_back(static_cast<float>(label));
    }
    file.Close();
    for (const auto& [name, value] : BinaryClassificationMetrics(probabilities, labels)) {
      oracle[std::string(channel) + ":" + name] = value;
    }
  }
  FILE* json = std::fopen((out + "/oracle.json").c_str(), "w");
  if (!json) throw MakeError("cannot write ", out, "/oracle.json");
  std::fprintf(json, "{");
  bool first = true;
  for (const auto& [name, value] : oracle) {
    std::fprintf(json, "%s\"%s\": %.9g", first ? "" : ", ", name.c_str(), value);
    first = false;
  }
  std::fprintf(json, "}\n");
  std::fclose(json);
  return oracle;
}

}  // namespace keel
