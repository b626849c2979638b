// The worker's training pieces without a cluster: batch preparation, the CPU
// model's gradients, and the model artifact.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string_view>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/json_reader.h"
#include "base/thread_pool.h"
#include "io/storage.h"
#include "kv/keys.h"
#include "models/factorization_machine.h"
#include "models/losses.h"
#include "random_batch.h"
#include "test_util.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/compute_backend_factory.h"
#include "worker/cpu_model.h"
#include "worker/evaluator.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

using testing::RandomBatch;
using testing::RandomDenseBatch;
using testing::RandomWeights;

TEST(PrepareKeys, ListsEachKeysNonZerosInAscendingOrder) {
  std::mt19937_64 random(6);
  PreparedBatch prepared = RandomBatch(40, 25, 6, 1, false, &random);
  ASSERT_EQ(prepared.key_offsets.size(), prepared.keys.size() + 1);
  ASSERT_EQ(prepared.key_offsets.back(), prepared.batch.nnz());
  std::vector<int> seen(prepared.batch.nnz(), 0);
  for (size_t u = 0; u < prepared.keys.size(); ++u) {
    ASSERT_LT(prepared.key_offsets[u], prepared.key_offsets[u + 1]) << "key " << u;
    for (uint32_t e = prepared.key_offsets[u]; e < prepared.key_offsets[u + 1]; ++e) {
      const uint32_t nonzero = prepared.nonzeros_by_key[e];
      ASSERT_EQ(prepared.positions[nonzero], u);
      if (e > prepared.key_offsets[u]) {
        ASSERT_LT(prepared.nonzeros_by_key[e - 1], nonzero);
      }
      ++seen[nonzero];
    }
  }
  EXPECT_EQ(seen, std::vector<int>(prepared.batch.nnz(), 1));
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

// PrepareKeys of a batch whose non-zeros are `indices` (rows of 20) against
// the same built from a plain sort of (key, non-zero) pairs.
void ExpectPreparedAsByAPlainSort(const std::vector<uint64_t>& indices) {
  PreparedBatch prepared;
  const std::vector<float> values(20, 1.0f);
  for (size_t begin = 0; begin < indices.size(); begin += 20) {
    const size_t count = std::min<size_t>(20, indices.size() - begin);
    prepared.batch.AddRow(1.0f, indices.data() + begin, values.data(), count);
  }
  PrepareKeys(&prepared);
  std::vector<std::pair<Key, uint32_t>> pairs;
  for (size_t i = 0; i < indices.size(); ++i) pairs.push_back({MixKey(indices[i]), i});
  std::sort(pairs.begin(), pairs.end());
  std::vector<Key> keys;
  std::vector<uint32_t> offsets, by_key, positions(indices.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (keys.empty() || keys.back() != pairs[i].first) {
      keys.push_back(pairs[i].first);
      offsets.push_back(i);
    }
    by_key.push_back(pairs[i].second);
    positions[pairs[i].second] = keys.size() - 1;
  }
  offsets.push_back(pairs.size());
  ASSERT_EQ(std::vector<Key>(prepared.keys.begin(), prepared.keys.end()), keys);
  EXPECT_EQ(prepared.key_offsets, offsets);
  EXPECT_EQ(prepared.nonzeros_by_key, by_key);
  EXPECT_EQ(prepared.positions, positions);
}

TEST(PrepareKeys, LargeBatchesComeOutAsFromAPlainSort) {
  std::mt19937_64 random(12);
  // Power-law features, as real data: a few features in most rows.
  std::vector<uint64_t> common;
  for (int i = 0; i < 20000; ++i) {
    common.push_back(
        static_cast<uint64_t>(std::pow(100000.0, std::generate_canonical<double, 53>(random))));
  }
  ExpectPreparedAsByAPlainSort(common);
  // Uniform features over 64 bits, and few distinct ones (every bucket full
  // of one key's non-zeros).
  std::vector<uint64_t> uniform(30000), few(5000);
  for (auto& index : uniform) index = random();
  for (auto& index : few) index = random() % 7;
  ExpectPreparedAsByAPlainSort(uniform);
  ExpectPreparedAsByAPlainSort(few);
  // Many distinct keys with the same top bits (one crowded bucket) beside a
  // spread of others, interleaved.
  std::vector<uint64_t> crowded;
  for (int i = 0; i < 4000; ++i) {
    crowded.push_back(UnmixKey((Key{0xabc} << 52) | (random() >> 12)));
    crowded.push_back(random() % 1000);
  }
  ExpectPreparedAsByAPlainSort(crowded);
}

// Mean loss over the batch in double, for finite differences.
double MeanLoss(CpuModel* model, const PreparedBatch& batch, const std::vector<float>& w,
                const std::vector<float>& bias) {
  std::vector<float> predictions;
  return model->Predict(batch, w.data(), bias.data(), &predictions) / batch.batch.rows();
}

// The backend's gradients of the mean loss against central differences of
// its own loss, for every weight and bias. `threads` > 1 runs the threaded
// passes; `dense` a dense batch (with threads, Eigen's products).
void ExpectGradientsMatchFiniteDifferences(const Hyperparameters& h, bool regression,
                                           int threads = 1, bool dense = false) {
  std::mt19937_64 random(17);
  CpuModel model(h, threads);
  PreparedBatch batch = dense ? RandomDenseBatch(9, 6, h.classes(), regression, &random)
                              : RandomBatch(8, 12, 5, h.classes(), regression, &random);
  ASSERT_EQ(IsDenseBatch(batch), dense);
  std::vector<float> weights = RandomWeights(batch.keys.size() * model.weight_width(), &random);
  std::vector<float> bias = RandomWeights(model.bias_width(), &random);
  std::vector<float> weight_gradients, bias_gradient;
  model.Gradients(batch, weights.data(), bias.data(), &weight_gradients, &bias_gradient);
  const float step = 1e-2f;
  for (size_t i = 0; i < weights.size(); ++i) {
    std::vector<float> plus = weights, minus = weights;
    plus[i] += step;
    minus[i] -= step;
    const double numeric =
        (MeanLoss(&model, batch, plus, bias) - MeanLoss(&model, batch, minus, bias)) / (2 * step);
    ASSERT_NEAR(weight_gradients[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "weight " << i;
  }
  for (size_t i = 0; i < bias.size(); ++i) {
    std::vector<float> plus = bias, minus = bias;
    plus[i] += step;
    minus[i] -= step;
    const double numeric =
        (MeanLoss(&model, batch, weights, plus) - MeanLoss(&model, batch, weights, minus)) /
        (2 * step);
    ASSERT_NEAR(bias_gradient[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "bias " << i;
  }
}

Hyperparameters Task(PredictorType type, JobKind job = JobKind::kLinearLearner) {
  Hyperparameters h;
  h.job = job;
  h.predictor_type = type;
  h.num_classes = 4;
  h.num_factors = 3;
  return h;
}

// Every predictor type and job, each through the one-thread pass, the
// threaded sparse pass and the threaded dense pass.
struct FiniteDifferenceCase {
  const char* name;
  PredictorType type;
  JobKind job;
};
const FiniteDifferenceCase kCases[] = {
    {"linear binary", PredictorType::kBinaryClassifier, JobKind::kLinearLearner},
    {"linear regression", PredictorType::kRegressor, JobKind::kLinearLearner},
    {"linear multiclass", PredictorType::kMulticlassClassifier, JobKind::kLinearLearner},
    {"fm binary", PredictorType::kBinaryClassifier, JobKind::kFactorizationMachines},
    {"fm regression", PredictorType::kRegressor, JobKind::kFactorizationMachines},
};

TEST(CpuModel, GradientsMatchFiniteDifferencesForEveryTaskOneThread) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    ExpectGradientsMatchFiniteDifferences(Task(c.type, c.job), c.type == PredictorType::kRegressor);
  }
}

TEST(CpuModel, GradientsMatchFiniteDifferencesForEveryTaskThreeThreads) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    ExpectGradientsMatchFiniteDifferences(Task(c.type, c.job), c.type == PredictorType::kRegressor,
                                          3);
  }
}

TEST(CpuModel, DenseBatchGradientsMatchFiniteDifferencesForEveryTask) {
  for (const auto& c : kCases) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::string(c.name) + ", threads " + std::to_string(threads));
      ExpectGradientsMatchFiniteDifferences(Task(c.type, c.job),
                                            c.type == PredictorType::kRegressor, threads, true);
    }
  }
}

