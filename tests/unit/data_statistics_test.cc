// Data statistics before training: what they are on small hand-checked
// samples, that every worker gets the same, that folding them into a model
// changes no prediction, and that class weights scale the loss's gradient.
#include "worker/data_statistics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/factorization_machine.h"
#include "models/linear.h"
#include "models/losses.h"
#include "test_util.h"
#include "worker/auto_minibatch.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/compute_backend_factory.h"
#include "worker/model_variants.h"

namespace keel {
namespace {

// A batch from rows of (feature, value) pairs and their labels.
Batch MakeBatch(const std::vector<std::vector<std::pair<uint64_t, float>>>& rows,
                const std::vector<float>& labels) {
  Batch batch;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<uint64_t> indices;
    std::vector<float> values;
    for (const auto& [index, value] : rows[r]) {
      indices.push_back(index);
      values.push_back(value);
    }
    batch.AddRow(labels[r], indices.data(), values.data(), indices.size());
  }
  return batch;
}

Hyperparameters Regressor() {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  return h;
}

double ScaleOf(const DataStatistics& s, uint64_t feature) {
  for (size_t i = 0; i < s.features.size(); ++i) {
    if (s.features[i] == feature) return s.scales[i];
  }
  return -1;
}
double MeanOf(const DataStatistics& s, uint64_t feature) {
  for (size_t i = 0; i < s.features.size(); ++i) {
    if (s.features[i] == feature) return s.means[i];
  }
  return -1;
}

TEST(DataStatistics, DenseFeaturesAreCentredOnTheirMeanAndScaledByTheirDeviation) {
  // Feature 0: 1, 3 (mean 2, deviation 1); feature 1: 5, 5 (constant: scale 1).
  const Batch sample = MakeBatch({{{0, 1.0f}, {1, 5.0f}}, {{0, 3.0f}, {1, 5.0f}}}, {0, 1});
  const DataStatistics s = ComputeDataStatistics(sample, Hyperparameters());
  EXPECT_TRUE(s.features_scaled);
  EXPECT_TRUE(s.features_centred());
  EXPECT_DOUBLE_EQ(MeanOf(s, 0), 2.0);
  EXPECT_DOUBLE_EQ(ScaleOf(s, 0), 1.0);
  EXPECT_DOUBLE_EQ(MeanOf(s, 1), 5.0);
  EXPECT_DOUBLE_EQ(ScaleOf(s, 1), 1.0);
}

TEST(DataStatistics, FeaturesInUnderHalfTheRowsAreScaledByTheirNonZerosRootMeanSquareNotCentred) {
  // Feature 7 is 3 and 4 where present (2 rows of 5): root mean square sqrt(12.5).
  const Batch sample =
      MakeBatch({{{7, 3.0f}}, {{7, 4.0f}, {9, 2.0f}}, {{9, 2.0f}}, {}, {}}, {0, 1, 0, 1, 0});
  const DataStatistics s = ComputeDataStatistics(sample, Hyperparameters());
  EXPECT_FALSE(s.features_centred());
  EXPECT_DOUBLE_EQ(ScaleOf(s, 7), std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(MeanOf(s, 7), 0.0);
  EXPECT_DOUBLE_EQ(ScaleOf(s, 9), 2.0);
}

TEST(DataStatistics, SmallAndLargeFeatureIndicesGiveTheSameFiguresBitForBit) {
  // Small indices are summed in a flat table, large ones in a hash map: the
  // same rows with every index moved past 2^40 give the same figures. A
  // feature seen only as 0 is listed either way, scaled as one the sample
  // lacks (it was infinite: its share of non-zeros, 0, under the prior).
  std::mt19937 random(5);
  std::vector<std::vector<std::pair<uint64_t, float>>> rows(2000);
  std::vector<std::vector<std::pair<uint64_t, float>>> moved(rows.size());
  constexpr uint64_t kShift = uint64_t{1} << 40;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int k = 0; k < 10; ++k) {
      const uint64_t index = random() % 3000;
      const float value = static_cast<float>(random() % 1000) / 7.0f;
      rows[r].push_back({index, value});
      moved[r].push_back({index + kShift, value});
    }
  }
  rows[0].push_back({4000, 0.0f});
  moved[0].push_back({4000 + kShift, 0.0f});
  const std::vector<float> labels(rows.size(), 1.0f);
  const DataStatistics small = ComputeDataStatistics(MakeBatch(rows, labels), Hyperparameters());
  const DataStatistics large = ComputeDataStatistics(MakeBatch(moved, labels), Hyperparameters());
  ASSERT_EQ(small.features.size(), large.features.size());
  EXPECT_EQ(small.features.back(), 4000u);
  for (size_t i = 0; i < small.features.size(); ++i) {
    EXPECT_EQ(small.features[i] + kShift, large.features[i]) << i;
    EXPECT_EQ(small.scales[i], large.scales[i]) << small.features[i];
    EXPECT_EQ(small.means[i], large.means[i]) << small.features[i];
  }
  EXPECT_EQ(ScaleOf(small, 4000), small.unsampled_scale);
  EXPECT_GT(small.unsampled_scale, 1.0);
  EXPECT_EQ(small.unsampled_scale, large.unsampled_scale);
}

// 20 sparse rows: feature 1 in 8 rows (value 2), feature 2 in one (value 3).
Batch RareFeatureSample() {
  std::vector<std::vector<std::pair<uint64_t, float>>> rows(20);
  for (int r = 0; r < 8; ++r) rows[r].push_back({1, 2.0f});
  rows[4].push_back({2, 3.0f});
  return MakeBatch(rows, std::vector<float>(20, 0.0f));
}

