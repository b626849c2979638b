// The CUDA backend against the CPU backend (compiled when nvcc was found; the
// GPU tests skip, saying so, on a machine without a usable GPU). The CPU tests
// (models_test.cc, trainer_unit_test.cc) vouch for the math both run; these
// check that the device runs it the same.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "kv/initializer.h"
#include "models/metrics.h"
#include "random_batch.h"
#include "worker/compute_backend.h"
#include "worker/compute_backend_factory.h"
#include "worker/cpu_model.h"
#include "worker/cuda_model.h"
#include "worker/model_variants.h"

namespace keel {
namespace {

using testing::RandomBatch;
using testing::RandomDenseBatch;
using testing::RandomWeights;

class CudaBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0)
      GTEST_SKIP() << "no usable GPU (" << why << "): run on a machine with a CUDA GPU";
  }
};

struct Task {
  const char* name;
  PredictorType type;
  JobKind job;
  int factors;
};
const Task kTasks[] = {
    {"linear binary", PredictorType::kBinaryClassifier, JobKind::kLinearLearner, 0},
    {"linear regression", PredictorType::kRegressor, JobKind::kLinearLearner, 0},
    {"linear multiclass", PredictorType::kMulticlassClassifier, JobKind::kLinearLearner, 0},
    {"fm binary k 4", PredictorType::kBinaryClassifier, JobKind::kFactorizationMachines, 4},
    {"fm binary k 64", PredictorType::kBinaryClassifier, JobKind::kFactorizationMachines, 64},
    {"fm regression k 20", PredictorType::kRegressor, JobKind::kFactorizationMachines, 20},
};

Hyperparameters HyperparametersOf(const Task& task) {
  Hyperparameters h;
  h.job = task.job;
  h.predictor_type = task.type;
  h.num_classes = 5;
  if (task.factors > 0) h.num_factors = task.factors;
  return h;
}

// |a - b| <= 1e-5 |b|, with |b| floored at 1e-2 of the largest |b|: the sums
// run in another order on the device (lanes, fused multiply-adds, the
// device's expf), so an element that nearly cancels is held to the batch's
// scale rather than to its own.
void ExpectRelativelyClose(const std::vector<float>& got, const std::vector<float>& expected,
                           const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  float scale = 0;
  for (float x : expected) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < got.size(); ++i) {
    const float bound = 1e-5f * std::max(std::fabs(expected[i]), 1e-2f * scale);
    ASSERT_NEAR(got[i], expected[i], bound) << what << " " << i;
  }
}

TEST_F(CudaBackend, MatchesTheCpuBackendOnSparseAndDenseBatches) {
  for (const Task& task : kTasks) {
    for (bool dense : {false, true}) {
      SCOPED_TRACE(std::string(task.name) + (dense ? ", dense" : ", sparse"));
      const Hyperparameters h = HyperparametersOf(task);
      const bool regression = task.type == PredictorType::kRegressor;
      std::mt19937_64 random(11);
      CpuModel cpu(h, 1);
      auto cuda = MakeComputeBackend("cuda:0", 1, h);
      for (size_t rows : {1, 37, 1000}) {
        PreparedBatch batch = dense ? RandomDenseBatch(rows, 30, h.classes(), regression, &random)
                                    : RandomBatch(rows, 5000, 40, h.classes(), regression, &random);
        const auto weights = RandomWeights(batch.keys.size() * cpu.weight_width(), &random, 0.1f);
        const auto bias = RandomWeights(cpu.bias_width(), &random);
        std::vector<float> cpu_predictions, cuda_predictions, cpu_w, cuda_w, cpu_b, cuda_b;
        const double cpu_loss = cpu.Predict(batch, weights.data(), bias.data(), &cpu_predictions);
        const double cuda_loss =
            cuda->Predict(batch, weights.data(), bias.data(), &cuda_predictions);
        EXPECT_NEAR(cuda_loss, cpu_loss, 1e-5 * std::fabs(cpu_loss) + 1e-6);
        ExpectRelativelyClose(cuda_predictions, cpu_predictions, "prediction");
        cpu.Gradients(batch, weights.data(), bias.data(), &cpu_w, &cpu_b);
        cuda->Gradients(batch, weights.data(), bias.data(), &cuda_w, &cuda_b);
        ExpectRelativelyClose(cuda_w, cpu_w, "weight gradient");
        ExpectRelativelyClose(cuda_b, cpu_b, "bias gradient");
      }
    }
  }
}