// What a backend returns for a batch.
struct Pass {
  double loss = 0;
  std::vector<float> predictions, weight_gradients, bias_gradient;
};

// `got` is `expected` bit for bit: loss, predictions and gradients.
void ExpectSamePass(const Pass& got, const Pass& expected) {
  EXPECT_EQ(got.loss, expected.loss);
  EXPECT_EQ(got.predictions, expected.predictions);
  EXPECT_EQ(got.weight_gradients, expected.weight_gradients);
  EXPECT_EQ(got.bias_gradient, expected.bias_gradient);
}

Pass RunPass(CpuModel* model, const PreparedBatch& batch, const std::vector<float>& weights,
             const std::vector<float>& bias) {
  Pass pass;
  model->Predict(batch, weights.data(), bias.data(), &pass.predictions);
  pass.loss = model->Gradients(batch, weights.data(), bias.data(), &pass.weight_gradients,
                               &pass.bias_gradient);
  return pass;
}

// Sparse batches: every thread writes its rows' gradients into slots of their
// own, and each key's slots are summed in ascending order, the order one
// thread adds them in; losses and bias gradients are summed per row in row
// order. So the results are not merely close but bitwise equal, and the test
// asks for that: a tolerance would let a reduction in thread order slip by.
TEST(CpuModel, ThreadedSparsePassEqualsTheOneThreadPassExactly) {
  for (const auto& c : kCases) {
    for (int threads : {2, 3, 8}) {
      SCOPED_TRACE(std::string(c.name) + ", threads " + std::to_string(threads));
      std::mt19937_64 random(threads * 31 + static_cast<int>(c.type));
      const Hyperparameters h = Task(c.type, c.job);
      const bool regression = c.type == PredictorType::kRegressor;
      // Few features for many rows: keys shared by rows of different threads.
      PreparedBatch batch = RandomBatch(301, 200, 20, h.classes(), regression, &random);
      CpuModel one(h, 1), many(h, threads);
      const std::vector<float> weights =
          RandomWeights(batch.keys.size() * one.weight_width(), &random);
      const std::vector<float> bias = RandomWeights(one.bias_width(), &random);
      const Pass expected = RunPass(&one, batch, weights, bias);
      const Pass got = RunPass(&many, batch, weights, bias);
      ExpectSamePass(got, expected);
    }
  }
}

// Dense batches go through Eigen's products with threads: each thread adds
// its rows into its own accumulator and the accumulators are added in thread
// order. The same sums are taken in another order than one thread's per-row
// loop, so results agree up to float rounding: about 1e-7 relative per
// addition over a few hundred terms, well inside 1e-5 of the largest gradient.
// The same thread count twice gives bitwise the same result.
TEST(CpuModel, ThreadedDensePassAgreesWithOneThreadAndIsDeterministic) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 random(5 + static_cast<int>(c.type));
    const Hyperparameters h = Task(c.type, c.job);
    PreparedBatch batch =
        RandomDenseBatch(257, 40, h.classes(), c.type == PredictorType::kRegressor, &random);
    CpuModel one(h, 1), three(h, 3), again(h, 3);
    const std::vector<float> weights =
        RandomWeights(batch.keys.size() * one.weight_width(), &random);
    const std::vector<float> bias = RandomWeights(one.bias_width(), &random);
    const Pass expected = RunPass(&one, batch, weights, bias);
    const Pass got = RunPass(&three, batch, weights, bias);
    const Pass repeated = RunPass(&again, batch, weights, bias);
    EXPECT_NEAR(got.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
    auto expect_close = [](const std::vector<float>& a, const std::vector<float>& b,
                           const char* what) {
      ASSERT_EQ(a.size(), b.size()) << what;
      float scale = 0;
      for (float x : b) scale = std::max(scale, std::fabs(x));
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], 1e-5f * scale) << what << " " << i;
      }
    };
    expect_close(got.predictions, expected.predictions, "prediction");
    expect_close(got.weight_gradients, expected.weight_gradients, "weight gradient");
    expect_close(got.bias_gradient, expected.bias_gradient, "bias gradient");
    EXPECT_EQ(repeated.loss, got.loss);
    EXPECT_EQ(repeated.weight_gradients, got.weight_gradients);
    EXPECT_EQ(repeated.bias_gradient, got.bias_gradient);
  }
}

