// num_models: several models trained side by side in one pass. Their
// settings, their tables, their backend, their artifact and their losses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kv/keys.h"
#include "models/linear.h"
#include "models/losses.h"
#include "random_batch.h"
#include "test_util.h"
#include "worker/artifact_index.h"
#include "worker/compute_backend_factory.h"
#include "worker/cpu_model.h"
#include "worker/model_dump.h"
#include "worker/model_selection.h"
#include "worker/model_variants.h"
#include "worker/multi_model_backend.h"
#include "worker/training_cursor.h"

namespace keel {
namespace {

Hyperparameters Job(JobKind job, PredictorType type, int models) {
  Hyperparameters h;
  h.job = job;
  h.predictor_type = type;
  h.num_classes = 3;
  h.num_factors = 2;
  h.weights_optimizer.name = "adagrad";
  h.weights_optimizer.learning_rate = 0.1f;
  h.bias_optimizer = h.weights_optimizer;
  return WithModels(h, models);
}

std::vector<float> Random(std::mt19937_64* random, size_t count) {
  std::uniform_real_distribution<float> value(-0.5f, 0.5f);
  std::vector<float> numbers(count);
  for (float& number : numbers) number = value(*random);
  return numbers;
}

TEST(SpreadModels, ModelZeroIsTheSettingsGivenAndTheOthersDiffer) {
  OptimizerOptions sgd;
  sgd.name = "sgd";
  const std::vector<ModelVariant> variants = SpreadModels(8, sgd, JobKind::kLinearLearner);
  ASSERT_EQ(variants.size(), 8u);
  EXPECT_EQ(variants[0].learning_rate_scale, 1.0f);
  EXPECT_EQ(variants[0].wd, 0.0f);
  EXPECT_EQ(variants[0].l1, 0.0f);
  std::set<float> scales;
  for (size_t k = 1; k < variants.size(); ++k) {
    EXPECT_GE(variants[k].learning_rate_scale, 0.1f) << k;
    EXPECT_LT(variants[k].learning_rate_scale, 10.0f) << k;
    EXPECT_TRUE(variants[k].wd == 0.0f || (variants[k].wd >= 1e-7f && variants[k].wd < 1e-3f));
    scales.insert(variants[k].learning_rate_scale);
  }
  EXPECT_EQ(scales.size(), 7u) << "every other model has a rate of its own";
  EXPECT_GT(variants[3].l1, 0.0f) << "sgd takes an L1 penalty: every third model has one";
}

TEST(SpreadModels, IsDeterministicAndGivesAdamNoL1) {
  OptimizerOptions adam;
  adam.name = "adam";
  const std::vector<ModelVariant> first = SpreadModels(32, adam, JobKind::kLinearLearner);
  const std::vector<ModelVariant> second = SpreadModels(32, adam, JobKind::kLinearLearner);
  for (size_t k = 0; k < first.size(); ++k) {
    EXPECT_EQ(first[k].learning_rate_scale, second[k].learning_rate_scale);
    EXPECT_EQ(first[k].wd, second[k].wd);
    EXPECT_EQ(first[k].l1, 0.0f) << k;
  }
}

TEST(SpreadModels, AFactorizationMachinesLastModelIsLinearWithTheSettingsGiven) {
  Hyperparameters h;
  h.job = JobKind::kFactorizationMachines;
  h.num_factors = 4;
  h.factors_init = InitializerSpec{"normal", 0.0f, 0.01f};
  h = WithModels(h, 4);
  for (int k = 0; k < 3; ++k) EXPECT_FALSE(h.variants[k].linear_only) << k;
  const ModelVariant& linear = h.variants[3];
  EXPECT_TRUE(linear.linear_only);
  EXPECT_EQ(linear.learning_rate_scale, 1.0f);
  EXPECT_EQ(linear.wd, 0.0f);
  EXPECT_EQ(h.Model(3).factors_init.method, "constant");
  EXPECT_EQ(h.Model(3).factors_init.value, 0.0f);
  EXPECT_EQ(h.Model(0).factors_init.method, "normal");
  // The servers start model 3's factor columns at zero, the others' at random.
  const TableSpec weights = TablesFor(h).at(kWeightTable);
  std::vector<float> row(static_cast<size_t>(weights.width));
  weights.initializer(12345, row.data(), weights.width);
  for (int f = 1; f <= 4; ++f) EXPECT_EQ(row[3 * 5 + f], 0.0f) << f;
  EXPECT_NE(row[0 * 5 + 1], 0.0f);
  // One model alone is the settings given: a factorization machine.
  EXPECT_FALSE(WithModels(h, 1).variants[0].linear_only);
  // The linear learner has no such model.
  h.job = JobKind::kLinearLearner;
  for (const ModelVariant& variant : WithModels(h, 4).variants) EXPECT_FALSE(variant.linear_only);
}

TEST(SpreadModels,
     AFactorizationMachinesMiddleRateFtrlModelsTakeAThousandthOfTheBetaAndAFactorsPenalty) {
  Hyperparameters h;
  h.job = JobKind::kFactorizationMachines;
  h.num_factors = 4;
  h.weights_optimizer.name = "adagrad";
  h.weights_optimizer.ftrl_beta = 2.0f;
  h.weights_optimizer.groups = {{0, 1, 1.0f, 0.0f, 0.0f}, {1, 5, 1.0f, 0.0f, 0.0f}};
  h.bias_optimizer = h.weights_optimizer;
  h.bias_optimizer.groups.clear();
  const std::vector<ModelVariant> spread = WithModels(h, 8).variants;  // no ftrl: adagrad
  h.weights_optimizer.name = "ftrl";
  h = WithModels(h, 8);
  int fast = 0;
  for (int k = 0; k < 8; ++k) {
    const ModelVariant& variant = h.variants[k];
    const float rate = spread[k].learning_rate_scale;
    const bool middle = k > 0 && !variant.linear_only && rate >= 0.5f && rate < 2.0f;
    EXPECT_EQ(variant.ftrl_beta_scale, middle ? 0.001f : 1.0f) << k;
    EXPECT_EQ(variant.factors_wd, middle ? 0.1f : 0.0f) << k;
    EXPECT_FLOAT_EQ(variant.learning_rate_scale, middle ? rate * 0.2f : rate) << k;
    if (!middle) continue;
    ++fast;
    // Model k's own optimizers: the beta scaled for the weights' groups and
    // the bias, the penalty on the factors' columns alone.
    const Hyperparameters model = h.Model(k);
    EXPECT_FLOAT_EQ(model.weights_optimizer.ftrl_beta, 0.002f) << k;
    EXPECT_FLOAT_EQ(model.bias_optimizer.ftrl_beta, 0.002f) << k;
    ASSERT_EQ(model.weights_optimizer.groups.size(), 2u);
    for (const auto& group : model.weights_optimizer.groups) {
      EXPECT_FLOAT_EQ(group.ftrl_beta, 0.002f) << k;
    }
    EXPECT_FLOAT_EQ(model.weights_optimizer.groups[0].l2, variant.wd) << k;
    EXPECT_FLOAT_EQ(model.weights_optimizer.groups[1].l2, variant.wd + 0.1f) << k;
    // The servers' table gives each model's columns that model's beta.
    const TableSpec weights = TablesFor(h).at(kWeightTable);
    ASSERT_EQ(weights.optimizer.groups.size(), 16u);
    for (const auto& group : weights.optimizer.groups) {
      const int m = group.begin / 5;
      EXPECT_FLOAT_EQ(group.ftrl_beta, 2.0f * h.variants[m].ftrl_beta_scale) << group.begin;
    }
  }
  EXPECT_EQ(fast, 2) << "models 1 and 4 of 8 (spread rates x1.72 and x0.88)";
  // Not when the beta was given (every model's), nor for adam (a regressor's),
  // nor for the linear learner.
  h.fast_beta_models = false;
  for (const ModelVariant& variant : WithModels(h, 8).variants) {
    EXPECT_EQ(variant.ftrl_beta_scale, 1.0f);
  }
  h.fast_beta_models = true;
  h.weights_optimizer.name = "adam";
  for (const ModelVariant& variant : WithModels(h, 8).variants) {
    EXPECT_EQ(variant.ftrl_beta_scale, 1.0f);
  }
  h.weights_optimizer.name = "ftrl";
  h.job = JobKind::kLinearLearner;
  for (const ModelVariant& variant : WithModels(h, 8).variants) {
    EXPECT_EQ(variant.ftrl_beta_scale, 1.0f);
    EXPECT_EQ(variant.factors_wd, 0.0f);
  }
}

TEST(ParseNumModels, TakesAutoAndOneToThirtyTwoOnly) {
  const Hyperparameters h;
  EXPECT_EQ(ParseNumModels("auto", h), AutoNumModels(h));
  EXPECT_EQ(ParseNumModels("1", h), 1);
  EXPECT_EQ(ParseNumModels("32", h), 32);
  for (const char* bad : {"0", "33", "-1", "2.5", "", "many"}) {
    try {
      ParseNumModels(bad, h);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--num_models"), std::string::npos) << e.what();
    }
  }
}

TEST(Hyperparameters, ModelKAppliesItsVariantToBothOptimizers) {
  Hyperparameters h = Job(JobKind::kLinearLearner, PredictorType::kBinaryClassifier, 1);
  h.num_models = 2;
  h.variants = {ModelVariant{}, ModelVariant{0.5f, 1e-4f, 2e-5f}};
  const Hyperparameters second = h.Model(1);
  EXPECT_EQ(second.num_models, 1);
  EXPECT_FLOAT_EQ(second.weights_optimizer.learning_rate, 0.05f);
  EXPECT_FLOAT_EQ(second.weights_optimizer.l2, 1e-4f);
  EXPECT_FLOAT_EQ(second.weights_optimizer.l1, 2e-5f);
  EXPECT_FLOAT_EQ(second.bias_optimizer.learning_rate, 0.05f);
  EXPECT_FLOAT_EQ(second.bias_optimizer.l2, 0.0f) << "the bias keeps its own penalty";
  EXPECT_THROW(h.Model(2), Error);
}

TEST(TablesFor, GivesEachModelItsColumnsWithItsOwnRates) {
  Hyperparameters h = Job(JobKind::kFactorizationMachines, PredictorType::kBinaryClassifier, 1);
  h.weights_optimizer.groups = {{0, 1, 0.1f, 0.0f, 0.0f}, {1, 3, 0.01f, 0.0f, 1e-3f}};
  h.num_models = 2;
  h.variants = {ModelVariant{}, ModelVariant{2.0f, 1e-5f, 0.0f}};
  const auto tables = TablesFor(h);
  const TableSpec& weights = tables.at(kWeightTable);
  EXPECT_EQ(weights.width, 2 * 3);
  ASSERT_EQ(weights.optimizer.groups.size(), 4u);
  const auto& groups = weights.optimizer.groups;
  EXPECT_EQ(groups[0].begin, 0);
  EXPECT_EQ(groups[0].end, 1);
  EXPECT_FLOAT_EQ(groups[1].learning_rate, 0.01f);
  EXPECT_EQ(groups[2].begin, 3);
  EXPECT_EQ(groups[2].end, 4);
  EXPECT_FLOAT_EQ(groups[2].learning_rate, 0.2f);
  EXPECT_EQ(groups[3].begin, 4);
  EXPECT_EQ(groups[3].end, 6);
  EXPECT_FLOAT_EQ(groups[3].learning_rate, 0.02f);
  EXPECT_FLOAT_EQ(groups[3].l2, 1e-3f + 1e-5f);
  const TableSpec& bias = tables.at(kBiasTable);
  EXPECT_EQ(bias.width, 2);
  ASSERT_EQ(bias.optimizer.groups.size(), 2u);
  EXPECT_FLOAT_EQ(bias.optimizer.groups[1].learning_rate, 0.2f);
}

TEST(TablesFor, OneModelHasTheTablesOfBefore) {
  const Hyperparameters h = Job(JobKind::kLinearLearner, PredictorType::kBinaryClassifier, 1);
  const auto tables = TablesFor(h);
  EXPECT_EQ(tables.at(kWeightTable).width, 1);
  EXPECT_TRUE(tables.at(kWeightTable).optimizer.groups.empty());
  EXPECT_TRUE(tables.at(kBiasTable).optimizer.groups.empty());
}

// The models' backend computes, for each model, exactly what a backend of one
// model computes on that model's columns.
void ExpectEachModelAsAlone(JobKind job, PredictorType type) {
  const int models = 3;
  const Hyperparameters h = Job(job, type, models);
  std::mt19937_64 random(7);
  const PreparedBatch batch = testing::RandomBatch(40, 30, 5, h.classes() > 1 ? h.classes() : 1,
                                                   type == PredictorType::kRegressor, &random);
  MultiModelBackend all(h, std::make_unique<CpuModel>(h.Model(0)));
  CpuModel one(h.Model(0));
  const size_t keys = batch.keys.size();
  const size_t width = static_cast<size_t>(h.weight_width());
  const size_t bias_width = static_cast<size_t>(h.bias_width());
  ASSERT_EQ(all.weight_width(), static_cast<int>(models * width));
  const std::vector<float> weights = Random(&random, keys * models * width);
  const std::vector<float> bias = Random(&random, models * bias_width);
  std::vector<float> gradients, bias_gradient, predictions;
  const double total =
      all.Gradients(batch, weights.data(), bias.data(), &gradients, &bias_gradient);
  all.Predict(batch, weights.data(), bias.data(), &predictions);
  const std::vector<double> losses = all.LastModelLosses(total);
  ASSERT_EQ(losses.size(), static_cast<size_t>(models));
  double sum = 0;
  for (int k = 0; k < models; ++k) {
    std::vector<float> own(keys * width), own_gradients, own_bias_gradient, own_predictions;
    for (size_t key = 0; key < keys; ++key) {
      std::copy_n(weights.begin() + (key * models + k) * width, width, own.begin() + key * width);
    }
    const float* own_bias = bias.data() + k * bias_width;
    const double loss =
        one.Gradients(batch, own.data(), own_bias, &own_gradients, &own_bias_gradient);
    one.Predict(batch, own.data(), own_bias, &own_predictions);
    EXPECT_EQ(losses[k], loss) << k;
    sum += loss;
    for (size_t key = 0; key < keys; ++key) {
      for (size_t c = 0; c < width; ++c) {
        ASSERT_EQ(gradients[(key * models + k) * width + c], own_gradients[key * width + c]);
      }
    }
    for (size_t c = 0; c < bias_width; ++c) {
      EXPECT_EQ(bias_gradient[k * bias_width + c], own_bias_gradient[c]);
    }
    const size_t classes = static_cast<size_t>(h.classes());
    for (size_t row = 0; row < batch.batch.rows(); ++row) {
      for (size_t c = 0; c < classes; ++c) {
        ASSERT_EQ(predictions[(row * models + k) * classes + c],
                  own_predictions[row * classes + c]);
      }
    }
  }
  EXPECT_DOUBLE_EQ(total, sum);
}

TEST(MultiModelBackend, ComputesEachModelAsItsOwnBackendWould) {
  ExpectEachModelAsAlone(JobKind::kLinearLearner, PredictorType::kBinaryClassifier);
  ExpectEachModelAsAlone(JobKind::kLinearLearner, PredictorType::kMulticlassClassifier);
  ExpectEachModelAsAlone(JobKind::kFactorizationMachines, PredictorType::kRegressor);
}

TEST(CpuModel, IsWhatMakeComputeBackendGivesSeveralFactorizationMachines) {
  const Hyperparameters h = Job(JobKind::kFactorizationMachines, PredictorType::kRegressor, 4);
  const auto backend = MakeComputeBackend("cpu", 1, h);
  EXPECT_NE(dynamic_cast<CpuModel*>(backend.get()), nullptr) << backend->name();
  EXPECT_EQ(backend->num_models(), 4);
  EXPECT_EQ(backend->weight_width(), 4 * 3);
  EXPECT_EQ(backend->bias_width(), 4);
  EXPECT_EQ(backend->prediction_width(), 4);
  EXPECT_EQ(MakeComputeBackend("cpu", 1, h.Model(2))->num_models(), 1);
}

// Weights for the rows of `keys` keys of a factorization machine's models side
// by side, as each model's variant starts them: a linear-only model's factors
// at zero, the others' at their own scale.
std::vector<float> FmWeights(const Hyperparameters& h, size_t keys, std::mt19937_64* random) {
  const int models = h.num_models;
  const int width = h.weight_width();
  std::vector<float> weights = Random(random, keys * models * width);
  for (int m = 0; m < models; ++m) {
    const bool linear_only = h.variants[m].linear_only;
    const float scale = 0.5f + 0.25f * static_cast<float>(m);
    for (size_t key = 0; key < keys; ++key) {
      float* row = weights.data() + (key * models + m) * width;
      for (int f = 1; f < width; ++f) row[f] = linear_only ? 0.0f : row[f] * scale;
    }
  }
  return weights;
}

// Model m's columns of rows of several models side by side (keys x width).
std::vector<float> ModelColumns(const std::vector<float>& all, size_t keys, int models, int width,
                                int m) {
  std::vector<float> own(keys * width);
  for (size_t key = 0; key < keys; ++key) {
    std::copy_n(all.begin() + (key * models + m) * width, width, own.begin() + key * width);
  }
  return own;
}

// The CPU backend's one pass over several factorization machines (features
// outer, models inner) gives each model what a backend of that model alone
// (built from its own settings, Model(m)) gives on its columns: on sparse
// batches bit for bit (one thread and three; 3 models of k = 2, and the
// default's 8 of k = 4, whose rows of 40 floats take a pass compiled for that
// width); on dense batches (three threads: the Eigen pass) up to float
// rounding. The variants differ per model: rates and penalties (the
// servers'), and the last model's factors at zero (linear-only).
void ExpectFactorizationMachinesAsEachAlone(PredictorType type, int models, int k, int threads,
                                            bool dense) {
  Hyperparameters given = Job(JobKind::kFactorizationMachines, type, 1);
  given.num_factors = k;
  const Hyperparameters h = WithModels(given, models);
  ASSERT_TRUE(h.variants.back().linear_only);
  ASSERT_NE(h.variants[1].learning_rate_scale, h.variants[2].learning_rate_scale);
  std::mt19937_64 random(23 + models + k);
  const bool regression = type == PredictorType::kRegressor;
  const PreparedBatch batch = dense ? testing::RandomDenseBatch(60, 12, 1, regression, &random)
                                    : testing::RandomBatch(70, 50, 8, 1, regression, &random);
  const auto together = MakeComputeBackend("cpu", threads, h);
  ASSERT_NE(dynamic_cast<CpuModel*>(together.get()), nullptr);
  const size_t keys = batch.keys.size();
  const int width = h.weight_width();
  ASSERT_EQ(together->weight_width(), models * width);
  const std::vector<float> weights = FmWeights(h, keys, &random);
  const std::vector<float> bias = Random(&random, models);
  std::vector<float> gradients, bias_gradient, predictions;
  const double total =
      together->Gradients(batch, weights.data(), bias.data(), &gradients, &bias_gradient);
  const std::vector<double> losses = together->LastModelLosses(total);
  together->Predict(batch, weights.data(), bias.data(), &predictions);
  ASSERT_EQ(losses.size(), static_cast<size_t>(models));
  ASSERT_EQ(gradients.size(), keys * models * width);
  ASSERT_EQ(bias_gradient.size(), static_cast<size_t>(models));
  ASSERT_EQ(predictions.size(), batch.batch.rows() * models);
  const auto near = [dense](double expected) {
    return dense ? 1e-5 * (1 + std::abs(expected)) : 0;
  };
  double sum = 0;
  for (int m = 0; m < models; ++m) {
    SCOPED_TRACE(::testing::Message() << "model " << m);
    CpuModel alone(h.Model(m), threads);
    const std::vector<float> own = ModelColumns(weights, keys, models, width, m);
    std::vector<float> own_gradients, own_bias_gradient, own_predictions;
    const double loss =
        alone.Gradients(batch, own.data(), bias.data() + m, &own_gradients, &own_bias_gradient);
    alone.Predict(batch, own.data(), bias.data() + m, &own_predictions);
    sum += loss;
    EXPECT_NEAR(losses[m], loss, near(loss));
    const std::vector<float> got = ModelColumns(gradients, keys, models, width, m);
    for (size_t c = 0; c < got.size(); ++c) {
      ASSERT_NEAR(got[c], own_gradients[c], near(own_gradients[c])) << "gradient " << c;
    }
    if (h.variants[m].linear_only) {
      for (size_t key = 0; key < keys; ++key) {
        for (int f = 1; f < width; ++f) ASSERT_EQ(got[key * width + f], 0.0f);
      }
    }
    EXPECT_NEAR(bias_gradient[m], own_bias_gradient[0], near(own_bias_gradient[0]));
    for (size_t row = 0; row < batch.batch.rows(); ++row) {
      ASSERT_NEAR(predictions[row * models + m], own_predictions[row], near(own_predictions[row]))
          << "row " << row;
    }
  }
  EXPECT_NEAR(total, sum, near(sum));
}

TEST(CpuModel, ComputesSeveralFactorizationMachinesInOnePassAsEachAlone) {
  for (const PredictorType type : {PredictorType::kBinaryClassifier, PredictorType::kRegressor}) {
    for (const auto& [models, k] : {std::pair{3, 2}, {8, 4}}) {
      for (const int threads : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << models << " models of k = " << k << ", " << threads
                                          << " thread(s), type " << static_cast<int>(type));
        ExpectFactorizationMachinesAsEachAlone(type, models, k, threads, false);
      }
      SCOPED_TRACE(::testing::Message() << models << " models, dense");
      ExpectFactorizationMachinesAsEachAlone(type, models, k, 3, true);
    }
  }
}

// The one pass gives what the wrapper that runs one model per pass gives, bit
// for bit, on a sparse batch.
TEST(CpuModel, ComputesSeveralFactorizationMachinesExactlyAsTheWrapper) {
  for (const int threads : {1, 3}) {
    Hyperparameters given =
        Job(JobKind::kFactorizationMachines, PredictorType::kBinaryClassifier, 1);
    given.num_factors = 4;
    const Hyperparameters h = WithModels(given, 8);
    std::mt19937_64 random(5);
    const PreparedBatch batch = testing::RandomBatch(80, 60, 10, 1, false, &random);
    CpuModel together(h, threads);
    MultiModelBackend apart(h, std::make_unique<CpuModel>(h.Model(0), threads));
    const std::vector<float> weights = FmWeights(h, batch.keys.size(), &random);
    const std::vector<float> bias = Random(&random, 8);
    std::vector<float> g1, b1, g2, b2, p1, p2;
    const double l1 = together.Gradients(batch, weights.data(), bias.data(), &g1, &b1);
    const double l2 = apart.Gradients(batch, weights.data(), bias.data(), &g2, &b2);
    EXPECT_EQ(g1, g2);
    EXPECT_EQ(b1, b2);
    EXPECT_EQ(together.LastModelLosses(l1), apart.LastModelLosses(l2));
    together.Predict(batch, weights.data(), bias.data(), &p1);
    apart.Predict(batch, weights.data(), bias.data(), &p2);
    EXPECT_EQ(p1, p2);
  }
}

// The CPU backend computes a linear learner's models in one pass, with the
// same arithmetic as each model alone: the wrapper's results, bit for bit
// (sparse batches; one thread and three; 3 models, and the default's 8, whose
// rows of 8 floats take a pass compiled for that width).
TEST(CpuModel, ComputesSeveralLinearModelsTogetherExactlyAsEachAlone) {
  for (const PredictorType type :
       {PredictorType::kBinaryClassifier, PredictorType::kMulticlassClassifier,
        PredictorType::kRegressor}) {
    for (const auto& [threads, models] : {std::pair{1, 3}, {3, 3}, {1, 8}, {3, 8}}) {
      SCOPED_TRACE(::testing::Message() << threads << " thread(s), " << models << " models");
      const Hyperparameters h = Job(JobKind::kLinearLearner, type, models);
      std::mt19937_64 random(11);
      const PreparedBatch batch = testing::RandomBatch(50, 40, 6, h.classes() > 1 ? h.classes() : 1,
                                                       type == PredictorType::kRegressor, &random);
      const auto together = MakeComputeBackend("cpu", threads, h);
      MultiModelBackend apart(h, std::make_unique<CpuModel>(h.Model(0), threads));
      ASSERT_EQ(together->weight_width(), apart.weight_width());
      const std::vector<float> weights =
          Random(&random, batch.keys.size() * static_cast<size_t>(together->weight_width()));
      const std::vector<float> bias = Random(&random, together->bias_width());
      std::vector<float> g1, b1, g2, b2, p1, p2;
      const double l1 = together->Gradients(batch, weights.data(), bias.data(), &g1, &b1);
      const double l2 = apart.Gradients(batch, weights.data(), bias.data(), &g2, &b2);
      EXPECT_EQ(g1, g2);
      EXPECT_EQ(b1, b2);
      EXPECT_EQ(together->LastModelLosses(l1), apart.LastModelLosses(l2));
      together->Predict(batch, weights.data(), bias.data(), &p1);
      apart.Predict(batch, weights.data(), bias.data(), &p2);
      EXPECT_EQ(p1, p2);
    }
  }
}

// A linear learner's pass, computed from the per-example functions the CUDA
// kernels share (LinearScores, ExampleLoss, LinearGradients) on each row's
// gathered weights, each row's gradients added into its keys in row order:
// what CpuModel gives, bit for bit (gradients, loss and predictions), on one
// thread and three, with the AVX2 pass allowed (`wide_vectors`) or not.
void ExpectLinearPassAsTheSharedFunctions(PredictorType type, int classes, int models,
                                          bool use_bias, bool wide_vectors) {
  Hyperparameters h = Job(JobKind::kLinearLearner, type, models);
  h.num_classes = classes;
  h.use_bias = use_bias;
  const int scores_per_model = h.classes();
  const size_t width = static_cast<size_t>(models * scores_per_model);
  std::mt19937_64 random(13);
  const PreparedBatch batch =
      testing::RandomBatch(60, 40, 6, scores_per_model, type == PredictorType::kRegressor, &random);
  const size_t keys = batch.keys.size(), rows = batch.batch.rows();
  const std::vector<float> weights = Random(&random, keys * width);
  const std::vector<float> bias = Random(&random, width);
  const LossFunction loss = h.loss_function();
  std::vector<float> expected(keys * width, 0.0f), expected_bias(width, 0.0f);
  std::vector<float> expected_predictions(rows * width);
  std::vector<double> model_losses(models, 0.0);  // each summed in row order
  for (size_t r = 0; r < rows; ++r) {
    const size_t begin = batch.batch.row_offsets[r];
    const int nnz = static_cast<int>(batch.batch.row_offsets[r + 1] - begin);
    const float* values = batch.batch.values.data() + begin;
    std::vector<float> params(nnz * width), scores(width), score_gradient(width);
    for (int j = 0; j < nnz; ++j) {
      std::copy_n(weights.begin() + batch.positions[begin + j] * width, width,
                  params.begin() + j * width);
    }
    LinearScores(params.data(), values, nnz, static_cast<int>(width),
                 use_bias ? bias.data() : nullptr, scores.data());
    for (int m = 0; m < models; ++m) {
      const size_t first = static_cast<size_t>(m * scores_per_model);
      model_losses[m] += ExampleLoss(loss, scores.data() + first, scores_per_model,
                                     batch.batch.labels[r], score_gradient.data() + first,
                                     expected_predictions.data() + r * width + first);
    }
    for (float& gradient : score_gradient) gradient /= static_cast<float>(rows);
    std::vector<float> row_gradients(nnz * width, 0.0f), row_bias(width, 0.0f);
    LinearGradients(values, nnz, static_cast<int>(width), score_gradient.data(),
                    row_gradients.data(), row_bias.data());
    for (int j = 0; j < nnz; ++j) {
      for (size_t c = 0; c < width; ++c) {
        expected[batch.positions[begin + j] * width + c] += row_gradients[j * width + c];
      }
    }
    for (size_t c = 0; c < width; ++c) expected_bias[c] += row_bias[c];
  }
  double expected_loss = 0.0;
  for (const double model_loss : model_losses) expected_loss += model_loss;
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << threads << " thread(s)");
    CpuModel model(h, threads, wide_vectors);
    ASSERT_EQ(static_cast<size_t>(model.weight_width()), width);
    std::vector<float> gradients, bias_gradient;
    const double loss =
        model.Gradients(batch, weights.data(), bias.data(), &gradients, &bias_gradient);
    ASSERT_EQ(gradients.size(), expected.size());
    EXPECT_EQ(0, std::memcmp(gradients.data(), expected.data(), sizeof(float) * expected.size()));
    if (use_bias) {
      EXPECT_EQ(bias_gradient, expected_bias);
    }
    EXPECT_EQ(loss, expected_loss);
    std::vector<float> predictions;
    model.Predict(batch, weights.data(), bias.data(), &predictions);
    EXPECT_EQ(predictions, expected_predictions);
  }
}