// Several factorization machines in one pass (a block row of the kernels per
// model, rows of every model side by side): each model's losses, predictions
// and gradients are what the CPU backend's one pass gives, which are each
// model's alone (tests/unit/num_models_test.cc).
TEST_F(CudaBackend, ComputesSeveralFactorizationMachinesInOnePassAsTheCpuBackend) {
  for (const auto& [type, factors, models] : {std::tuple{PredictorType::kBinaryClassifier, 4, 8},
                                              std::tuple{PredictorType::kRegressor, 20, 3}}) {
    for (bool dense : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << models << " models of k = " << factors << (dense ? ", dense" : ", sparse"));
      Hyperparameters given;
      given.job = JobKind::kFactorizationMachines;
      given.predictor_type = type;
      given.num_factors = factors;
      const Hyperparameters h = WithModels(given, models);
      const bool regression = type == PredictorType::kRegressor;
      std::mt19937_64 random(13);
      CpuModel cpu(h, 1);
      auto cuda = MakeComputeBackend("cuda:0", 1, h);
      ASSERT_EQ(cuda->num_models(), models);
      ASSERT_EQ(cuda->weight_width(), cpu.weight_width());
      for (size_t rows : {1, 37, 1000}) {
        PreparedBatch batch = dense ? RandomDenseBatch(rows, 30, 1, regression, &random)
                                    : RandomBatch(rows, 5000, 40, 1, regression, &random);
        const auto weights = RandomWeights(batch.keys.size() * cpu.weight_width(), &random, 0.1f);
        const auto bias = RandomWeights(cpu.bias_width(), &random);
        std::vector<float> cpu_predictions, cuda_predictions, cpu_w, cuda_w, cpu_b, cuda_b;
        cpu.Predict(batch, weights.data(), bias.data(), &cpu_predictions);
        cuda->Predict(batch, weights.data(), bias.data(), &cuda_predictions);
        ExpectRelativelyClose(cuda_predictions, cpu_predictions, "prediction");
        const double cpu_loss = cpu.Gradients(batch, weights.data(), bias.data(), &cpu_w, &cpu_b);
        const double cuda_loss =
            cuda->Gradients(batch, weights.data(), bias.data(), &cuda_w, &cuda_b);
        const std::vector<double> cpu_losses = cpu.LastModelLosses(cpu_loss);
        const std::vector<double> cuda_losses = cuda->LastModelLosses(cuda_loss);
        ASSERT_EQ(cuda_losses.size(), cpu_losses.size());
        for (size_t m = 0; m < cpu_losses.size(); ++m) {
          EXPECT_NEAR(cuda_losses[m], cpu_losses[m], 1e-5 * std::fabs(cpu_losses[m]) + 1e-6) << m;
        }
        ExpectRelativelyClose(cuda_w, cpu_w, "weight gradient");
        ExpectRelativelyClose(cuda_b, cpu_b, "bias gradient");
      }
    }
  }
}

// The trainer's order: the next batch is prefetched while this one computes.
TEST_F(CudaBackend, PrefetchedBatchesGiveWhatUnprefetchedOnesGive) {
  const Hyperparameters h = HyperparametersOf(kTasks[3]);
  std::mt19937_64 random(3);
  std::vector<PreparedBatch> batches;
  for (int i = 0; i < 5; ++i) batches.push_back(RandomBatch(200, 3000, 20, 1, false, &random));
  std::vector<std::vector<float>> weights;
  for (const auto& batch : batches) {
    weights.push_back(RandomWeights(batch.keys.size() * h.weight_width(), &random, 0.1f));
  }
  const std::vector<float> bias = {0.2f};
  auto plain = MakeComputeBackend("cuda:0", 1, h);
  auto ahead = MakeComputeBackend("cuda:0", 1, h);
  for (size_t i = 0; i < batches.size(); ++i) {
    if (i + 1 < batches.size()) ahead->Prefetch(batches[i + 1]);
    std::vector<float> expected_w, expected_b, got_w, got_b;
    const double expected =
        plain->Gradients(batches[i], weights[i].data(), bias.data(), &expected_w, &expected_b);
    const double got = ahead->Gradients(batches[i], weights[i].data(), bias.data(), &got_w, &got_b);
    EXPECT_EQ(got, expected) << i;
    EXPECT_EQ(got_w, expected_w) << i;
    EXPECT_EQ(got_b, expected_b) << i;
  }
}