TEST(CpuModel, ThreadedPassWithFewerRowsThanThreads) {
  const Hyperparameters h = Task(PredictorType::kBinaryClassifier);
  std::mt19937_64 random(3);
  PreparedBatch batch = RandomBatch(2, 10, 4, 1, false, &random);
  CpuModel one(h, 1), many(h, 8);
  const std::vector<float> weights = RandomWeights(batch.keys.size(), &random);
  const std::vector<float> bias = {0.1f};
  const Pass expected = RunPass(&one, batch, weights, bias);
  const Pass got = RunPass(&many, batch, weights, bias);
  EXPECT_EQ(got.weight_gradients, expected.weight_gradients);
  EXPECT_EQ(got.loss, expected.loss);
}

// The sparse pass of a factorization machine written out with the shared
// per-example functions of models/, one row after another: what CpuModel
// computes, whatever the width of its rows.
Pass FactorizationMachineByTheSharedFunctions(const Hyperparameters& h,
                                              const PreparedBatch& prepared,
                                              const std::vector<float>& weights,
                                              const std::vector<float>& bias) {
  const Batch& batch = prepared.batch;
  const int k = h.num_factors;
  const int width = FmRowWidth(k);
  const size_t rows = batch.rows();
  const LossFunction loss = h.loss_function();
  Pass pass;
  pass.weight_gradients.assign(prepared.keys.size() * width, 0.0f);
  pass.bias_gradient.assign(1, 0.0f);
  std::vector<float> row_bias_gradients(rows, 0.0f), sums(k);
  for (size_t r = 0; r < rows; ++r) {
    const size_t begin = batch.row_offsets[r];
    const int nnz = static_cast<int>(batch.row_offsets[r + 1] - begin);
    const float* values = batch.values.data() + begin;
    std::vector<float> params, gradients(static_cast<size_t>(nnz) * width, 0.0f);
    for (int j = 0; j < nnz; ++j) {
      const float* row =
          weights.data() + static_cast<size_t>(prepared.positions[begin + j]) * width;
      params.insert(params.end(), row, row + width);
    }
    float score = FmScore(params.data(), values, nnz, k, h.use_bias ? bias[0] : 0.0f, sums.data());
    float score_gradient = 0.0f, prediction = 0.0f;
    pass.loss += ExampleLoss(loss, &score, 1, batch.labels[r], &score_gradient, &prediction);
    pass.predictions.push_back(prediction);
    score_gradient /= static_cast<float>(rows);
    FmGradients(params.data(), values, nnz, k, sums.data(), score_gradient, gradients.data(),
                &row_bias_gradients[r]);
    for (int j = 0; j < nnz; ++j) {
      float* key =
          pass.weight_gradients.data() + static_cast<size_t>(prepared.positions[begin + j]) * width;
      for (int c = 0; c < width; ++c) key[c] += gradients[static_cast<size_t>(j) * width + c];
    }
  }
  if (h.use_bias) {
    for (size_t r = 0; r < rows; ++r) pass.bias_gradient[0] += row_bias_gradients[r];
  }
  return pass;
}

// The CPU pass compiles the rows of a factorization machine with k = 4 and
// k = 8 (5 and 9 floats) for their width; k = 3 takes the pass for any
// width. Each gives, bit for bit, what the shared functions give.
TEST(CpuModel, FactorizationMachineRowsOfEveryWidthAsTheSharedFunctionsComputeThem) {
  for (const PredictorType type : {PredictorType::kBinaryClassifier, PredictorType::kRegressor}) {
    for (const int k : {3, 4, 8}) {
      for (const int threads : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << "k " << k << ", threads " << threads);
        Hyperparameters h = Task(type, JobKind::kFactorizationMachines);
        h.num_factors = k;
        std::mt19937_64 random(k * 7 + threads);
        const PreparedBatch batch =
            RandomBatch(97, 60, 9, 1, type == PredictorType::kRegressor, &random);
        CpuModel model(h, threads);
        ASSERT_EQ(model.weight_width(), FmRowWidth(k));
        const std::vector<float> weights =
            RandomWeights(batch.keys.size() * model.weight_width(), &random);
        const std::vector<float> bias = RandomWeights(model.bias_width(), &random);
        const Pass expected = FactorizationMachineByTheSharedFunctions(h, batch, weights, bias);
        const Pass got = RunPass(&model, batch, weights, bias);
        ExpectSamePass(got, expected);
      }
    }
  }
}

TEST(IsDenseBatch, OnlyWhenEveryRowListsEveryKeyInTheSameOrder) {
  std::mt19937_64 random(9);
  EXPECT_TRUE(IsDenseBatch(RandomDenseBatch(5, 7, 1, false, &random)));
  EXPECT_FALSE(IsDenseBatch(RandomBatch(5, 50, 7, 1, false, &random)));
  PreparedBatch reordered;
  const uint64_t forward[2] = {1, 2}, backward[2] = {2, 1};
  const float values[2] = {1.0f, 2.0f};
  reordered.batch.AddRow(1.0f, forward, values, 2);
  reordered.batch.AddRow(0.0f, backward, values, 2);
  PrepareKeys(&reordered);
  EXPECT_FALSE(IsDenseBatch(reordered));
}