// Rows of 1 and 8 floats take a pass of their own (LinearRowsOf), others the
// generic one: both against the shared functions, with and without a bias.
void ExpectLinearPassesAsTheSharedFunctions(bool wide_vectors) {
  for (const bool use_bias : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "use_bias " << use_bias);
    for (const auto& [type, classes, models] : {std::tuple{PredictorType::kBinaryClassifier, 2, 1},
                                                {PredictorType::kBinaryClassifier, 2, 8},
                                                {PredictorType::kRegressor, 2, 8},
                                                {PredictorType::kMulticlassClassifier, 8, 1},
                                                {PredictorType::kMulticlassClassifier, 3, 2}}) {
      SCOPED_TRACE(::testing::Message() << classes << " classes, " << models << " models");
      ExpectLinearPassAsTheSharedFunctions(type, classes, models, use_bias, wide_vectors);
    }
  }
}

TEST(CpuModel, ComputesALinearLearnersRowsAsTheSharedFunctions) {
  ExpectLinearPassesAsTheSharedFunctions(/*wide_vectors=*/false);
}

// Rows of 8 floats also take a copy of their pass compiled for AVX2 where the
// CPU has it: the same bits.
TEST(CpuModel, ComputesALinearLearnersRowsAsTheSharedFunctionsWithTheAvx2Pass) {
  if (!CpuHasAvx2()) {
    GTEST_SKIP() << "this CPU has no AVX2: the AVX2 pass is never taken here";
  }
  ExpectLinearPassesAsTheSharedFunctions(/*wide_vectors=*/true);
}