TEST(DataStatistics, AFeatureRarerThanTheFrequencyPriorIsScaledDownInProportion) {
  Hyperparameters h;
  h.frequency_prior = "0.1";
  const DataStatistics s = ComputeDataStatistics(RareFeatureSample(), h);
  EXPECT_DOUBLE_EQ(s.frequency_prior, 0.1);
  EXPECT_DOUBLE_EQ(ScaleOf(s, 1), 2.0);  // in 8 rows of 20: the prior leaves it
  // In 1 row of 20: share 0.05, half of 0.1, so its values are halved.
  EXPECT_DOUBLE_EQ(ScaleOf(s, 2), 3.0 / 0.5);
  // Absent: half a row, 0.025, a quarter of 0.1.
  EXPECT_DOUBLE_EQ(s.unsampled_scale, 4.0);
  Batch batch = MakeBatch({{{1, 2.0f}, {2, 3.0f}, {9, 8.0f}}}, {0.0f});
  DataScaler(s).Apply(&batch);
  EXPECT_FLOAT_EQ(batch.values[0], 1.0f);
  EXPECT_FLOAT_EQ(batch.values[1], 0.5f);
  EXPECT_FLOAT_EQ(batch.values[2], 2.0f);
}

TEST(DataStatistics, TheFrequencyPriorAppliesWithoutNormalisationAndLeavesFrequentFeatures) {
  Hyperparameters h;
  h.frequency_prior = "0.1";
  h.normalize_data = false;
  const DataStatistics sparse = ComputeDataStatistics(RareFeatureSample(), h);
  EXPECT_DOUBLE_EQ(ScaleOf(sparse, 1), 1.0);
  EXPECT_DOUBLE_EQ(ScaleOf(sparse, 2), 1.0 / 0.5);
  EXPECT_FALSE(sparse.LeavesDataAlone());
  h.frequency_prior = "0";
  EXPECT_TRUE(ComputeDataStatistics(RareFeatureSample(), h).LeavesDataAlone());
  h.frequency_prior = "0.9";
  const Batch dense = MakeBatch({{{0, 1.0f}, {1, 5.0f}}, {{0, 3.0f}, {1, 5.0f}}}, {0, 1});
  const DataStatistics statistics = ComputeDataStatistics(dense, h);
  EXPECT_DOUBLE_EQ(statistics.frequency_prior, 0.9);
  // Both features are in every row: the prior leaves them (only a feature the
  // sample lacks would be scaled).
  EXPECT_DOUBLE_EQ(ScaleOf(statistics, 0), 1.0);
  EXPECT_DOUBLE_EQ(ScaleOf(statistics, 1), 1.0);
  EXPECT_GT(statistics.unsampled_scale, 1.0);
}

TEST(DataStatistics, TheFrequencyPriorIsOnByDefaultPerJobAndTheSampleIs100000Rows) {
  Hyperparameters h;
  EXPECT_EQ(h.frequency_prior, "auto");
  ASSERT_EQ(h.job, JobKind::kLinearLearner);
  // auto: a feature in fewer than 1,000 training rows, at most a share of
  // 0.003 (the linear learner) or 0.001 (the factorization machine); the cap
  // when the rows are not known.
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(), 0.003);
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(300000), 0.003);
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(1000000), 0.001);
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(10000000), 0.0001);
  h.job = JobKind::kFactorizationMachines;
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(), 0.001);
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(1000000), 0.001);
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(4000000), 0.00025);
  h.frequency_prior = "0.002";  // a number given wins for either job
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(), 0.002);
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(4000000), 0.002);
  h.job = JobKind::kLinearLearner;
  EXPECT_DOUBLE_EQ(h.FrequencyPrior(), 0.002);
  EXPECT_EQ(h.num_point_for_scaler, 100000);
}

// The rows of `rows` with every feature of 0..width-1 written out, zeros too,
// as CSV writes them.
Batch Densified(const std::vector<std::vector<std::pair<uint64_t, float>>>& rows,
                const std::vector<float>& labels, uint64_t width) {
  std::vector<std::vector<std::pair<uint64_t, float>>> dense(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    for (uint64_t f = 0; f < width; ++f) {
      float value = 0.0f;
      for (const auto& [index, v] : rows[r]) {
        if (index == f) value = v;
      }
      dense[r].push_back({f, value});
    }
  }
  return MakeBatch(dense, labels);
}

// Each row of `batch` as a map from feature to value.
std::vector<std::map<uint64_t, float>> RowMaps(const Batch& batch) {
  std::vector<std::map<uint64_t, float>> maps(batch.rows());
  for (size_t r = 0; r < batch.rows(); ++r) {
    for (uint64_t i = batch.row_offsets[r]; i < batch.row_offsets[r + 1]; ++i) {
      maps[r][batch.indices[i]] = batch.values[i];
    }
  }
  return maps;
}

