// The worker's training pieces without a cluster: batch preparation, the CPU
// model's gradients, and the model artifact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "kv/error.h"
#include "worker/batch_stream.h"
#include "worker/cpu_model.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

PreparedBatch RandomBatch(size_t rows, uint64_t features, int max_nnz, int classes, bool regression,
                          std::mt19937_64* random) {
  PreparedBatch prepared;
  std::uniform_int_distribution<uint64_t> feature(0, features - 1);
  std::uniform_int_distribution<int> nnz(1, max_nnz);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (size_t r = 0; r < rows; ++r) {
    std::vector<uint64_t> indices;
    std::vector<float> values;
    const int count = nnz(*random);
    while (static_cast<int>(indices.size()) < count) {
      const uint64_t f = feature(*random);
      if (std::find(indices.begin(), indices.end(), f) != indices.end()) continue;
      indices.push_back(f);
      values.push_back(value(*random));
    }
    const float label = regression    ? value(*random)
                        : classes > 1 ? static_cast<float>((*random)() % classes)
                                      : static_cast<float>((*random)() % 2);
    prepared.batch.AddRow(label, indices.data(), values.data(), indices.size());
  }
  PrepareKeys(&prepared);
  return prepared;
}

TEST(PrepareKeys, PositionsPointAtEachFeaturesMixedKey) {
  std::mt19937_64 random(5);
  PreparedBatch prepared = RandomBatch(50, 30, 6, 1, false, &random);
  const auto& keys = prepared.keys;
  for (size_t i = 1; i < keys.size(); ++i) ASSERT_LT(keys[i - 1], keys[i]);
  for (size_t j = 0; j < prepared.batch.nnz(); ++j) {
    ASSERT_EQ(keys[prepared.positions[j]], MixKey(prepared.batch.indices[j]));
  }
}

// Mean loss over the batch in double, for finite differences.
double MeanLoss(const CpuModel& model, const PreparedBatch& batch, const std::vector<float>& w,
                const std::vector<float>& bias) {
  std::vector<float> predictions;
  return model.Predict(batch, w.data(), bias.data(), &predictions) / batch.batch.rows();
}

void ExpectGradientsMatchFiniteDifferences(const Hyperparameters& h, bool regression) {
  std::mt19937_64 random(17);
  const CpuModel model(h);
  PreparedBatch batch = RandomBatch(8, 12, 5, h.classes(), regression, &random);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> weights(batch.keys.size() * model.weight_width());
  for (float& w : weights) w = normal(random);
  std::vector<float> bias(model.bias_width());
  for (float& b : bias) b = normal(random);
  std::vector<float> weight_gradients, bias_gradient;
  model.Gradients(batch, weights.data(), bias.data(), &weight_gradients, &bias_gradient);
  const float step = 1e-2f;
  for (size_t i = 0; i < weights.size(); ++i) {
    std::vector<float> plus = weights, minus = weights;
    plus[i] += step;
    minus[i] -= step;
    const double numeric =
        (MeanLoss(model, batch, plus, bias) - MeanLoss(model, batch, minus, bias)) / (2 * step);
    ASSERT_NEAR(weight_gradients[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "weight " << i;
  }
  for (size_t i = 0; i < bias.size(); ++i) {
    std::vector<float> plus = bias, minus = bias;
    plus[i] += step;
    minus[i] -= step;
    const double numeric =
        (MeanLoss(model, batch, weights, plus) - MeanLoss(model, batch, weights, minus)) /
        (2 * step);
    ASSERT_NEAR(bias_gradient[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "bias " << i;
  }
}

TEST(CpuModel, LinearBinaryGradientsMatchFiniteDifferences) {
  Hyperparameters h;
  ExpectGradientsMatchFiniteDifferences(h, false);
}

TEST(CpuModel, LinearRegressionGradientsMatchFiniteDifferences) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  ExpectGradientsMatchFiniteDifferences(h, true);
}

TEST(CpuModel, MulticlassGradientsMatchFiniteDifferences) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 4;
  ExpectGradientsMatchFiniteDifferences(h, false);
}

TEST(CpuModel, FactorizationMachineGradientsMatchFiniteDifferences) {
  Hyperparameters h;
  h.job = JobKind::kFactorizationMachines;
  h.num_factors = 3;
  ExpectGradientsMatchFiniteDifferences(h, false);
}

TEST(CpuModel, RejectsAMulticlassLabelThatIsNotAClass) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  const CpuModel model(h);
  PreparedBatch batch;
  const uint64_t index = 1;
  const float value = 1;
  batch.batch.AddRow(7.0f, &index, &value, 1);
  PrepareKeys(&batch);
  std::vector<float> weights(3, 0.0f), bias(3, 0.0f), predictions;
  EXPECT_THROW(model.Predict(batch, weights.data(), bias.data(), &predictions), Error);
}

class ModelArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char folder[] = "/tmp/keel-model-XXXXXX";
    ASSERT_NE(mkdtemp(folder), nullptr);
    dir_ = folder;
  }
  void TearDown() override {
    for (const char* file : {"/weights.bin", "/model.json", "/weights.bin.tmp"}) {
      unlink((dir_ + file).c_str());
    }
    rmdir(dir_.c_str());
  }
  ModelArtifact Sample() {
    ModelArtifact model;
    model.hyperparameters.job = JobKind::kFactorizationMachines;
    model.hyperparameters.num_factors = 2;
    model.features = {3, 10, 99};
    model.weights = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    model.bias = {0.5f};
    return model;
  }
  std::string dir_;
};

TEST_F(ModelArtifactTest, RoundTrips) {
  Sample().Write(dir_);
  const ModelArtifact back = ModelArtifact::Read(dir_);
  EXPECT_EQ(back.hyperparameters.job, JobKind::kFactorizationMachines);
  EXPECT_EQ(back.hyperparameters.num_factors, 2);
  EXPECT_EQ(back.features, Sample().features);
  EXPECT_EQ(back.weights, Sample().weights);
  EXPECT_EQ(back.bias, Sample().bias);
}

TEST_F(ModelArtifactTest, RefusesAFlippedByteNamingTheFile) {
  Sample().Write(dir_);
  const std::string path = dir_ + "/weights.bin";
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(60);
  char byte = 0;
  file.read(&byte, 1);
  file.seekp(60);
  byte ^= 0x10;
  file.write(&byte, 1);
  file.close();
  try {
    ModelArtifact::Read(dir_);
    FAIL() << "a corrupted model was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

TEST_F(ModelArtifactTest, RefusesATruncatedFile) {
  Sample().Write(dir_);
  const std::string path = dir_ + "/weights.bin";
  ASSERT_EQ(truncate(path.c_str(), 40), 0);
  try {
    ModelArtifact::Read(dir_);
    FAIL() << "a truncated model was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST_F(ModelArtifactTest, SaysWhenThereIsNoModel) {
  EXPECT_THROW(ModelArtifact::Read(dir_ + "/nothing"), Error);
}

}  // namespace
}  // namespace keel