TEST(SliceModel, TakesModelKsColumnsAndSettings) {
  ModelArtifact all;
  all.hyperparameters = Job(JobKind::kLinearLearner, PredictorType::kMulticlassClassifier, 2);
  all.features = {3, 9};
  // Per feature: model 0's 3 classes, then model 1's.
  all.weights = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  all.bias = {-1, -2, -3, -4, -5, -6};
  const ModelArtifact second = SliceModel(all, 1);
  EXPECT_EQ(second.features, all.features);
  EXPECT_EQ(second.weights, (std::vector<float>{4, 5, 6, 10, 11, 12}));
  EXPECT_EQ(second.bias, (std::vector<float>{-4, -5, -6}));
  EXPECT_EQ(second.trained_models, 2);
  EXPECT_EQ(second.selected_model, 1);
  EXPECT_EQ(second.hyperparameters.num_models, 1);
  EXPECT_FLOAT_EQ(second.hyperparameters.weights_optimizer.learning_rate,
                  0.1f * all.hyperparameters.variants[1].learning_rate_scale);
  EXPECT_THROW(SliceModel(all, 2), Error);
  all.weights.pop_back();
  EXPECT_THROW(SliceModel(all, 0), Error);
}

TEST(JoinModels, PutsSlicedModelsBackSideBySide) {
  ModelArtifact all;
  all.hyperparameters = Job(JobKind::kFactorizationMachines, PredictorType::kRegressor, 2);
  all.features = {1, 4};
  all.weights = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // per feature: 2 models x [w, v1, v2]
  all.bias = {0.5f, -0.5f};
  const ModelArtifact joined =
      JoinModels({SliceModel(all, 0), SliceModel(all, 1)}, all.hyperparameters);
  EXPECT_EQ(joined.weights, all.weights);
  EXPECT_EQ(joined.bias, all.bias);
  EXPECT_EQ(joined.hyperparameters.num_models, 2);
  ModelArtifact other = SliceModel(all, 1);
  other.features = {1, 5};
  EXPECT_THROW(JoinModels({SliceModel(all, 0), other}, all.hyperparameters), Error);
  EXPECT_THROW(JoinModels({SliceModel(all, 0)}, all.hyperparameters), Error);
}