TEST(DataStatistics, TheSameRowsWithZerosWrittenOrLeftOutGetTheSameStatisticsAndScaledRows) {
  // Feature 0 (an offset, as a blood pressure) is in every row but one,
  // feature 1 in 3 of 4, feature 2 in 1 of 4: 0 and 1 are centred, 2 is not.
  const std::vector<std::vector<std::pair<uint64_t, float>>> rows = {
      {{0, 70.0f}, {1, 1.0f}}, {{0, 80.0f}, {2, 5.0f}}, {{1, 2.0f}}, {{0, 90.0f}, {1, 3.0f}}};
  const std::vector<float> labels = {0, 1, 0, 1};
  const Batch sparse = MakeBatch(rows, labels);
  const Batch dense = Densified(rows, labels, 3);
  for (const PredictorType type : {PredictorType::kBinaryClassifier, PredictorType::kRegressor}) {
    Hyperparameters h;
    h.predictor_type = type;
    const DataStatistics from_sparse = ComputeDataStatistics(sparse, h);
    const DataStatistics from_dense = ComputeDataStatistics(dense, h);
    ASSERT_EQ(from_sparse.features, from_dense.features);
    EXPECT_EQ(from_sparse.means, from_dense.means);
    EXPECT_EQ(from_sparse.scales, from_dense.scales);
    EXPECT_EQ(from_sparse.Json(), from_dense.Json());
    EXPECT_EQ(from_sparse.centred_features, 2u);
    EXPECT_DOUBLE_EQ(MeanOf(from_sparse, 0), 60.0);
    EXPECT_DOUBLE_EQ(MeanOf(from_sparse, 1), 1.5);
    EXPECT_DOUBLE_EQ(MeanOf(from_sparse, 2), 0.0);
    EXPECT_DOUBLE_EQ(ScaleOf(from_sparse, 2), 5.0);
    // Scaled, the sparse rows gain the centred features they lack, the dense
    // ones drop their zeros of feature 2 (not centred), and the two batches
    // hold the same entries.
    Batch sparse_scaled = sparse, dense_scaled = dense;
    EXPECT_TRUE(DataScaler(from_sparse).Apply(&sparse_scaled));
    EXPECT_TRUE(DataScaler(from_dense).Apply(&dense_scaled));
    EXPECT_EQ(sparse_scaled.nnz(), sparse.nnz() + 2);  // row 2 gains feature 0, row 1 feature 1
    EXPECT_EQ(dense_scaled.nnz(), dense.nnz() - 3);    // three zeros of feature 2
    EXPECT_EQ(RowMaps(sparse_scaled), RowMaps(dense_scaled));
    EXPECT_EQ(sparse_scaled.labels, dense_scaled.labels);
    EXPECT_FLOAT_EQ(RowMaps(sparse_scaled)[2].at(0), -60.0f / static_cast<float>(ScaleOf(from_sparse, 0)));
  }
  // Rows that list every centred feature and no zero of another keep their
  // entries (and so their keys): Apply says nothing changed.
  Hyperparameters h;
  h.unbias_data = "true";
  const Batch full = MakeBatch({{{0, 70.0f}, {1, 1.0f}}, {{0, 80.0f}, {1, 2.0f}}}, {0, 1});
  Batch scaled = full;
  EXPECT_FALSE(DataScaler(ComputeDataStatistics(full, h)).Apply(&scaled));
  EXPECT_EQ(scaled.indices, full.indices);
  EXPECT_NE(scaled.values, full.values);
}

TEST(DataStatistics, UnbiasDataTrueCentresEveryFeatureAndFalseNone) {
  Hyperparameters h;
  h.unbias_data = "true";
  const Batch sample = MakeBatch({{{7, 3.0f}}, {{9, 2.0f}}, {}, {}}, {0, 1, 0, 1});
  const DataStatistics every = ComputeDataStatistics(sample, h);
  EXPECT_EQ(every.centred_features, 2u);
  EXPECT_DOUBLE_EQ(MeanOf(every, 7), 0.75);
  Batch batch = MakeBatch({{}}, {0.0f});
  DataScaler(every).Apply(&batch);
  EXPECT_EQ(batch.nnz(), 2u);  // the empty row gains both
  h.unbias_data = "false";
  const Batch frequent = MakeBatch({{{7, 3.0f}}, {{7, 2.0f}}}, {0, 1});
  EXPECT_EQ(ComputeDataStatistics(frequent, h).centred_features, 0u);
  h.unbias_data = "auto";
  EXPECT_EQ(ComputeDataStatistics(frequent, h).centred_features, 1u);
}

TEST(DataStatistics, ARegressorsLabelIsCentredAndScaledAClassifiersIsNot) {
  const Batch sample = MakeBatch({{{0, 1.0f}}, {{0, 1.0f}}}, {100.0f, 200.0f});
  const DataStatistics regression = ComputeDataStatistics(sample, Regressor());
  EXPECT_DOUBLE_EQ(regression.label_offset, 150.0);
  EXPECT_DOUBLE_EQ(regression.label_scale, 50.0);
  Hyperparameters classifier;
  const Batch binary = MakeBatch({{{0, 1.0f}}, {{0, 1.0f}}}, {0.0f, 1.0f});
  const DataStatistics classification = ComputeDataStatistics(binary, classifier);
  EXPECT_FALSE(classification.label_scaled);
  EXPECT_DOUBLE_EQ(classification.label_offset, 0.0);
  EXPECT_DOUBLE_EQ(classification.label_scale, 1.0);
}

TEST(DataStatistics, NormalizeDataFalseLeavesTheFeaturesAlone) {
  Hyperparameters h;
  h.normalize_data = false;
  const Batch sample = MakeBatch({{{0, 1.0f}}, {{0, 3.0f}}}, {0, 1});
  const DataStatistics s = ComputeDataStatistics(sample, h);
  EXPECT_TRUE(s.LeavesDataAlone());
}

// Validate's message for `h`, or "" if it passes.
std::string ValidationError(const Hyperparameters& h) {
  return testing::ErrorOrEmpty([&] { h.Validate(); });
}