// A short SGD run, in process, with each backend's gradients: the same
// validation AUC and loss, up to the rounding the two accumulate.
MetricSet TrainAndValidate(ComputeBackend* backend, const Hyperparameters& h) {
  std::mt19937_64 data_random(21);
  std::vector<PreparedBatch> train, validation;
  for (int i = 0; i < 30; ++i) train.push_back(RandomBatch(256, 500, 15, 1, false, &data_random));
  for (int i = 0; i < 4; ++i)
    validation.push_back(RandomBatch(256, 500, 15, 1, false, &data_random));
  // Labels from a planted linear model, so there is something to learn.
  std::vector<float> planted = RandomWeights(500, &data_random, 1.0f);
  for (auto* set : {&train, &validation}) {
    for (PreparedBatch& batch : *set) {
      for (size_t r = 0; r < batch.batch.rows(); ++r) {
        float score = 0;
        for (size_t e = batch.batch.row_offsets[r]; e < batch.batch.row_offsets[r + 1]; ++e) {
          score += planted[batch.batch.indices[e]] * batch.batch.values[e];
        }
        batch.batch.labels[r] = score > 0 ? 1.0f : 0.0f;
      }
    }
  }
  const int width = h.weight_width();
  std::unordered_map<Key, std::vector<float>> table;
  auto row_of = [&](Key key) -> std::vector<float>& {
    auto [it, inserted] = table.try_emplace(key, width, 0.0f);
    if (inserted) {
      std::mt19937_64 seeded(key);
      it->second = RandomWeights(width, &seeded, 0.01f);
    }
    return it->second;
  };
  std::vector<float> bias(backend->bias_width(), 0.0f);
  auto pull = [&](const PreparedBatch& batch) {
    std::vector<float> weights(batch.keys.size() * width);
    for (size_t u = 0; u < batch.keys.size(); ++u) {
      const auto& row = row_of(batch.keys[u]);
      std::copy(row.begin(), row.end(), weights.begin() + u * width);
    }
    return weights;
  };
  const float rate = 0.5f;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (const PreparedBatch& batch : train) {
      std::vector<float> weights = pull(batch), weight_gradients, bias_gradient;
      backend->Gradients(batch, weights.data(), bias.data(), &weight_gradients, &bias_gradient);
      for (size_t u = 0; u < batch.keys.size(); ++u) {
        auto& row = row_of(batch.keys[u]);
        for (int c = 0; c < width; ++c) row[c] -= rate * weight_gradients[u * width + c];
      }
      for (size_t c = 0; c < bias.size(); ++c) bias[c] -= rate * bias_gradient[c];
    }
  }
  std::vector<float> probabilities, labels, predictions;
  for (const PreparedBatch& batch : validation) {
    std::vector<float> weights = pull(batch);
    backend->Predict(batch, weights.data(), bias.data(), &predictions);
    probabilities.insert(probabilities.end(), predictions.begin(), predictions.end());
    labels.insert(labels.end(), batch.batch.labels.begin(), batch.batch.labels.end());
  }
  return BinaryClassificationMetrics(probabilities, labels);
}

TEST_F(CudaBackend, ShortTrainingReachesTheCpuBackendsValidationMetrics) {
  for (const Task& task : {kTasks[0], kTasks[3]}) {
    SCOPED_TRACE(task.name);
    const Hyperparameters h = HyperparametersOf(task);
    CpuModel cpu(h, 1);
    auto cuda = MakeComputeBackend("cuda:0", 1, h);
    const MetricSet expected = TrainAndValidate(&cpu, h);
    const MetricSet got = TrainAndValidate(cuda.get(), h);
    EXPECT_GT(expected.at("roc_auc_score"), 0.8);  // it learned something
    EXPECT_NEAR(got.at("roc_auc_score"), expected.at("roc_auc_score"), 2e-3);
    EXPECT_NEAR(got.at("objective_loss"), expected.at("objective_loss"),
                1e-3 * expected.at("objective_loss"));
  }
}

TEST_F(CudaBackend, ADeviceNumberBeyondTheDevicesIsRefused) {
  try {
    MakeComputeBackend("cuda:1000", 1, Hyperparameters());
    FAIL() << "made a backend on device 1000";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("numbered from 0"), std::string::npos) << e.what();
  }
}

// Runs on every machine: without a usable GPU, asking for one fails at once
// and says why.
TEST(CudaDevice, WithoutAGpuTheCudaBackendIsRefusedWithTheReason) {
  std::string why;
  if (CudaDeviceCount(&why) > 0) {
    GTEST_SKIP() << "a GPU is present: this is the refusal without one, which only a machine "
                    "without a usable GPU shows (the GPU tests above run here instead)";
  }
  EXPECT_FALSE(why.empty());
  try {
    MakeComputeBackend("cuda:0", 1, Hyperparameters());
    FAIL() << "made a CUDA backend without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda:0: " + why), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use --device=cpu"), std::string::npos) << e.what();
  }
}

// Runs on every machine with the toolkit: cuBLAS is not loaded with the
// program, only by the first CUDA model (OpenCublas), which finds it.
TEST(CudaDevice, CublasIsOpenedWhenFirstNeededNotAtStart) {
  auto mapped = [] {
    std::ifstream maps("/proc/self/maps");
    std::stringstream text;
    text << maps.rdbuf();
    return text.str().find("libcublas") != std::string::npos;
  };
  std::string why;
  if (CudaDeviceCount(&why) > 0) {
    std::cout << "[   NOTE   ] a GPU is present: earlier tests made CUDA models, so cuBLAS may "
                 "be loaded already; only its opening is checked\n";
  } else {
    EXPECT_FALSE(mapped()) << "cuBLAS was loaded before any CUDA model was made";
  }
  ASSERT_TRUE(OpenCublas(&why)) << why;
  EXPECT_TRUE(mapped());
  EXPECT_TRUE(OpenCublas(&why)) << "opened once, then known";
}

}  // namespace
}  // namespace keel