ModelScore Scored(double score) {
  ModelScore scored;
  scored.score = score;
  return scored;
}

TEST(ModelSelection, AModelIsClearlyBetterOnlyByMoreThanTheStandardErrorsAsked) {
  Hyperparameters h;
  h.job = JobKind::kFactorizationMachines;
  std::vector<float> labels;
  for (int row = 0; row < 208; ++row) labels.push_back(static_cast<float>(row % 2));
  const std::vector<float> baseline(labels.size(), 0.5f);
  // Right on every row, by a wide margin: clearly better.
  std::vector<float> sharp;
  for (const float label : labels) sharp.push_back(label > 0.5f ? 0.9f : 0.1f);
  EXPECT_TRUE(ClearlyBetter(h, sharp, baseline, labels));
  // Better on average, by luck on 2 rows of 208: not clearly.
  std::vector<float> lucky = baseline;
  lucky[0] = lucky[2] = 0.9f;
  EXPECT_FALSE(ClearlyBetter(h, lucky, baseline, labels));
  // A classifier right on every one of fewer than 200 rows tells nothing.
  const std::vector<float> few_labels(labels.begin(), labels.begin() + 40);
  const std::vector<float> few_sharp(sharp.begin(), sharp.begin() + 40);
  EXPECT_FALSE(ClearlyBetter(h, few_sharp, std::vector<float>(40, 0.5f), few_labels));
  EXPECT_FALSE(ClearlyBetter(h, baseline, baseline, labels));  // the same is not better
  // A regressor by squared error, on few rows too.
  h.predictor_type = PredictorType::kRegressor;
  EXPECT_TRUE(ClearlyBetter(h, {1.0f, 2.0f, 3.0f}, {2.0f, 3.0f, 4.0f}, {1.1f, 2.1f, 2.9f}));
  EXPECT_FALSE(ClearlyBetter(h, {2.0f, 3.0f, 4.0f}, {1.0f, 2.0f, 3.0f}, {1.1f, 2.1f, 2.9f}));
  // Squared errors lower by 3, 1, 1 and higher by 1: a mean of -1 and a
  // standard error of sqrt(2/3) = 0.82, clearly better by one standard error,
  // not by the two an interaction model needs over the linear one.
  const std::vector<float> zeros(4, 0.0f);
  EXPECT_TRUE(ClearlyBetter(h, {1.0f, 0.0f, 0.0f, 1.0f}, {2.0f, 1.0f, 1.0f, 0.0f}, zeros));
  EXPECT_FALSE(ClearlyBetter(h, {1.0f, 0.0f, 0.0f, 1.0f}, {2.0f, 1.0f, 1.0f, 0.0f}, zeros,
                             InteractionStandardErrors(7)));
  // Lower by 3, 1, 1 and 1: a mean of -1.5, a standard error of 0.5.
  EXPECT_TRUE(ClearlyBetter(h, {1.0f, 0.0f, 0.0f, 0.0f}, {2.0f, 1.0f, 1.0f, 1.0f}, zeros,
                            InteractionStandardErrors(7)));
  // Another loss has no per-row loss here: the selection stands.
  h.loss = "absolute_loss";
  EXPECT_TRUE(ClearlyBetter(h, {2.0f}, {1.0f}, {1.0f}));
}