TEST(DataStatistics, BadSettingsFailValidationNamingTheFlag) {
  Hyperparameters h;
  h.unbias_label = "maybe";
  EXPECT_EQ(ValidationError(h), "--unbias_label 'maybe' is not auto, true or false");
  h = Hyperparameters();
  h.positive_example_weight_mult = "-2";
  EXPECT_EQ(ValidationError(h),
            "--positive_example_weight_mult '-2' is not a positive number or balanced");
  h = Hyperparameters();
  h.num_point_for_scaler = 0;
  EXPECT_EQ(ValidationError(h), "--num_point_for_scaler 0 is not at least 1");
  h = Hyperparameters();
  h.use_bias = false;
  h.unbias_data = "true";
  EXPECT_EQ(ValidationError(h),
            "--unbias_data true needs --use_bias (the mean it removes returns as a bias)");
  h = Hyperparameters();
  h.frequency_prior = "1";
  EXPECT_EQ(ValidationError(h), "--frequency_prior '1' is not auto or a number in [0, 1) (0: off)");
  h = Hyperparameters();
  h.positive_example_weight_mult = "balanced";
  EXPECT_EQ(ValidationError(h), "");
}

TEST(DataStatistics, BalancedPositiveWeightIsNegativesOverPositives) {
  Hyperparameters h;
  h.positive_example_weight_mult = "balanced";
  const Batch sample =
      MakeBatch({{{0, 1.0f}}, {{0, 1.0f}}, {{0, 1.0f}}, {{0, 1.0f}}}, {0, 0, 1, 0});
  EXPECT_EQ(ComputeDataStatistics(sample, h).class_weights, (std::vector<float>{1.0f, 3.0f}));
  h.positive_example_weight_mult = "2.5";
  EXPECT_EQ(ComputeDataStatistics(sample, h).class_weights, (std::vector<float>{1.0f, 2.5f}));
  h.positive_example_weight_mult = "1";
  EXPECT_TRUE(ComputeDataStatistics(sample, h).class_weights.empty());
}

TEST(DataStatistics, BalancedMulticlassWeightsAreRowsOverClassesTimesClassRows) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 4;
  h.balance_multiclass_weights = true;
  // 4 rows: class 0 twice, 1 and 2 once, 3 never (weight 1).
  const Batch sample =
      MakeBatch({{{0, 1.0f}}, {{0, 1.0f}}, {{0, 1.0f}}, {{0, 1.0f}}}, {0, 0, 1, 2});
  const std::vector<float> weights = ComputeDataStatistics(sample, h).class_weights;
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_FLOAT_EQ(weights[0], 4.0f / 8.0f);
  EXPECT_FLOAT_EQ(weights[1], 4.0f / 4.0f);
  EXPECT_FLOAT_EQ(weights[2], 4.0f / 4.0f);
  EXPECT_FLOAT_EQ(weights[3], 1.0f);
}

TEST(DataScaler, ScalesSampledFeaturesAndTheLabelAndLeavesUnseenFeaturesAlone) {
  const Batch sample = MakeBatch({{{0, 1.0f}, {1, 2.0f}}, {{0, 3.0f}, {1, 2.0f}}}, {10.0f, 30.0f});
  const DataStatistics s = ComputeDataStatistics(sample, Regressor());
  Batch batch = MakeBatch({{{0, 5.0f}, {4, 7.0f}}}, {40.0f});
  DataScaler(s).Apply(&batch);
  EXPECT_FLOAT_EQ(batch.values[0], 3.0f);  // (5 - 2) / 1
  EXPECT_FLOAT_EQ(batch.values[1], 7.0f);  // feature 4 was never sampled
  EXPECT_FLOAT_EQ(batch.labels[0], 2.0f);  // (40 - 20) / 10
}

TEST(DataScaler, LargeFeatureIndicesScaleAsSmallOnes) {
  // The same sample twice, once with its features far apart (past the flat
  // table's reach): every value must come out bit for bit the same.
  Hyperparameters h;
  h.frequency_prior = "0.1";
  const uint64_t far = uint64_t{1} << 40;
  const auto sample_with = [](uint64_t offset) {
    std::vector<std::vector<std::pair<uint64_t, float>>> rows(20);
    for (int r = 0; r < 20; ++r) {
      rows[r].push_back({offset + 1, 1.0f + r});
      if (r % 4 == 0) rows[r].push_back({offset + 7, 0.5f * r});
    }
    return MakeBatch(rows, std::vector<float>(20, 0.0f));
  };
  const DataStatistics near_stats = ComputeDataStatistics(sample_with(0), h);
  const DataStatistics far_stats = ComputeDataStatistics(sample_with(far), h);
  ASSERT_GT(near_stats.unsampled_scale, 1.0);  // unsampled features are scaled too
  // Sampled, unsampled inside the flat table, and past it.
  Batch near_batch = MakeBatch({{{1, 3.0f}, {3, 2.0f}, {7, -1.5f}, {far * 2, 4.0f}}}, {0.0f});
  Batch far_batch =
      MakeBatch({{{far + 1, 3.0f}, {far + 3, 2.0f}, {far + 7, -1.5f}, {far * 2, 4.0f}}}, {0.0f});
  DataScaler(near_stats).Apply(&near_batch);
  DataScaler(far_stats).Apply(&far_batch);
  ASSERT_EQ(near_batch.values.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(near_batch.values[i], far_batch.values[i]) << "non-zero " << i;
  }
  EXPECT_FLOAT_EQ(near_batch.values[1], 2.0f / static_cast<float>(near_stats.unsampled_scale));
  EXPECT_NE(near_batch.values[0], 3.0f);
}

class StatisticsSampleTest : public testing::TempFolderTest {};