TEST(ThreadPool, RunsEveryPartOnceOnTheSameThreadEachTime) {
  ThreadPool pool(4);
  std::vector<std::thread::id> first(4), second(4);
  std::vector<int> runs(4, 0);
  pool.Run([&](int part) {
    first[part] = std::this_thread::get_id();
    ++runs[part];
  });
  pool.Run([&](int part) {
    second[part] = std::this_thread::get_id();
    ++runs[part];
  });
  EXPECT_EQ(runs, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(first, second);
  EXPECT_EQ(first[0], std::this_thread::get_id());
  for (int part = 1; part < 4; ++part) EXPECT_NE(first[part], first[0]);
}

TEST(ThreadPool, RethrowsTheLowestPartsError) {
  ThreadPool pool(3);
  try {
    pool.Run([](int part) {
      if (part >= 1) throw MakeError("part ", part);
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "part 1");
  }
  int ran = 0;
  pool.Run([&](int part) {
    if (part == 0) ran = 1;
  });
  EXPECT_EQ(ran, 1);  // still usable
}

TEST(MakeComputeBackend, MakesTheCpuBackendWithTheThreadsAsked) {
  const Hyperparameters h;
  EXPECT_EQ(MakeComputeBackend("cpu", 3, h)->name(), "cpu (3 threads)");
  EXPECT_EQ(MakeComputeBackend("cpu", 1, h)->name(), "cpu (1 thread)");
  EXPECT_NE(MakeComputeBackend("cpu", 0, h)->name().find("cpu ("), std::string::npos);
}

TEST(MakeComputeBackend, RefusesAnUnknownDeviceNamingIt) {
  const Hyperparameters h;
  for (const char* device : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"}) {
    try {
      MakeComputeBackend(device, 1, h);
      FAIL() << device;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + device + "'"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(MakeComputeBackend("cpu", -1, h), Error);
}

#ifndef KEEL_HAVE_CUDA
TEST(MakeComputeBackend, SaysThisBuildHasNoCudaBackend) {
  try {
    MakeComputeBackend("cuda:0", 1, Hyperparameters());
    FAIL() << "made a CUDA backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without the CUDA backend"), std::string::npos)
        << e.what();
  }
}
#endif

// Labels are checked where they are read (io/readers.h); a label that is not a
// class id (a batch built by hand) still computes without harm.
TEST(CpuModel, PredictsWhateverTheLabelOfAMulticlassRow) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  CpuModel model(h);
  PreparedBatch batch;
  const uint64_t index = 1;
  const float value = 1;
  batch.batch.AddRow(7.0f, &index, &value, 1);
  PrepareKeys(&batch);
  std::vector<float> weights(3, 0.0f), bias(3, 0.0f), predictions;
  model.Predict(batch, weights.data(), bias.data(), &predictions);
  EXPECT_EQ(predictions, (std::vector<float>{1.0f / 3, 1.0f / 3, 1.0f / 3}));
}

class ModelArtifactTest : public testing::TempFolderTest {
 protected:
  ModelArtifactTest() : TempFolderTest("model") {}
  ModelArtifact Sample() {
    ModelArtifact model;
    model.hyperparameters.job = JobKind::kFactorizationMachines;
    model.hyperparameters.num_factors = 2;
    model.features = {3, 10, 99};
    model.weights = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    model.bias = {0.5f};
    return model;
  }
};

TEST_F(ModelArtifactTest, RoundTrips) {
  Sample().Write(folder_);
  const ModelArtifact back = ModelArtifact::Read(folder_);
  EXPECT_EQ(back.hyperparameters.job, JobKind::kFactorizationMachines);
  EXPECT_EQ(back.hyperparameters.num_factors, 2);
  EXPECT_EQ(back.features, Sample().features);
  EXPECT_EQ(back.weights, Sample().weights);
  EXPECT_EQ(back.bias, Sample().bias);
}

TEST_F(ModelArtifactTest, RefusesAFlippedByteNamingTheFile) {
  Sample().Write(folder_);
  const std::string path = folder_ + "/weights.bin";
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(60);
  char byte = 0;
  file.read(&byte, 1);
  file.seekp(60);
  byte ^= 0x10;
  file.write(&byte, 1);
  file.close();
  try {
    ModelArtifact::Read(folder_);
    FAIL() << "a corrupted model was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

TEST_F(ModelArtifactTest, RefusesATruncatedFile) {
  Sample().Write(folder_);
  const std::string path = folder_ + "/weights.bin";
  ASSERT_EQ(truncate(path.c_str(), 40), 0);
  try {
    ModelArtifact::Read(folder_);
    FAIL() << "a truncated model was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// A folder's storage that runs `after_header` right after the first read of
// weights.bin's header (after every one with `every_time`): a trainer
// publishing a new model between the reader's two reads of that file.
class ReplacedAfterHeader : public Storage {
 public:
  ReplacedAfterHeader(const std::string& dir, std::function<void()> after_header,
                      bool every_time = false)
      : inner_(OpenStorage(dir)), after_header_(std::move(after_header)), every_time_(every_time) {}
  void Put(const std::string& key, std::string_view data) override { inner_->Put(key, data); }
  std::string Get(const std::string& key) override { return inner_->Get(key); }
  std::string GetRange(const std::string& key, uint64_t offset, uint64_t length) override {
    std::string bytes = inner_->GetRange(key, offset, length);
    if (key == "weights.bin" && length == kModelHeaderBytes && after_header_) {
      after_header_();
      if (!every_time_) after_header_ = nullptr;
    }
    return bytes;
  }
  std::vector<ObjectInfo> List(const std::string& prefix) override { return inner_->List(prefix); }
  void Delete(const std::string& key) override { inner_->Delete(key); }
  std::string UriOf(const std::string& key) const override { return inner_->UriOf(key); }

 private:
  std::unique_ptr<Storage> inner_;
  std::function<void()> after_header_;
  bool every_time_;
};

TEST_F(ModelArtifactTest, AModelReplacedBetweenTheHeaderAndTheWholeIsReadAsOneVersion) {
  Sample().Write(folder_);
  ModelArtifact larger = Sample();
  larger.features = {3, 10, 99, 500, 7000};
  larger.weights = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  ModelArtifact smaller = Sample();
  smaller.features = {4};
  smaller.weights = {1, 2, 3};
  for (const ModelArtifact& next : {larger, smaller}) {
    Sample().Write(folder_);
    ReplacedAfterHeader storage(folder_, [&] { next.Write(folder_); });
    const ModelArtifact read = ModelArtifact::Read(folder_, storage);
    EXPECT_EQ(read.features, next.features);
    EXPECT_EQ(read.weights, next.weights);
  }
}

TEST_F(ModelArtifactTest, AModelReplacedBetweenEveryTwoReadsIsRefusedAfterAFewAttempts) {
  ModelArtifact larger = Sample();
  larger.features = {3, 10, 99, 500};
  larger.weights = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Sample().Write(folder_);
  int replaced = 0;
  ReplacedAfterHeader storage(
      folder_, [&] { (++replaced % 2 == 1 ? larger : Sample()).Write(folder_); },
      /*every_time=*/true);
  const std::string error = testing::ErrorOf([&] { ModelArtifact::Read(folder_, storage); });
  EXPECT_TRUE(testing::Contains(error, "weights.bin: its header describes")) << error;
  EXPECT_TRUE(testing::Contains(error, "the file keeps changing while it is read")) << error;
  EXPECT_EQ(replaced, 5);
}

TEST_F(ModelArtifactTest, SaysWhenThereIsNoModel) {
  EXPECT_THROW(ModelArtifact::Read(folder_ + "/nothing"), Error);
}

// model.json: every hyperparameter in force, read back by ModelArtifact::Read.
class ModelJsonTest : public ModelArtifactTest {
 protected:
  // A model whose every hyperparameter differs from its default.
  ModelArtifact Unusual() {
    ModelArtifact model = Sample();
    Hyperparameters& h = model.hyperparameters;
    h.predictor_type = PredictorType::kRegressor;
    h.feature_dim = 5000;
    h.mini_batch_size = 64;
    h.epochs = 9;
    h.seed = (uint64_t{1} << 63) + 1;  // more than a double holds
    h.early_stopping_patience = 7;
    h.early_stopping_tolerance = 0.25;
    h.loss = "huber_loss";
    h.margin = 2.5f;
    h.quantile = 0.75f;
    h.loss_insensitivity = 0.125f;
    h.huber_delta = 3.5f;
    h.f_beta = 2.0;
    h.accuracy_top_k = 5;
    h.threshold = 0.25;
    h.selection_criterion = SelectionCriterion::kRecallAtTargetPrecision;
    h.target_precision = 0.625;
    h.target_recall = 0.375;
    h.num_calibration_samples = 1234;
    h.weights_optimizer.name = "adagrad";
    h.weights_optimizer.learning_rate = 0.03f;
    h.weights_optimizer.l1 = 0.001f;
    h.weights_optimizer.groups = {{0, 1, 0.02f, 0.001f, 0.5f}, {1, 3, 0.04f, 0.0f, 0.25f}};
    h.weights_optimizer.epsilon = 1e-6f;
    h.weights_optimizer.rescale_grad = 0.5f;
    h.weights_optimizer.clip_gradient = 4.0f;
    h.weights_optimizer.momentum = 0.375f;
    h.weights_optimizer.rmsprop_decay = 0.625f;
    h.weights_optimizer.schedule = {true, 17, 0.875f, 1e-4f};
    h.weights_optimizer.staleness_aware = true;
    h.bias_optimizer.name = "adagrad";
    h.bias_optimizer.learning_rate = 0.07f;
    h.factors_init = {"uniform", 0.0f, 0.05f};
    h.bias_init = {"constant", 0.3f, 0.01f};
    model.data_format = DataFormat::kCsv;
    model.libsvm_zero_based = true;
    model.hyperparameter_json = R"({"epochs":9,"train":"data/train"})";
    return model;
  }
  void WriteModelJson(const std::string& text) {
    testing::WriteFile(folder_ + "/model.json", text);
  }
  std::string ModelJsonText() { return testing::ReadFileOrEmpty(folder_ + "/model.json"); }
  // The message ModelArtifact::Read throws, or "" if it reads the model.
  std::string ReadError() {
    try {
      ModelArtifact::Read(folder_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  // model.json with the first `from` replaced by `to`.
  void Edit(const std::string& from, const std::string& to) {
    std::string text = ModelJsonText();
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << text;
    WriteModelJson(text.replace(at, from.size(), to));
  }
};

TEST_F(ModelJsonTest, RestoresEveryHyperparameter) {
  const ModelArtifact written = Unusual();
  written.Write(folder_);
  const ModelArtifact back = ModelArtifact::Read(folder_);
  const Hyperparameters& h = back.hyperparameters;
  const Hyperparameters& w = written.hyperparameters;
  EXPECT_EQ(h.predictor_type, PredictorType::kRegressor);
  EXPECT_EQ(h.feature_dim, 5000u);
  EXPECT_EQ(h.mini_batch_size, 64);
  EXPECT_EQ(h.epochs, 9);
  EXPECT_EQ(h.seed, (uint64_t{1} << 63) + 1);
  EXPECT_EQ(h.early_stopping_patience, 7);
  EXPECT_EQ(h.early_stopping_tolerance, 0.25);
  EXPECT_EQ(h.loss, "huber_loss");
  EXPECT_EQ(h.margin, 2.5f);
  EXPECT_EQ(h.quantile, 0.75f);
  EXPECT_EQ(h.loss_insensitivity, 0.125f);
  EXPECT_EQ(h.huber_delta, 3.5f);
  EXPECT_EQ(h.f_beta, 2.0);
  EXPECT_EQ(h.accuracy_top_k, 5);
  EXPECT_EQ(h.threshold, 0.25);
  EXPECT_EQ(h.selection_criterion, SelectionCriterion::kRecallAtTargetPrecision);
  EXPECT_EQ(h.target_precision, 0.625);
  EXPECT_EQ(h.target_recall, 0.375);
  EXPECT_EQ(h.num_calibration_samples, 1234u);
  EXPECT_EQ(h.weights_optimizer.name, "adagrad");
  EXPECT_EQ(h.weights_optimizer.learning_rate, 0.03f);
  EXPECT_EQ(h.weights_optimizer.l1, 0.001f);
  EXPECT_EQ(h.weights_optimizer.epsilon, 1e-6f);
  EXPECT_EQ(h.weights_optimizer.rescale_grad, 0.5f);
  EXPECT_EQ(h.weights_optimizer.clip_gradient, 4.0f);
  EXPECT_EQ(h.weights_optimizer.momentum, 0.375f);
  EXPECT_EQ(h.weights_optimizer.rmsprop_decay, 0.625f);
  EXPECT_TRUE(h.weights_optimizer.schedule.enabled);
  EXPECT_EQ(h.weights_optimizer.schedule.step, 17);
  EXPECT_EQ(h.weights_optimizer.schedule.factor, 0.875f);
  EXPECT_EQ(h.weights_optimizer.schedule.minimum_rate, 1e-4f);
  EXPECT_TRUE(h.weights_optimizer.staleness_aware);
  ASSERT_EQ(h.weights_optimizer.groups.size(), 2u);
  EXPECT_EQ(h.weights_optimizer.groups[1].begin, 1);
  EXPECT_EQ(h.weights_optimizer.groups[1].end, 3);
  EXPECT_EQ(h.weights_optimizer.groups[1].learning_rate, 0.04f);
  EXPECT_EQ(h.weights_optimizer.groups[1].l2, 0.25f);
  EXPECT_EQ(h.bias_optimizer.learning_rate, 0.07f);
  EXPECT_EQ(h.factors_init.method, w.factors_init.method);
  EXPECT_EQ(h.factors_init.scale, 0.05f);
  EXPECT_EQ(h.bias_init.value, 0.3f);
  EXPECT_EQ(back.data_format, DataFormat::kCsv);
  EXPECT_TRUE(back.libsvm_zero_based);
  EXPECT_EQ(back.hyperparameter_json, written.hyperparameter_json);
}

TEST_F(ModelJsonTest, RecordsTheFormatVersionResolvedDefaultsAndTheFlags) {
  ModelArtifact model = Sample();  // every hyperparameter at its default
  model.hyperparameter_json = R"({"epochs":5,"use_bias":true})";
  model.Write(folder_);
  const JsonValue json = ParseJson(ModelJsonText(), "model.json");
  EXPECT_EQ(json.Find("format_version")->AsNumber(), 2);
  EXPECT_EQ(json.Find("threshold")->AsNumber(), 0.5);  // a logistic model's probability
  EXPECT_EQ(json.Find("data_format")->AsString(), "libsvm");
  EXPECT_FALSE(json.Find("libsvm_zero_based")->AsBool());
  const JsonValue& h = *json.Find("hyperparameters");
  EXPECT_EQ(h.Find("loss")->AsString(), "logistic");  // auto, resolved
  EXPECT_EQ(h.Find("margin")->AsNumber(), 1.0);
  EXPECT_EQ(h.Find("epochs")->AsNumber(), 15);  // SageMaker's linear learner default
  EXPECT_EQ(h.Find("weights_optimizer")->Find("learning_rate")->AsNumber(), 0.01);
  EXPECT_EQ(h.Find("bias_init")->Find("method")->AsString(), "constant");
  EXPECT_EQ(json.Find("flags")->Find("epochs")->AsNumber(), 5);
  EXPECT_TRUE(json.Find("flags")->Find("use_bias")->AsBool());
}

TEST_F(ModelJsonTest, AHingeLossModelsThresholdIsZero) {
  ModelArtifact model = Sample();
  model.hyperparameters.job = JobKind::kLinearLearner;
  model.hyperparameters.loss = "hinge_loss";
  model.weights = {1, 2, 3};
  model.Write(folder_);
  EXPECT_EQ(ParseJson(ModelJsonText(), "model.json").Find("threshold")->AsNumber(), 0.0);
  EXPECT_EQ(ModelArtifact::Read(folder_).hyperparameters.DecisionThreshold(), 0.0);
}

TEST_F(ModelJsonTest, RefusesACorruptDocumentNamingTheFileAndTheOffset) {
  Sample().Write(folder_);
  WriteModelJson(R"({"format_version":2,"job" "factorization_machines"})");
  EXPECT_EQ(ReadError(), folder_ + "/model.json: byte 26: expected ':' but found '\"'");
}

TEST_F(ModelJsonTest, RefusesAPredictorTypeWeightsBinDoesNotHold) {
  Sample().Write(folder_);
  Edit(R"("predictor_type":"binary_classifier")", R"("predictor_type":"regressor")");
  const std::string error = ReadError();
  EXPECT_TRUE(testing::Contains(error, folder_ + "/model.json")) << error;
  EXPECT_TRUE(testing::Contains(error,
                                "field predictor_type 'regressor' but weights.bin holds "
                                "binary_classifier"))
      << error;
}

TEST_F(ModelJsonTest, RefusesAWidthWeightsBinDoesNotHold) {
  Sample().Write(folder_);
  Edit(R"("num_factors":2)", R"("num_factors":3)");
  EXPECT_TRUE(testing::Contains(ReadError(), "field num_factors 3 but weights.bin holds 2"))
      << ReadError();
}

TEST_F(ModelJsonTest, RefusesASelectedModelBeyondTheModelsTrained) {
  Sample().Write(folder_);
  Edit(R"("selected_model":0)", R"("selected_model":3)");
  const std::string error = ReadError();
  EXPECT_TRUE(testing::Contains(error, folder_ + "/model.json: field selected_model 3 is not one "
                                                 "of the 1 trained_models"))
      << error;
}

TEST_F(ModelJsonTest, RefusesAFieldOfTheWrongTypeNamingIt) {
  Sample().Write(folder_);
  Edit(R"("margin":1)", R"("margin":"wide")");
  const std::string error = ReadError();
  EXPECT_TRUE(testing::Contains(error, folder_ + "/model.json: field hyperparameters.margin"))
      << error;
  EXPECT_TRUE(testing::Contains(error, "is a string, not a number")) << error;
}

TEST_F(ModelJsonTest, RefusesAValueOutOfRangeNamingTheFile) {
  Sample().Write(folder_);
  Edit(R"("margin":1)", R"("margin":-1)");
  const std::string error = ReadError();
  EXPECT_TRUE(testing::Contains(error, folder_ + "/model.json: ")) << error;
  EXPECT_TRUE(testing::Contains(error, "margin")) << error;
}

TEST_F(ModelJsonTest, RefusesANewerFormatVersion) {
  Sample().Write(folder_);
  Edit(R"("format_version":2)", R"("format_version":3)");
  EXPECT_TRUE(
      testing::Contains(ReadError(), "field format_version 3: this keel reads versions 1 to 2"))
      << ReadError();
}

// The model.json Keel wrote before it recorded everything: the facts and the
// flags set, as strings, and the loss.
TEST_F(ModelJsonTest, LoadsAFormatVersion1ModelWithDefaults) {
  ModelArtifact model = Sample();
  model.hyperparameters.job = JobKind::kLinearLearner;
  model.weights = {1, 2, 3};
  model.Write(folder_);
  WriteModelJson(
      R"({"format_version":1,"job":"linear_learner","predictor_type":"binary_classifier",)"
      R"("num_classes":1,"num_factors":0,"use_bias":true,"weight_width":1,"features":3,)"
      R"("weights_file":"weights.bin","hyperparameters":{"epochs":"3","loss":"hinge_loss",)"
      R"("margin":"1"}})");
  const ModelArtifact back = ModelArtifact::Read(folder_);
  EXPECT_EQ(back.hyperparameters.loss, "hinge_loss");
  EXPECT_EQ(back.hyperparameters.epochs, 15);  // the default
  EXPECT_EQ(back.hyperparameters.DecisionThreshold(), 0.0);
  EXPECT_EQ(back.data_format, DataFormat::kLibsvm);
}

TEST_F(ModelJsonTest, LoadsAModelWithoutModelJsonWithDefaults) {
  Sample().Write(folder_);
  ASSERT_EQ(unlink((folder_ + "/model.json").c_str()), 0);
  const ModelArtifact back = ModelArtifact::Read(folder_);
  EXPECT_EQ(back.hyperparameters.loss, "auto");
  EXPECT_EQ(back.weights, Sample().weights);
}

// --- PredictionMetrics: the job's metrics under SageMaker's names ---

TEST(PredictionMetrics, FactorizationMachineNamesItsLossBinaryClassificationCrossEntropy) {
  Hyperparameters fm;
  fm.job = JobKind::kFactorizationMachines;
  const MetricSet metrics = PredictionMetrics(fm, {0.8f, 0.4f}, {1, 0});
  // -(log 0.8 + log 0.6) / 2
  EXPECT_NEAR(metrics.at("binary_classification_cross_entropy"),
              -(std::log(0.8) + std::log(0.6)) / 2, 1e-6);
  EXPECT_EQ(metrics.at("binary_classification_cross_entropy"), metrics.at("objective_loss"));
}

TEST(PredictionMetrics, LinearLearnerHasNoCrossEntropyNameOfItsOwn) {
  const MetricSet metrics = PredictionMetrics(Hyperparameters(), {0.8f, 0.4f}, {1, 0});
  EXPECT_EQ(metrics.count("binary_classification_cross_entropy"), 0u);
}

TEST(PredictionMetrics, BinaryFBetaHonoursFBeta) {
  // Both predicted positive against labels 1, 0: P = 1/2, R = 1.
  // F_2 = 5 P R / (4 P + R) = 5/6; F_0.5 = 1.25 P R / (0.25 P + R) = 5/9.
  Hyperparameters h;
  h.f_beta = 2.0;
  EXPECT_DOUBLE_EQ(PredictionMetrics(h, {0.9f, 0.8f}, {1, 0}).at("binary_f_beta"), 5.0 / 6.0);
  h.f_beta = 0.5;
  EXPECT_DOUBLE_EQ(PredictionMetrics(h, {0.9f, 0.8f}, {1, 0}).at("binary_f_beta"), 5.0 / 9.0);
}

TEST(PredictionMetrics, MulticlassHonoursAccuracyTopKAndFBeta) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  // The label (class 2) ranks second: in the top 2, not the top 1.
  const std::vector<float> probabilities = {0.5f, 0.1f, 0.4f};
  h.accuracy_top_k = 1;
  EXPECT_EQ(PredictionMetrics(h, probabilities, {2}).at("multiclass_top_k_accuracy"), 0.0);
  h.accuracy_top_k = 2;
  EXPECT_EQ(PredictionMetrics(h, probabilities, {2}).at("multiclass_top_k_accuracy"), 1.0);
  // Class 0: predicted once, never the label (P = R = 0); class 1: predicted
  // and labelled once each, right (P = R = 1); class 2: labelled once, missed
  // (P = 0, R = 0). Macro F-beta is 1/3 whatever beta is.
  h.f_beta = 3.0;
  const std::vector<float> two = {0.6f, 0.3f, 0.1f, 0.1f, 0.8f, 0.1f};
  EXPECT_DOUBLE_EQ(PredictionMetrics(h, two, {2, 1}).at("macro_f_beta"), 1.0 / 3.0);
}

TEST(PredictionMetrics, RegressorReportsSageMakersRegressionNames) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kRegressor;
  const MetricSet metrics = PredictionMetrics(h, {1.0f, 3.0f}, {2.0f, 3.0f});
  for (const char* name : {"objective_loss", "mse", "rmse", "absolute_loss"}) {
    EXPECT_EQ(metrics.count(name), 1u) << name;
  }
}

// --- PredictionTally: PredictionMetrics a batch at a time (keel predict) ---

TEST(PredictionTally, MulticlassMetricsOverBatchesAreThoseOfTheWholeSet) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  PredictionTally tally(h);
  // Batch 1: label 0 predicted (rank 1); batch 2: label 2 ranked second,
  // label 1 ranked third. Accuracy 1/3, top-3 accuracy 1, dcg the mean of
  // 1, 1/log2(3) and 1/log2(4) = 1/2.
  tally.Add({0.7f, 0.2f, 0.1f}, {0});
  tally.Add({0.5f, 0.1f, 0.4f, 0.6f, 0.1f, 0.3f}, {2, 1});
  EXPECT_EQ(tally.examples(), 3u);
  const MetricSet metrics = tally.Metrics();
  EXPECT_DOUBLE_EQ(metrics.at("multiclass_accuracy"), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("multiclass_top_k_accuracy"), 1.0);
  EXPECT_DOUBLE_EQ(metrics.at("dcg"), (1.0 + 1.0 / std::log2(3.0) + 0.5) / 3.0);
  EXPECT_NEAR(metrics.at("objective_loss"), -(std::log(0.7) + std::log(0.4) + std::log(0.1)) / 3.0,
              1e-6);
}

TEST(PredictionTally, ABadLabelIsNamedByItsPlaceInTheWholeSet) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  PredictionTally tally(h);
  tally.Add({0.7f, 0.2f, 0.1f, 0.7f, 0.2f, 0.1f}, {0, 1});
  try {
    tally.Add({0.7f, 0.2f, 0.1f}, {5});
    FAIL() << "label 5 of 3 classes was accepted";
  } catch (const Error& error) {
    EXPECT_TRUE(testing::Contains(error.what(), "label 5 of example 2 is not a class id"))
        << error.what();
  }
}

TEST(PredictionTally, BinaryMetricsOverBatchesAreThoseOfTheWholeSet) {
  // Probabilities 0.9, 0.2 | 0.6 against labels 1, 0 | 0: accuracy 2/3, and
  // the positive outscores both negatives (AUC 1).
  PredictionTally tally{Hyperparameters()};
  tally.Add({0.9f, 0.2f}, {1, 0});
  tally.Add({0.6f}, {0});
  const MetricSet metrics = tally.Metrics();
  EXPECT_DOUBLE_EQ(metrics.at("binary_classification_accuracy"), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(metrics.at("roc_auc_score"), 1.0);
}

TEST(PredictionTally, NoExampleIsAnError) {
  Hyperparameters h;
  h.predictor_type = PredictorType::kMulticlassClassifier;
  h.num_classes = 3;
  EXPECT_THROW(PredictionTally(h).Metrics(), Error);
}

// Five rows of one feature, x = 1..5 (labels 0 0 1 1 1), scored by an
// artifact with weight 1 and bias -3: scores x - 3, probabilities
// sigmoid(-2), sigmoid(-1), 1/2, sigmoid(1), sigmoid(2).
class EvaluatorTest : public testing::TempFolderTest {
 protected:
  EvaluatorTest() : TempFolderTest("evaluator") {
    testing::WriteFile(channel_, "0 1:1\n0 1:2\n1 1:3\n1 1:4\n1 1:5\n");
    hyperparameters_.mini_batch_size = 2;
    model_.hyperparameters = hyperparameters_;
    model_.features = {0};  // libsvm's index 1, read 0-based
    model_.weights = {1.0f};
    model_.bias = {-3.0f};
  }
  const std::string channel_ = folder_ + "/data.libsvm";
  Hyperparameters hyperparameters_;
  ModelArtifact model_;
};

double Sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

TEST_F(EvaluatorTest, PredictReturnsTheFirstRowsOfAChannelWithTheirMeanLoss) {
  CpuModel backend(hyperparameters_);
  Evaluator evaluator(nullptr, &backend, &backend, hyperparameters_,
                      WithLabelRule(ReaderOptions(), hyperparameters_));
  // Three rows: the cut falls inside the second minibatch of two.
  const ChannelPredictions rows = evaluator.Predict(channel_, &model_, 3);
  ASSERT_EQ(rows.predictions.size(), 3u);
  EXPECT_NEAR(rows.predictions[0], Sigmoid(-2), 1e-6);
  EXPECT_NEAR(rows.predictions[1], Sigmoid(-1), 1e-6);
  EXPECT_NEAR(rows.predictions[2], 0.5, 1e-6);
  EXPECT_EQ(rows.labels, (std::vector<float>{0, 0, 1}));
  // Logistic losses: -log(1 - p) for the two negatives, -log p for the positive.
  const double loss = -(std::log(1 - Sigmoid(-2)) + std::log(1 - Sigmoid(-1)) + std::log(0.5)) / 3;
  EXPECT_NEAR(rows.mean_loss, loss, 1e-6);
  EXPECT_EQ(evaluator.Predict(channel_, &model_).labels.size(), 5u);  // no limit: every row
}

TEST_F(EvaluatorTest, EvaluateLabelsByTheArtifactsThreshold) {
  CpuModel backend(hyperparameters_);
  Evaluator evaluator(nullptr, &backend, &backend, hyperparameters_,
                      WithLabelRule(ReaderOptions(), hyperparameters_));
  // At 0.5 the positive at probability 1/2 is called negative: 4 of 5.
  EXPECT_EQ(evaluator.Evaluate(channel_, &model_).at("binary_classification_accuracy"), 0.8);
  model_.hyperparameters.threshold = 0.4;  // between sigmoid(-1) and 1/2: all 5
  EXPECT_EQ(evaluator.Evaluate(channel_, &model_).at("binary_classification_accuracy"), 1.0);
}

TEST_F(EvaluatorTest, AHeldChannelIsScoredFromItsBatchesUntilItsFileChanges) {
  CpuModel backend(hyperparameters_);
  Evaluator evaluator(nullptr, &backend, &backend, hyperparameters_,
                      WithLabelRule(ReaderOptions(), hyperparameters_));
  // Without HoldChannels nothing is held.
  const ChannelPredictions text = evaluator.PredictModels(channel_, &model_)[0];
  EXPECT_FALSE(evaluator.holds_a_channel());
  evaluator.HoldChannels(1 << 20);
  // Only PredictModels (validation) holds a channel, read to its end.
  evaluator.Predict(channel_, &model_);
  EXPECT_FALSE(evaluator.holds_a_channel());
  EXPECT_EQ(evaluator.PredictModels(channel_, &model_)[0].predictions, text.predictions);
  ASSERT_TRUE(evaluator.holds_a_channel());
  // Rewritten in place to other rows of the same size, its modification
  // time put back: the same key, so the held batches (the old rows) are
  // scored, by any pass, whole or cut (the cut from a copy: the next pass is
  // whole).
  struct stat before {};
  ASSERT_EQ(stat(channel_.c_str(), &before), 0);
  {
    std::ofstream rewrite(channel_, std::ios::in | std::ios::out);
    rewrite << "1 1:5\n1 1:4\n0 1:3\n0 1:2\n0 1:1\n";
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, channel_.c_str(), times, 0), 0);
  EXPECT_EQ(evaluator.Predict(channel_, &model_, 3).labels, (std::vector<float>{0, 0, 1}));
  EXPECT_EQ(evaluator.Predict(channel_, &model_).labels, text.labels);
  EXPECT_EQ(evaluator.PredictModels(channel_, &model_)[0].labels, text.labels);
  // Any change of the file's version reads the text again: a Predict pass
  // reads it without holding it, a PredictModels pass holds it anew.
  const struct timespec later[2] = {before.st_atim,
                                    {before.st_mtim.tv_sec + 10, before.st_mtim.tv_nsec}};
  ASSERT_EQ(utimensat(AT_FDCWD, channel_.c_str(), later, 0), 0);
  const std::vector<float> rewritten = {1, 1, 0, 0, 0};
  EXPECT_EQ(evaluator.Predict(channel_, &model_).labels, rewritten);
  EXPECT_TRUE(evaluator.holds_a_channel());  // the old input's, untouched by Predict
  EXPECT_EQ(evaluator.PredictModels(channel_, &model_)[0].labels, rewritten);
  EXPECT_TRUE(evaluator.holds_a_channel());
  // A validation pass over input past the bound lets go of what was held.
  evaluator.HoldChannels(16);
  const struct timespec latest[2] = {before.st_atim,
                                     {before.st_mtim.tv_sec + 20, before.st_mtim.tv_nsec}};
  ASSERT_EQ(utimensat(AT_FDCWD, channel_.c_str(), latest, 0), 0);
  EXPECT_EQ(evaluator.PredictModels(channel_, &model_)[0].labels, rewritten);
  EXPECT_FALSE(evaluator.holds_a_channel());
}

}  // namespace
}  // namespace keel