TEST(ModelSelection, TheBestOfSeveralInteractionModelsMustLeadByMoreStandardErrors) {
  // The normal tail beyond z, times the models, is the tail beyond 1
  // (0.158655): z = 1.40961 for two models, 2.00158 for seven, 2.56776 for
  // 31 (scipy.stats.norm.isf(norm.sf(1) / m)).
  EXPECT_EQ(InteractionStandardErrors(0), 1.0);
  EXPECT_EQ(InteractionStandardErrors(1), 1.0);
  EXPECT_NEAR(InteractionStandardErrors(2), 1.40961, 1e-4);
  EXPECT_NEAR(InteractionStandardErrors(7), 2.00158, 1e-4);
  EXPECT_NEAR(InteractionStandardErrors(31), 2.56776, 1e-4);
}

TEST(ModelSelection, PicksTheHighestScoreOrLowestLossAndTheFirstAmongEquals) {
  EXPECT_EQ(BestModel({Scored(-0.5), Scored(-0.4), Scored(-0.4)}), 1);
  EXPECT_EQ(BestModel({Scored(NAN), Scored(-0.9)}), 1);
  EXPECT_EQ(BestModel({Scored(0.7), Scored(NAN)}), 0);
  EXPECT_EQ(BestOnTraining({0.3, NAN, 0.2, 0.2}), 2);
  EXPECT_EQ(BestOnTraining({NAN, 0.7}), 1);
  EXPECT_EQ(OfModel(3, {{"validation:auc", 0.7}}).count("model_3:validation:auc"), 1u);
}