TEST_F(StatisticsSampleTest, EveryWorkerReadsTheSameSampleSpreadOverTheFiles) {
  // Four files of 100 rows: feature f of file f only, label the row number.
  for (int file = 0; file < 4; ++file) {
    std::string text;
    for (int row = 0; row < 100; ++row) {
      text += std::to_string(row) + " " + std::to_string(file + 1) + ":" +
              std::to_string(1 + (row * 7 + file) % 13) + "\n";
    }
    WriteFile("part-" + std::to_string(file), text);
  }
  ReaderOptions reader;
  const Batch first = ReadStatisticsSample(folder_, reader, 40).rows;
  const Batch second = ReadStatisticsSample(folder_, reader, 40).rows;
  EXPECT_EQ(first.rows(), 40u);
  EXPECT_EQ(first.indices, second.indices);
  EXPECT_EQ(first.values, second.values);
  std::map<uint64_t, int> rows_per_file;
  for (const uint64_t index : first.indices) ++rows_per_file[index];
  EXPECT_EQ(rows_per_file.size(), 4u) << "every file sampled";
  const DataStatistics a = ComputeDataStatistics(first, Regressor());
  const DataStatistics b = ComputeDataStatistics(second, Regressor());
  EXPECT_EQ(a.scales, b.scales);
  EXPECT_EQ(a.label_offset, b.label_offset);
  EXPECT_EQ(a.label_scale, b.label_scale);
}

TEST_F(StatisticsSampleTest, CountsTheChannelsRowsOrEstimatesThemFromItsBytes) {
  // Three files of 3,000 rows of 12 bytes each ("1 00042:1.5\n"): as byte
  // ranges for 8 pieces (fewer files than pieces), each piece's rows estimated.
  for (int file = 0; file < 3; ++file) {
    std::string text;
    for (int row = 0; row < 3000; ++row) {
      char line[16];
      std::snprintf(line, sizeof(line), "%d %05d:1.5\n", row % 2, 1 + (row * 7 + file) % 20000);
      text += line;
    }
    ASSERT_EQ(text.size(), 3000u * 12);
    WriteFile("part-" + std::to_string(file), text);
  }
  ReaderOptions reader;
  const ChannelSample part = ReadStatisticsSample(folder_, reader, 800);
  EXPECT_EQ(part.rows.rows(), 800u);
  EXPECT_NEAR(static_cast<double>(part.channel_rows), 9000.0, 9000.0 * 0.01);
  // A sample asking for more rows than there are reads them all and counts them.
  const ChannelSample whole = ReadStatisticsSample(folder_, reader, 100000);
  EXPECT_EQ(whole.rows.rows(), 9000u);
  EXPECT_EQ(whole.channel_rows, 9000u);
  // The statistics keep the count, and the prior follows it.
  const DataStatistics statistics = ComputeDataStatistics(part.rows, Hyperparameters(), 2000000);
  EXPECT_EQ(statistics.training_rows, 2000000u);
  EXPECT_DOUBLE_EQ(statistics.frequency_prior, 0.0005);
  EXPECT_NE(statistics.Json().find("\"training_rows\":2000000"), std::string::npos);
}

TEST(AutoMinibatch, AFortiethOfAWorkersShareWithin16And1000) {
  EXPECT_EQ(AutoMinibatchSize(4774, 2), 59);      // 2,387 rows a worker: forty steps an epoch
  EXPECT_EQ(AutoMinibatchSize(1347, 2), 16);      // never below 16
  EXPECT_EQ(AutoMinibatchSize(0, 1), 16);
  EXPECT_EQ(AutoMinibatchSize(80000, 2), 1000);   // 40,000 rows a worker: SageMaker's 1,000
  EXPECT_EQ(AutoMinibatchSize(1000000, 4), 1000);
}

TEST_F(StatisticsSampleTest, TheTrainingRowsAreCountedOverEveryFile) {
  for (int file = 0; file < 3; ++file) {
    std::string text;
    for (int row = 0; row < 400; ++row) text += "1 1:" + std::to_string(row + 1) + "\n";
    WriteFile("part-" + std::to_string(file), text);
  }
  ReaderOptions reader;
  EXPECT_EQ(CountTrainingRows(folder_, reader, 2), 1200u);
  // Counting stops where the answer no longer changes: 40,000 rows a worker.
  std::string text;
  for (int row = 0; row < 50000; ++row) text += "0 1:1\n";
  WriteFile("part-3", text);
  EXPECT_EQ(CountTrainingRows(folder_, reader, 1), 40000u);
  EXPECT_EQ(CountTrainingRows(folder_, reader, 2), 51200u);
  // Epochs of 15 to raise reach 600 steps at 40 an epoch (the same bound);
  // epochs of 5 need 120 steps an epoch: up to 120,000 rows a worker.
  EXPECT_EQ(CountTrainingRows(folder_, reader, 1, 15), 40000u);
  EXPECT_EQ(CountTrainingRows(folder_, reader, 1, 5), 51200u);
  std::string more;
  for (int row = 0; row < 80000; ++row) more += "0 1:1\n";
  WriteFile("part-4", more);
  EXPECT_EQ(CountTrainingRows(folder_, reader, 1, 5), 120000u);
  // So a factorization machine regressor's 5 epochs stay 5 on 120,000 rows a
  // worker in minibatches of 1,000 (counted only to 40,000, they became 15).
  EXPECT_EQ(AutoEpochs(CountTrainingRows(folder_, reader, 1, 5), 1, 1000, 5), 5);
  EXPECT_EQ(AutoEpochs(CountTrainingRows(folder_, reader, 1), 1, 1000, 5), 15);
}

