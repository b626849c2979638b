// keel datagen's tasks (worker/datagen.h): regression labels with an offset
// and scale, multiclass labels, and unstandardized feature scales.
#include "worker/datagen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "io/readers.h"
#include "test_util.h"

namespace keel {
namespace {

class Datagen : public testing::TempFolderTest {
 protected:
  DatagenOptions Options(const std::string& out) {
    DatagenOptions options;
    options.rows = 20000;
    options.features = 1000;
    options.nnz = 10;
    options.train_files = 1;
    options.seed = 5;
    options.out = folder_ + "/" + out;
    return options;
  }

  // The training channel of `options`, read whole.
  static Batch ReadTraining(const DatagenOptions& options) {
    ReaderOptions reader_options;
    reader_options.format = options.format;
    std::unique_ptr<ExampleReader> reader = OpenReader(
        InputSplit{options.out + "/train/part-0" + DataFileExtension(options.format)},
        reader_options);
    Batch batch;
    while (reader->Read(1 << 20, &batch) > 0) {
    }
    return batch;
  }
};

TEST_F(Datagen, RegressionLabelsHaveTheAskedOffsetAndScale) {
  DatagenOptions options = Options("regression");
  options.predictor_type = PredictorType::kRegressor;
  options.label_offset = 150;
  options.label_scale = 60;
  const MetricSet oracle = GenerateData(options);
  const Batch batch = ReadTraining(options);
  ASSERT_EQ(batch.rows(), 20000u);
  double sum = 0, squares = 0;
  for (float label : batch.labels) sum += label;
  const double mean = sum / batch.rows();
  for (float label : batch.labels) squares += (label - mean) * (label - mean);
  const double deviation = std::sqrt(squares / batch.rows());
  // Signal and noise of one level each: deviation 60 sqrt(2); the mean's own
  // error is about 85 / sqrt(20000) = 0.6.
  EXPECT_NEAR(mean, 150, 3);
  EXPECT_NEAR(deviation, 60 * std::sqrt(2.0), 0.03 * 60 * std::sqrt(2.0));
  // The oracle misses by the noise alone: MSE 60^2.
  EXPECT_NEAR(oracle.at("validation:mse"), 3600, 0.1 * 3600);
}

TEST_F(Datagen, MulticlassLabelsAreClassIdsAndTheOracleBeatsChance) {
  DatagenOptions options = Options("multiclass");
  options.predictor_type = PredictorType::kMulticlassClassifier;
  options.num_classes = 5;
  const MetricSet oracle = GenerateData(options);
  std::map<float, int> counts;
  for (float label : ReadTraining(options).labels) ++counts[label];
  ASSERT_EQ(counts.size(), 5u);
  EXPECT_EQ(counts.begin()->first, 0);
  EXPECT_EQ(counts.rbegin()->first, 4);
  for (const auto& [label, count] : counts) EXPECT_EQ(label, std::floor(label));
  EXPECT_GT(oracle.at("validation:multiclass_accuracy"), 0.2 + 0.05);  // chance: 1/5
  EXPECT_GT(oracle.at("test:objective_loss"), 0);
}

TEST_F(Datagen, FeatureScaleSpreadScalesEachFeatureKeepingRowsAndLabels) {
  const DatagenOptions plain = Options("plain");
  DatagenOptions spread = Options("spread");
  spread.feature_scale_spread = 4;
  const MetricSet plain_oracle = GenerateData(plain);
  EXPECT_EQ(GenerateData(spread), plain_oracle);
  const Batch ones = ReadTraining(plain);
  const Batch scaled = ReadTraining(spread);
  EXPECT_EQ(scaled.labels, ones.labels);
  EXPECT_EQ(scaled.indices, ones.indices);
  for (float value : ones.values) ASSERT_EQ(value, 1.0f);
  std::map<uint64_t, float> scale_of;  // one scale per feature, within 10^[-2, 2]
  for (size_t e = 0; e < scaled.nnz(); ++e) {
    const auto [at, inserted] = scale_of.emplace(scaled.indices[e], scaled.values[e]);
    EXPECT_EQ(at->second, scaled.values[e]);
    EXPECT_GE(std::log10(scaled.values[e]), -2 - 1e-6);
    EXPECT_LE(std::log10(scaled.values[e]), 2 + 1e-6);
  }
  float smallest = 1, largest = 1;
  for (const auto& [feature, scale] : scale_of) {
    smallest = std::min(smallest, scale);
    largest = std::max(largest, scale);
  }
  EXPECT_LT(smallest, 0.03f);  // the spread is used, not just allowed
  EXPECT_GT(largest, 30.0f);
}

// Dense features with offsets: in every row after the sparse ones, each with
// values around its own offset; the same rows and labels (and the oracle) in
// libsvm, CSV and sparse recordIO.
TEST_F(Datagen, DenseFeaturesWithOffsetsAreTheSameRowsInEveryFormat) {
  std::map<DataFormat, Batch> read;
  MetricSet oracle;
  for (const DataFormat format : {DataFormat::kLibsvm, DataFormat::kCsv, DataFormat::kRecordIO}) {
    DatagenOptions options = Options(std::string("dense-") + DataFormatName(format));
    options.rows = 2000;
    options.features = 40;
    options.nnz = 4;
    options.dense_features = 6;
    options.format = format;
    const MetricSet generated = GenerateData(options);
    if (oracle.empty()) oracle = generated;
    EXPECT_EQ(generated, oracle) << DataFormatName(format);
    read[format] = ReadTraining(options);
  }
  // Each row's non-zero entries, the same in every format.
  const auto entries = [](const Batch& batch) {
    std::vector<std::map<uint64_t, float>> rows(batch.rows());
    for (size_t r = 0; r < batch.rows(); ++r) {
      for (uint64_t i = batch.row_offsets[r]; i < batch.row_offsets[r + 1]; ++i) {
        if (batch.values[i] != 0.0f) rows[r][batch.indices[i]] = batch.values[i];
      }
    }
    return rows;
  };
  const Batch& libsvm = read[DataFormat::kLibsvm];
  ASSERT_EQ(libsvm.rows(), 2000u);
  EXPECT_EQ(entries(read[DataFormat::kCsv]), entries(libsvm));
  EXPECT_EQ(entries(read[DataFormat::kRecordIO]), entries(libsvm));
  EXPECT_EQ(read[DataFormat::kCsv].labels, libsvm.labels);
  // Features 40..45 are in every row, each around its own offset (its
  // spread at most half of it: the mean is two deviations from 0 at least),
  // and the offsets are of several decades.
  std::map<uint64_t, std::pair<double, double>> sums;  // feature: sum, sum of squares
  for (const auto& row : entries(libsvm)) {
    for (uint64_t f = 40; f < 46; ++f) {
      ASSERT_EQ(row.count(f), 1u) << f;
      sums[f].first += row.at(f);
      sums[f].second += static_cast<double>(row.at(f)) * row.at(f);
    }
    EXPECT_EQ(row.rbegin()->first, 45u);
  }
  std::set<int> decades;
  for (const auto& [feature, sum] : sums) {
    const double mean = sum.first / 2000;
    const double deviation = std::sqrt(sum.second / 2000 - mean * mean);
    EXPECT_GT(mean, 1.5 * deviation) << feature;
    decades.insert(static_cast<int>(std::floor(std::log10(mean))));
  }
  EXPECT_GE(decades.size(), 2u) << "offsets of several decades";
}

TEST_F(Datagen, BadTaskOptionsThrowNamingTheFlag) {
  DatagenOptions options = Options("bad");
  options.predictor_type = PredictorType::kMulticlassClassifier;
  options.model = "fm";
  EXPECT_TRUE(
      testing::Contains(testing::ErrorOf([&] { GenerateData(options); }), "--model=linear"));
  options = Options("bad");
  options.label_scale = 0;
  EXPECT_TRUE(testing::Contains(testing::ErrorOf([&] { GenerateData(options); }), "--label_scale"));
  options = Options("bad");
  options.feature_scale_spread = -1;
  EXPECT_TRUE(testing::Contains(testing::ErrorOf([&] { GenerateData(options); }),
                                "--feature_scale_spread"));
}

}  // namespace
}  // namespace keel