TEST(ModelSelection, AFastBetaModelIsKeptOnlyOnTenThousandRowsAndWhenClearlyBetter) {
  Hyperparameters h;
  h.job = JobKind::kFactorizationMachines;
  h.weights_optimizer.name = "ftrl";
  h = WithModels(h, 8);
  ASSERT_TRUE(IsFastBeta(h.variants[1]));
  ASSERT_FALSE(IsFastBeta(h.variants[3]));
  // Model 1 (fast-beta) scores best, model 3 next; the rest far behind.
  std::vector<ModelScore> scores(8, Scored(-0.9));
  scores[1] = Scored(-0.40);
  scores[3] = Scored(-0.45);
  const auto choose = [&](size_t rows, float fast_right, float other_right) {
    std::vector<float> labels(rows), fast(rows), other(rows), rest(rows, 0.5f);
    for (size_t i = 0; i < rows; ++i) {
      labels[i] = static_cast<float>(i % 2);
      fast[i] = labels[i] > 0.5f ? fast_right : 1.0f - fast_right;
      other[i] = labels[i] > 0.5f ? other_right : 1.0f - other_right;
    }
    std::vector<const std::vector<float>*> predictions(8, &rest);
    predictions[1] = &fast;
    predictions[3] = &other;
    return BestOnValidation(h, scores, predictions, labels);
  };
  EXPECT_EQ(choose(kLeastRowsForFastBeta, 0.8f, 0.6f), 1) << "clearly better on enough rows";
  EXPECT_EQ(choose(kLeastRowsForFastBeta - 1, 0.8f, 0.6f), 3) << "too few rows";
  EXPECT_EQ(choose(kLeastRowsForFastBeta, 0.6f, 0.6f), 3) << "no better, row for row";
  // A loss with no per-row comparison (hinge) keeps the others' best.
  h.loss = "hinge_loss";
  EXPECT_EQ(choose(kLeastRowsForFastBeta, 0.8f, 0.6f), 3);
  h.loss = "auto";
  // With no other model scored, the fast-beta one stands.
  std::vector<ModelScore> saved = scores;
  for (int k : {0, 2, 3, 5, 6, 7}) scores[k] = Scored(NAN);
  EXPECT_EQ(choose(10, 0.8f, 0.6f), 1);
  scores = saved;
  // A model of the others scoring best stands on any rows.
  scores[3] = Scored(-0.3);
  EXPECT_EQ(choose(10, 0.8f, 0.6f), 3);
  // Without validation a fast-beta model does not compete on training loss.
  EXPECT_EQ(BestOnTraining({0.5, 0.1, 0.4, 0.3, 0.1, 0.6, 0.7, 0.8}, h.variants), 3);
  EXPECT_EQ(BestOnTraining({0.5, 0.1, 0.4, 0.3, 0.1, 0.6, 0.7, 0.8}), 1);
}