TEST(AutoMinibatch, SmallDataRunsMoreEpochsForSixHundredStepsAWorker) {
  EXPECT_EQ(AutoEpochs(100000, 2, 1000, 15), 15);  // 50 steps an epoch: 750 in 15
  EXPECT_EQ(AutoEpochs(101, 2, 16, 15), 150);      // 50 rows a worker: 4 steps an epoch
  EXPECT_EQ(AutoEpochs(4774, 2, 59, 5), 15);       // a factorization machine's 5 epochs
  EXPECT_EQ(AutoEpochs(10, 2, 16, 15), 500);       // at most 500
}

TEST(AutoMinibatch, EpochsAreRaisedForTheLinearLearnerAndAJudgedFactorizationMachineRegressor) {
  Hyperparameters linear;
  linear.job = JobKind::kLinearLearner;
  EXPECT_TRUE(RaisesEpochs(WithModels(linear, 8), true));
  EXPECT_TRUE(RaisesEpochs(WithModels(linear, 1), false));
  Hyperparameters fm;
  fm.job = JobKind::kFactorizationMachines;
  fm.predictor_type = PredictorType::kRegressor;
  EXPECT_TRUE(RaisesEpochs(WithModels(fm, 8), true));
  EXPECT_FALSE(RaisesEpochs(WithModels(fm, 8), false));  // no rows judge its interactions
  EXPECT_FALSE(RaisesEpochs(WithModels(fm, 1), true));   // no linear model to keep
  Hyperparameters absolute = fm;
  absolute.loss = "absolute_loss";  // no per-row squared error to compare
  EXPECT_FALSE(RaisesEpochs(WithModels(absolute, 8), true));
  Hyperparameters classifier = fm;
  classifier.predictor_type = PredictorType::kBinaryClassifier;
  EXPECT_FALSE(RaisesEpochs(WithModels(classifier, 8), true));
}

// ---------------------------------------------------------------------------
// Folding: the folded model on raw rows scores as the trained model on scaled rows.

std::vector<float> Random(size_t count, std::mt19937_64* random) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(*random);
  return values;
}

// Rows over features 0..7, each present in a row with probability `presence`
// (1: dense).
Batch RandomRows(double presence, int rows, std::mt19937_64* random) {
  std::uniform_real_distribution<float> value(-3.0f, 8.0f);
  std::bernoulli_distribution present(presence);
  const bool dense = presence >= 1.0;
  std::vector<std::vector<std::pair<uint64_t, float>>> data(rows);
  std::vector<float> labels(rows);
  for (int r = 0; r < rows; ++r) {
    for (uint64_t f = 0; f < 8; ++f) {
      if (dense || present(*random)) data[r].push_back({f, value(*random) * (1.0f + f)});
    }
    labels[r] = 150.0f + 60.0f * value(*random);
  }
  return MakeBatch(data, labels);
}

// The scores of every row of `batch` under a model of `features` (all of
// 0..7) with per-feature rows of `width` floats: a linear model of `classes`
// scores, or (fm) a factorization machine, FmScoreNaive's double reference.
std::vector<double> Scores(const Batch& batch, bool fm, int classes, int k,
                           const std::vector<float>& params, const std::vector<float>& bias) {
  const int width = fm ? FmRowWidth(k) : classes;
  std::vector<double> scores;
  for (size_t r = 0; r < batch.rows(); ++r) {
    const uint64_t begin = batch.row_offsets[r], end = batch.row_offsets[r + 1];
    std::vector<float> gathered;
    for (uint64_t i = begin; i < end; ++i) {
      gathered.insert(gathered.end(), params.begin() + batch.indices[i] * width,
                      params.begin() + (batch.indices[i] + 1) * width);
    }
    const int nnz = static_cast<int>(end - begin);
    if (fm) {
      scores.push_back(FmScoreNaive(gathered.data(), batch.values.data() + begin, nnz, k, bias[0]));
    } else {
      std::vector<float> row(classes);
      LinearScores(gathered.data(), batch.values.data() + begin, nnz, classes, bias.data(),
                   row.data());
      scores.insert(scores.end(), row.begin(), row.end());
    }
  }
  return scores;
}

// `batch` with `feature` taken out of every row.
Batch WithoutFeature(const Batch& batch, uint64_t feature) {
  Batch out;
  for (size_t r = 0; r < batch.rows(); ++r) {
    std::vector<uint64_t> indices;
    std::vector<float> values;
    for (uint64_t i = batch.row_offsets[r]; i < batch.row_offsets[r + 1]; ++i) {
      if (batch.indices[i] == feature) continue;
      indices.push_back(batch.indices[i]);
      values.push_back(batch.values[i]);
    }
    out.AddRow(batch.labels[r], indices.data(), values.data(), indices.size());
  }
  return out;
}