TEST(TrainingCursor, CarriesEveryModelsLoss) {
  const proto::WorkerCursor cursor = CursorAt(2, 5, 500, {1.5, 2.5, 3.5});
  EXPECT_EQ(cursor.loss(), 1.5);
  EXPECT_EQ(LossesOf(cursor, 3), (ModelLosses{1.5, 2.5, 3.5}));
  // A cursor of one model read by a job of two: the other starts from 0.
  EXPECT_EQ(LossesOf(CursorAt(2, 5, 500, {1.5}), 2), (ModelLosses{1.5, 0.0}));
}

// A dump's rows, as the servers hold them (by mixed key), put in artifact
// order in place: each feature keeps its own weights, whatever the cycles
// of the permutation.
TEST(ModelDump, SortsTheDumpedRowsByFeatureInPlace) {
  std::mt19937_64 random(7);
  for (const int width : {1, 3}) {
    std::vector<uint64_t> features(5000);
    for (size_t i = 0; i < features.size(); ++i) features[i] = random() >> 20;
    std::sort(features.begin(), features.end());
    features.erase(std::unique(features.begin(), features.end()), features.end());
    // Row i's weights are i, i + 0.25, ...: each tells its feature's rank.
    std::vector<std::pair<Key, size_t>> by_key;
    for (size_t i = 0; i < features.size(); ++i) by_key.emplace_back(MixKey(features[i]), i);
    std::sort(by_key.begin(), by_key.end());
    std::vector<Key> keys;
    std::vector<float> weights;
    for (const auto& [key, rank] : by_key) {
      keys.push_back(key);
      for (int j = 0; j < width; ++j) weights.push_back(static_cast<float>(rank) + 0.25f * j);
    }
    SortDumpedRowsByFeature(&keys, &weights, width);
    ASSERT_EQ(keys, features) << "width " << width;
    for (size_t i = 0; i < features.size(); ++i) {
      for (int j = 0; j < width; ++j) {
        ASSERT_EQ(weights[i * width + j], static_cast<float>(i) + 0.25f * j) << "row " << i;
      }
    }
  }
  std::vector<Key> keys = {1, 2};
  std::vector<float> three = {1, 2, 3};
  EXPECT_EQ(testing::ErrorOf([&] { SortDumpedRowsByFeature(&keys, &three, 1); }),
            "a dump of 2 keys holds 3 weights, not 1 a key");
}

// The index scoring from an artifact uses: every feature finds its row, a
// feature listed twice its last, an unseen one none.
TEST(ArtifactIndex, FindsEachFeaturesRowByItsMixedKey) {
  std::vector<uint64_t> features;
  for (uint64_t f = 0; f < 3000; ++f) features.push_back(f * 7919 + 3);
  features.push_back(3);  // feature 3 again, as the last row
  const ArtifactIndex index(features);
  for (size_t row = 1; row + 1 < features.size(); ++row) {
    ASSERT_EQ(index.Find(MixKey(features[row])), row) << "feature " << features[row];
  }
  EXPECT_EQ(index.Find(MixKey(3)), features.size() - 1);
  for (uint64_t unseen : {uint64_t{4}, uint64_t{7919}, ~uint64_t{0} >> 1}) {
    EXPECT_EQ(index.Find(MixKey(unseen)), ArtifactIndex::kNoRow) << "feature " << unseen;
  }
  const std::vector<uint64_t> none;
  EXPECT_EQ(ArtifactIndex(none).Find(MixKey(0)), ArtifactIndex::kNoRow);
}

}  // namespace
}  // namespace keel