// Trains nothing: random parameters stand for a model trained on scaled data.
// `presence`: each feature's chance to be in a row (at least a half: the
// features are centred). `frequency_prior`: "0" off; else the sample lacks
// feature 7, and the prior applies to it and to the features in under that
// share of the rows.
void ExpectFoldingKeepsPredictions(bool fm, double presence, PredictorType type,
                                   const std::string& frequency_prior = "0") {
  std::mt19937_64 random(fm * 4 + static_cast<int>(presence * 20) + static_cast<int>(type));
  Hyperparameters h;
  h.frequency_prior = frequency_prior;
  h.job = fm ? JobKind::kFactorizationMachines : JobKind::kLinearLearner;
  h.predictor_type = type;
  h.num_classes = 3;
  h.num_factors = 4;
  const int classes = fm ? 1 : h.classes();
  Batch sample = RandomRows(presence, 200, &random);
  if (frequency_prior != "0") sample = WithoutFeature(sample, 7);
  Batch raw = RandomRows(presence, 30, &random);
  if (type == PredictorType::kMulticlassClassifier) {
    for (float& label : raw.labels) label = 0;
  }
  const DataStatistics statistics = ComputeDataStatistics(sample, h);
  ASSERT_EQ(statistics.features_centred(), presence >= 0.5);
  ASSERT_EQ(statistics.label_scaled, type == PredictorType::kRegressor);
  ASSERT_EQ(statistics.unsampled_scale > 1.0, frequency_prior != "0");
  std::vector<uint64_t> features = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> params = Random(features.size() * h.weight_width(), &random);
  std::vector<float> bias = Random(classes, &random);

  Batch scaled = raw;
  DataScaler(statistics).Apply(&scaled);
  std::vector<double> expected = Scores(scaled, fm, classes, h.num_factors, params, bias);
  for (double& score : expected) score = score * statistics.label_scale + statistics.label_offset;

  if (fm) {
    FoldIntoFactorizationMachine(statistics, features, h.num_factors, params.data(), bias.data());
  } else {
    FoldIntoLinear(statistics, features, classes, params.data(), bias.data());
  }
  const std::vector<double> folded = Scores(raw, fm, classes, h.num_factors, params, bias);
  ASSERT_EQ(folded.size(), expected.size());
  for (size_t i = 0; i < folded.size(); ++i) {
    EXPECT_NEAR(folded[i], expected[i], 1e-4 * (1.0 + std::fabs(expected[i]))) << "score " << i;
  }
}

TEST(FoldStatistics, EachFeatureGetsItsOwnScaleInAscendingOrAnyOtherOrder) {
  // Statistics of every third feature below 30,000 with scales 1..7, and a
  // model's features: sorted with gaps, before the first and past the last
  // sampled one, then the same features in descending order. A weight of 1
  // folds to 1 / its feature's scale (the unsampled scale for the others).
  DataStatistics statistics;
  statistics.unsampled_scale = 9.0;
  for (uint64_t f = 3; f < 30000; f += 3) {
    statistics.features.push_back(f);
    statistics.means.push_back(0.0);
    statistics.scales.push_back(1.0 + static_cast<double>(f % 7));
  }
  const auto scale_of = [&](uint64_t f) {
    return f >= 3 && f < 30000 && f % 3 == 0 ? 1.0 + static_cast<double>(f % 7) : 9.0;
  };
  std::mt19937_64 random(3);
  std::vector<uint64_t> features = {0, 1, 3};
  for (uint64_t f = 4; f < 40000; f += 1 + random() % 700) features.push_back(f);
  features.push_back(29997);
  std::sort(features.begin(), features.end());
  features.erase(std::unique(features.begin(), features.end()), features.end());
  features.insert(features.begin() + 5, features[5]);  // a feature twice in a row
  for (const bool descending : {false, true}) {
    if (descending) std::reverse(features.begin(), features.end());
    std::vector<float> weights(features.size(), 1.0f);
    std::vector<float> bias = {0.0f};
    FoldIntoLinear(statistics, features, 1, weights.data(), bias.data());
    for (size_t i = 0; i < features.size(); ++i) {
      EXPECT_EQ(weights[i], static_cast<float>(1.0 / scale_of(features[i])))
          << "feature " << features[i] << (descending ? ", descending" : "");
    }
  }
  // No sampled feature at all: every one takes the unsampled scale.
  DataStatistics none;
  none.unsampled_scale = 4.0;
  std::vector<float> weights(features.size(), 1.0f);
  std::vector<float> bias = {0.0f};
  FoldIntoLinear(none, features, 1, weights.data(), bias.data());
  for (const float weight : weights) EXPECT_EQ(weight, 0.25f);
}

// Features in a third of the rows (scaled only), in every row, and in most
// rows (centred, sparse rows gaining the ones they lack).
constexpr double kSparse = 0.3, kDense = 1.0, kFrequent = 0.8;

TEST(FoldStatistics, LinearFrequentFeaturesCentredInSparseRows) {
  ExpectFoldingKeepsPredictions(false, kFrequent, PredictorType::kBinaryClassifier);
}
TEST(FoldStatistics, LinearFrequentFeaturesCentredInSparseRowsMulticlass) {
  ExpectFoldingKeepsPredictions(false, kFrequent, PredictorType::kMulticlassClassifier);
}
TEST(FoldStatistics, FactorizationMachineFrequentFeaturesCentredInSparseRowsRegressor) {
  ExpectFoldingKeepsPredictions(true, kFrequent, PredictorType::kRegressor);
}
TEST(FoldStatistics, LinearSparseScaledOnly) {
  ExpectFoldingKeepsPredictions(false, kSparse, PredictorType::kBinaryClassifier);
}
TEST(FoldStatistics, LinearDenseCentred) {
  ExpectFoldingKeepsPredictions(false, kDense, PredictorType::kBinaryClassifier);
}
TEST(FoldStatistics, LinearDenseCentredRegressorWithLabelOffsetAndScale) {
  ExpectFoldingKeepsPredictions(false, kDense, PredictorType::kRegressor);
}
TEST(FoldStatistics, LinearSparseRegressorWithLabelOffsetAndScale) {
  ExpectFoldingKeepsPredictions(false, kSparse, PredictorType::kRegressor);
}
TEST(FoldStatistics, LinearDenseCentredMulticlass) {
  ExpectFoldingKeepsPredictions(false, kDense, PredictorType::kMulticlassClassifier);
}
TEST(FoldStatistics, LinearSparseWithTheFrequencyPriorAndAnUnsampledFeature) {
  ExpectFoldingKeepsPredictions(false, kSparse, PredictorType::kBinaryClassifier, "0.6");
}
TEST(FoldStatistics, LinearSparseRegressorWithTheFrequencyPrior) {
  ExpectFoldingKeepsPredictions(false, kSparse, PredictorType::kRegressor, "0.6");
}
TEST(FoldStatistics, FactorizationMachineSparseWithTheFrequencyPrior) {
  ExpectFoldingKeepsPredictions(true, kSparse, PredictorType::kBinaryClassifier, "0.6");
}
TEST(FoldStatistics, FactorizationMachineSparseScaledOnly) {
  ExpectFoldingKeepsPredictions(true, kSparse, PredictorType::kBinaryClassifier);
}
TEST(FoldStatistics, FactorizationMachineDenseCentred) {
  ExpectFoldingKeepsPredictions(true, kDense, PredictorType::kBinaryClassifier);
}
TEST(FoldStatistics, FactorizationMachineDenseCentredRegressorWithLabelOffsetAndScale) {
  ExpectFoldingKeepsPredictions(true, kDense, PredictorType::kRegressor);
}

TEST(FoldStatistics, AModelWithoutBiasGainsOneForACentredLabelAndRecordsTheStatistics) {
  Hyperparameters h = Regressor();
  h.use_bias = false;
  h.unbias_label = "true";
  const Batch sample = MakeBatch({{{0, 1.0f}}, {{0, 1.0f}}}, {100.0f, 200.0f});
  const DataStatistics statistics = ComputeDataStatistics(sample, h);
  ModelArtifact model;
  model.hyperparameters = h;
  model.features = {0};
  model.weights = {0.5f};
  model.bias = {0.0f};
  FoldStatistics(statistics, &model);
  EXPECT_TRUE(model.hyperparameters.use_bias);
  EXPECT_FLOAT_EQ(model.bias[0], 150.0f);
  EXPECT_FLOAT_EQ(model.weights[0], 25.0f);  // 0.5 x label scale 50 (feature scale 1)
  EXPECT_NE(model.data_statistics_json.find("\"label_offset\":150"), std::string::npos)
      << model.data_statistics_json;
}

// ---------------------------------------------------------------------------
// Class weights in the per-example math and in the CPU backend.

TEST(ClassWeights, MultiplyTheLogisticLossAndGradientOfTheirClass) {
  LossFunction loss(LossKind::kLogistic);
  const float weights[] = {1.0f, 3.0f};
  loss.class_weights = weights;
  const float score = 0.5f;
  float gradient = 0.0f;
  // Positive: 3 x log(1 + e^-0.5) and 3 x (sigmoid(0.5) - 1), by hand.
  const float positive = ExampleLoss(loss, &score, 1, 1.0f, &gradient, nullptr);
  EXPECT_NEAR(positive, 3 * 0.474077f, 1e-5);
  EXPECT_NEAR(gradient, 3 * (0.622459f - 1.0f), 1e-5);
  // Negative: weight 1, log(1 + e^0.5) and sigmoid(0.5).
  const float negative = ExampleLoss(loss, &score, 1, 0.0f, &gradient, nullptr);
  EXPECT_NEAR(negative, 0.974077f, 1e-5);
  EXPECT_NEAR(gradient, 0.622459f, 1e-5);
}

TEST(ClassWeights, WeighASoftmaxExampleByItsClass) {
  LossFunction loss(LossKind::kSoftmax);
  const float weights[] = {0.5f, 2.0f, 1.0f};
  loss.class_weights = weights;
  const float scores[] = {0.0f, 0.0f, 0.0f};
  float gradient[3];
  // Uniform scores: loss log 3, gradient 1/3 - onehot, times class 1's weight 2.
  const float value = ExampleLoss(loss, scores, 3, 1.0f, gradient, nullptr);
  EXPECT_NEAR(value, 2 * std::log(3.0f), 1e-5);
  EXPECT_NEAR(gradient[0], 2 * (1.0f / 3), 1e-5);
  EXPECT_NEAR(gradient[1], 2 * (1.0f / 3 - 1), 1e-5);
}

TEST(ClassWeights, TheCpuBackendsGradientOfAPositiveRowScalesByItsWeight) {
  Hyperparameters h;
  const std::unique_ptr<ComputeBackend> model = MakeComputeBackend("cpu", 1, h);
  PreparedBatch batch;
  const uint64_t index = 3;
  const float value = 2.0f;
  batch.batch.AddRow(1.0f, &index, &value, 1);
  PrepareKeys(&batch);
  const std::vector<float> weights = {0.25f}, bias = {0.0f};
  std::vector<float> weight_gradients, bias_gradient;
  model->SetClassWeights({1.0f, 4.0f});
  const double loss =
      model->Gradients(batch, weights.data(), bias.data(), &weight_gradients, &bias_gradient);
  // Score 0.5: d/dw = 4 x (sigmoid(0.5) - 1) x 2, d/dbias = 4 x (sigmoid(0.5) - 1).
  EXPECT_NEAR(weight_gradients[0], 4 * (0.622459f - 1.0f) * 2, 1e-5);
  EXPECT_NEAR(bias_gradient[0], 4 * (0.622459f - 1.0f), 1e-5);
  EXPECT_NEAR(loss, 4 * 0.474077, 1e-5);
}

}  // namespace
}  // namespace keel
