// The training jobs' optimizer flags (SageMaker's names) as the servers'
// tables receive them.
#include "cli/job_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "kv/optimizer.h"
#include "worker/hyperparameters.h"

namespace keel {
namespace {

// Each test sets flags as a command line would; the fixture restores them.
class OptimizerFlags : public testing::Test {
 protected:
  OptimizerFlags() { Set("job", "linear_learner"); }
  static void Set(const char* flag, const std::string& value) {
    ASSERT_FALSE(gflags::SetCommandLineOption(flag, value.c_str()).empty()) << flag;
  }

  // Each of `bad` (flag, value), set alone, makes HyperparametersFromFlags
  // throw an Error that names the flag.
  static void ExpectEachRefusedNamingTheFlag(
      const std::vector<std::pair<const char*, const char*>>& bad) {
    for (const auto& [flag, value] : bad) {
      gflags::FlagSaver restore;
      Set(flag, value);
      try {
        HyperparametersFromFlags();
        ADD_FAILURE() << "--" << flag << "=" << value << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("--") + flag), std::string::npos)
            << e.what();
      }
    }
  }

 private:
  gflags::FlagSaver saver_;
};

TEST_F(OptimizerFlags, EpochsDefaultTo15ForTheLinearLearnerAnd5ForAFactorizationMachine) {
  EXPECT_EQ(HyperparametersFromFlags().epochs, 15);
  Set("job", "factorization_machines");
  EXPECT_EQ(HyperparametersFromFlags().epochs, 5);
  Set("epochs", "15");  // given: it wins, even at the linear learner's default
  EXPECT_EQ(HyperparametersFromFlags().epochs, 15);
}

TEST_F(OptimizerFlags, MinibatchesInFlightAreOneForBulkSynchronousAndTwoOtherwise) {
  EXPECT_EQ(MinibatchesInFlightFromFlags(StalenessFromFlags()), 2);  // inf, auto
  Set("staleness", "3");
  EXPECT_EQ(MinibatchesInFlightFromFlags(StalenessFromFlags()), 2);
  Set("staleness", "0");
  EXPECT_EQ(MinibatchesInFlightFromFlags(StalenessFromFlags()), 1);
  Set("minibatches_in_flight", "3");  // given: any consistency model
  EXPECT_EQ(MinibatchesInFlightFromFlags(StalenessFromFlags()), 3);
  for (const char* bad : {"0", "9", "two", ""}) {
    Set("minibatches_in_flight", bad);
    EXPECT_THROW(MinibatchesInFlightFromFlags(StalenessFromFlags()), Error) << bad;
  }
}

TEST_F(OptimizerFlags, AutoOptimizerIsAdam) {
  EXPECT_EQ(HyperparametersFromFlags().weights_optimizer.name, "adam");
}

TEST_F(OptimizerFlags, MomentumReachesSgd) {
  Set("optimizer", "sgd");
  EXPECT_EQ(HyperparametersFromFlags().weights_optimizer.momentum, 0.0f);  // auto
  Set("momentum", "0.9");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().weights_optimizer.momentum, 0.9f);
}

TEST_F(OptimizerFlags, BiasLrMultIsAMultipleOfTheLearningRate) {
  Set("learning_rate", "0.02");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().bias_optimizer.learning_rate, 0.02f);  // auto: 1
  Set("bias_lr_mult", "5");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().bias_optimizer.learning_rate, 0.1f);
}

TEST_F(OptimizerFlags, BiasLrStaysAnAbsoluteRate) {
  Set("learning_rate", "0.02");
  Set("bias_lr", "0.3");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().bias_optimizer.learning_rate, 0.3f);
}

TEST_F(OptimizerFlags, BiasWdMultIsAMultipleOfWd) {
  Set("wd", "0.01");
  EXPECT_EQ(HyperparametersFromFlags().bias_optimizer.l2, 0.0f);  // auto: no penalty
  Set("bias_wd_mult", "2");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().bias_optimizer.l2, 0.02f);
}

TEST_F(OptimizerFlags, InitMethodSetsTheWeightsInitializer) {
  EXPECT_EQ(HyperparametersFromFlags().linear_init.method, "constant");  // not set: zeros
  Set("init_method", "uniform");
  Set("init_scale", "0.5");
  EXPECT_EQ(HyperparametersFromFlags().linear_init.method, "uniform");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().linear_init.scale, 0.5f);
  Set("init_method", "normal");
  Set("init_sigma", "0.2");
  EXPECT_EQ(HyperparametersFromFlags().linear_init.method, "normal");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().linear_init.scale, 0.2f);
}

TEST_F(OptimizerFlags, InitBiasIsTheConstantInitialBias) {
  Set("init_bias", "0.25");
  const InitializerSpec bias = HyperparametersFromFlags().bias_init;
  EXPECT_EQ(bias.method, "constant");
  EXPECT_FLOAT_EQ(bias.value, 0.25f);
}

TEST_F(OptimizerFlags, ScheduleIsOnWithKeelsAutoValues) {
  const OptimizerOptions::Schedule schedule = HyperparametersFromFlags().weights_optimizer.schedule;
  EXPECT_TRUE(schedule.enabled);
  EXPECT_EQ(schedule.step, 100);
  EXPECT_FLOAT_EQ(schedule.factor, 0.99f);
  EXPECT_FLOAT_EQ(schedule.minimum_rate, 1e-5f);
  EXPECT_TRUE(HyperparametersFromFlags().bias_optimizer.schedule.enabled);
}

TEST_F(OptimizerFlags, ScheduleFlagsReachBothTables) {
  Set("lr_scheduler_step", "7");
  Set("lr_scheduler_factor", "0.5");
  Set("lr_scheduler_minimum_lr", "0.001");
  for (const auto& [table, spec] : TablesFor(HyperparametersFromFlags())) {
    if (table == kControlTable) {
      EXPECT_FALSE(spec.optimizer.schedule.enabled);  // sums must not decay
      continue;
    }
    EXPECT_TRUE(spec.optimizer.schedule.enabled);
    EXPECT_EQ(spec.optimizer.schedule.step, 7);
    EXPECT_FLOAT_EQ(spec.optimizer.schedule.factor, 0.5f);
    EXPECT_FLOAT_EQ(spec.optimizer.schedule.minimum_rate, 0.001f);
  }
  Set("use_lr_scheduler", "false");
  EXPECT_FALSE(HyperparametersFromFlags().weights_optimizer.schedule.enabled);
}

TEST_F(OptimizerFlags, AdmissionAndEvictionReachTheWeightsTableOnly) {
  Set("admit_after", "3");
  Set("admit_sketch_mib", "2");
  Set("evict_after", "50");
  for (const auto& [table, spec] : TablesFor(HyperparametersFromFlags())) {
    const bool weights = table == kWeightTable;
    EXPECT_EQ(spec.admit_after, weights ? 3u : 0u) << table;
    EXPECT_EQ(spec.evict_after, weights ? 50u : 0u) << table;
    if (weights) {
      EXPECT_EQ(spec.admit_sketch_bytes, uint64_t{2} << 20);
    }
  }
  Set("admit_after", "65536");
  std::string error;
  try {
    HyperparametersFromFlags();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("--admit_after 65536 is not in [0, 65535]"), std::string::npos) << error;
}

TEST_F(OptimizerFlags, NumericHyperparametersDefaultToAutoAndResolveToKeelsValues) {
  const Hyperparameters h = HyperparametersFromFlags();  // linear_learner, adam
  EXPECT_FLOAT_EQ(h.weights_optimizer.learning_rate, 0.01f);
  EXPECT_EQ(h.weights_optimizer.l2, 0.0f);
  EXPECT_EQ(h.weights_optimizer.l1, 0.0f);
  EXPECT_FLOAT_EQ(h.weights_optimizer.beta1, 0.9f);
  EXPECT_FLOAT_EQ(h.weights_optimizer.beta2, 0.999f);
  EXPECT_FLOAT_EQ(h.weights_optimizer.epsilon, 1e-8f);
  EXPECT_EQ(h.weights_optimizer.rescale_grad, 1.0f);
  EXPECT_EQ(h.weights_optimizer.clip_gradient, 0.0f);  // no clipping
}

TEST_F(OptimizerFlags, AutoLearningRateDependsOnTheOptimizer) {
  Set("optimizer", "ftrl");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().weights_optimizer.learning_rate, 1.0f);
  Set("job", "factorization_machines");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().weights_optimizer.learning_rate, 1.0f);
  Set("optimizer", "sgd");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().weights_optimizer.learning_rate, 0.01f);
}

TEST_F(OptimizerFlags, FtrlBetaAutoIsAThousandthForTheLinearLearnerAndOneForAFactorizationMachine) {
  Set("optimizer", "ftrl");
  Hyperparameters h = HyperparametersFromFlags();
  EXPECT_FLOAT_EQ(h.weights_optimizer.ftrl_beta, 0.001f);
  EXPECT_FLOAT_EQ(h.bias_optimizer.ftrl_beta, 0.001f);
  Set("job", "factorization_machines");
  h = HyperparametersFromFlags();
  EXPECT_FLOAT_EQ(h.weights_optimizer.ftrl_beta, 1.0f);
  EXPECT_FLOAT_EQ(h.bias_optimizer.ftrl_beta, 1.0f);
  Set("ftrl_beta", "0.25");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().weights_optimizer.ftrl_beta, 0.25f);
  Set("job", "linear_learner");
  EXPECT_FLOAT_EQ(HyperparametersFromFlags().weights_optimizer.ftrl_beta, 0.25f);
}

// Why the linear learner's auto is 0.001: workers push minibatch means, and
// FTRL with that beta steps on a mean of 1,000 examples exactly as with a
// beta of 1 on the summed gradient, McMahan et al.'s per-example scale. With a
// beta of 1 on the mean a feature moves about a thousandth as far.
TEST_F(OptimizerFlags, TheLinearLearnersFtrlStepsOnAMinibatchMeanAsOnTheSumWithABetaOfOne) {
  Set("optimizer", "ftrl");
  const OptimizerOptions on_means = HyperparametersFromFlags().weights_optimizer;
  OptimizerOptions on_sums = on_means;
  on_sums.ftrl_beta = 1.0f;
  const auto mean_steps = MakeOptimizer(on_means);
  const auto sum_steps = MakeOptimizer(on_sums);
  std::vector<float> mean_row(3, 0.0f), sum_row(3, 0.0f), beta_one_row(3, 0.0f);
  for (const float sum : {0.8f, -0.3f, 2.5f}) {
    const float mean = sum / 1000.0f;
    mean_steps->Update(mean_row.data(), &mean, 1);
    sum_steps->Update(sum_row.data(), &sum, 1);
    sum_steps->Update(beta_one_row.data(), &mean, 1);
    EXPECT_NEAR(mean_row[0], sum_row[0], 1e-4f * std::abs(sum_row[0])) << sum;
    EXPECT_LT(std::abs(beta_one_row[0]), std::abs(sum_row[0]) / 100.0f) << sum;
  }
}

TEST_F(OptimizerFlags, NumbersReplaceAuto) {
  Set("optimizer", "sgd");
  Set("learning_rate", "0.3");
  Set("wd", "0.02");
  Set("l1", "0.001");
  Set("beta_1", "0.5");
  Set("beta_2", "0.75");
  Set("eps", "0.125");
  const OptimizerOptions o = HyperparametersFromFlags().weights_optimizer;
  EXPECT_FLOAT_EQ(o.learning_rate, 0.3f);
  EXPECT_FLOAT_EQ(o.l2, 0.02f);
  EXPECT_FLOAT_EQ(o.l1, 0.001f);
  EXPECT_FLOAT_EQ(o.beta1, 0.5f);
  EXPECT_FLOAT_EQ(o.beta2, 0.75f);
  EXPECT_FLOAT_EQ(o.epsilon, 0.125f);
}

TEST_F(OptimizerFlags, KvBenchsLearningRateStaysAutoAsBefore) {
  Set("job", "kv_bench");
  const OptimizerOptions server = ServerOptimizerFromFlags();
  EXPECT_FLOAT_EQ(server.learning_rate, 0.01f);
  EXPECT_EQ(server.l2, 0.0f);
  EXPECT_EQ(server.l1, 0.0f);
  Set("learning_rate", "0.5");
  EXPECT_FLOAT_EQ(ServerOptimizerFromFlags().learning_rate, 0.5f);
}

TEST_F(OptimizerFlags, FactorizationMachineGroupsTakeTheJobsRatesAndPenaltiesWhenAuto) {
  Set("job", "factorization_machines");
  Set("num_factors", "3");
  Set("learning_rate", "0.05");
  Set("wd", "0.001");
  const Hyperparameters h = HyperparametersFromFlags();
  ASSERT_EQ(h.weights_optimizer.groups.size(), 2u);
  const auto& linear = h.weights_optimizer.groups[0];
  const auto& factors = h.weights_optimizer.groups[1];
  EXPECT_EQ(linear.begin, 0);
  EXPECT_EQ(linear.end, 1);
  EXPECT_EQ(factors.begin, 1);
  EXPECT_EQ(factors.end, 4);
  EXPECT_FLOAT_EQ(linear.learning_rate, 0.05f);
  EXPECT_FLOAT_EQ(factors.learning_rate, 0.05f);
  EXPECT_FLOAT_EQ(linear.l2, 0.001f);
  EXPECT_FLOAT_EQ(factors.l2, 0.001f);
  EXPECT_FLOAT_EQ(h.bias_optimizer.learning_rate, 0.05f);  // bias_lr_mult auto: 1
  EXPECT_EQ(h.bias_optimizer.l2, 0.0f);                    // bias_wd_mult auto: 0
}

TEST_F(OptimizerFlags, FactorizationMachineGroupsTakeTheirOwnRatesAndPenalties) {
  Set("job", "factorization_machines");
  Set("bias_lr", "0.4");
  Set("linear_lr", "0.2");
  Set("factors_lr", "0.3");
  Set("bias_wd", "0.03");
  Set("linear_wd", "0.01");
  Set("factors_wd", "0.02");
  const Hyperparameters h = HyperparametersFromFlags();
  ASSERT_EQ(h.weights_optimizer.groups.size(), 2u);
  EXPECT_FLOAT_EQ(h.weights_optimizer.groups[0].learning_rate, 0.2f);
  EXPECT_FLOAT_EQ(h.weights_optimizer.groups[1].learning_rate, 0.3f);
  EXPECT_FLOAT_EQ(h.weights_optimizer.groups[0].l2, 0.01f);
  EXPECT_FLOAT_EQ(h.weights_optimizer.groups[1].l2, 0.02f);
  EXPECT_FLOAT_EQ(h.bias_optimizer.learning_rate, 0.4f);
  EXPECT_FLOAT_EQ(h.bias_optimizer.l2, 0.03f);
  EXPECT_TRUE(h.bias_optimizer.groups.empty());
}

TEST_F(OptimizerFlags, FactorizationMachineInitializersFollowTheirMethods) {
  Set("job", "factorization_machines");
  Set("bias_init_method", "normal");
  Set("bias_init_sigma", "0.5");
  Set("linear_init_method", "uniform");
  Set("linear_init_scale", "0.25");
  Set("factors_init_method", "constant");
  Set("factors_init_value", "0.125");
  const Hyperparameters h = HyperparametersFromFlags();
  EXPECT_EQ(h.bias_init.method, "normal");
  EXPECT_FLOAT_EQ(h.bias_init.scale, 0.5f);
  EXPECT_EQ(h.linear_init.method, "uniform");
  EXPECT_FLOAT_EQ(h.linear_init.scale, 0.25f);
  EXPECT_EQ(h.factors_init.method, "constant");
  EXPECT_FLOAT_EQ(h.factors_init.value, 0.125f);
}

TEST_F(OptimizerFlags, GradientShapingReachesTheTrainingTablesButNotTheControlTable) {
  Set("job", "factorization_machines");
  Set("rescale_grad", "0.5");
  Set("clip_gradient", "2");
  const auto tables = TablesFor(HyperparametersFromFlags());
  for (const uint32_t table : {kWeightTable, kBiasTable}) {
    EXPECT_FLOAT_EQ(tables.at(table).optimizer.rescale_grad, 0.5f) << table;
    EXPECT_FLOAT_EQ(tables.at(table).optimizer.clip_gradient, 2.0f) << table;
  }
  EXPECT_EQ(tables.at(kControlTable).optimizer.rescale_grad, 1.0f);
  EXPECT_EQ(tables.at(kControlTable).optimizer.clip_gradient, 0.0f);
}

TEST_F(OptimizerFlags, StalenessAwareStepsAreOnForTheTrainingTablesOnly) {
  for (const auto& [table, spec] : TablesFor(HyperparametersFromFlags())) {
    // The control table sums: its pushes must be added whole.
    EXPECT_EQ(spec.optimizer.staleness_aware, table != kControlTable) << "table " << table;
  }
  Set("staleness_aware_steps", "false");
  for (const auto& [table, spec] : TablesFor(HyperparametersFromFlags())) {
    EXPECT_FALSE(spec.optimizer.staleness_aware) << "table " << table;
  }
}

TEST_F(OptimizerFlags, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"learning_rate", "fast"},
      {"learning_rate", "0"},
      {"learning_rate", "-0.1"},
      {"wd", "-1"},
      {"wd", "x"},
      {"l1", "-0.5"},
      {"beta_1", "1.5"},
      {"beta_1", "auto2"},
      {"beta_2", "1"},
      {"eps", "0"},
      {"eps", "tiny"},
      {"ftrl_beta", "0"},
      {"ftrl_beta", "-1"},
      {"ftrl_beta", "slow"},
      {"rescale_grad", "0"},
      {"rescale_grad", "-1"},
      {"clip_gradient", "0"},
      {"clip_gradient", "-2"},
      {"clip_gradient", "inf"},
      {"bias_lr", "0"},
      {"bias_lr", "abc"},
      {"bias_wd", "-0.1"},
      {"optimizer", "bogus"},
      {"momentum", "fast"},
      {"momentum", "1.5"},
      {"bias_lr_mult", "0"},
      {"bias_lr_mult", "x"},
      {"bias_wd_mult", "-1"},
      {"lr_scheduler_step", "0"},
      {"lr_scheduler_step", "2.5"},
      {"lr_scheduler_factor", "0"},
      {"lr_scheduler_factor", "1.5"},
      {"lr_scheduler_minimum_lr", "0"},
      {"lr_scheduler_minimum_lr", "nan"},
      {"init_method", "constant"},
      {"rmsprop_decay", "1"},
  };
  ExpectEachRefusedNamingTheFlag(bad);
}

TEST_F(OptimizerFlags, BadFactorizationMachineRatesAreRefusedNamingTheFlag) {
  Set("job", "factorization_machines");
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"linear_lr", "0"}, {"factors_lr", "-1"}, {"linear_wd", "-1"}, {"factors_wd", "nan"}};
  ExpectEachRefusedNamingTheFlag(bad);
}

TEST_F(OptimizerFlags, SageMakerNameAndKeelAliasTogetherAreRefused) {
  const std::vector<std::vector<std::pair<const char*, const char*>>> both = {
      {{"bias_lr_mult", "2"}, {"bias_lr", "0.1"}},
      {{"bias_wd_mult", "2"}, {"bias_wd", "0.1"}},
      {{"init_method", "normal"}, {"linear_init_method", "uniform"}},
      {{"init_bias", "1"}, {"bias_init_value", "2"}},
  };
  for (const auto& flags : both) {
    gflags::FlagSaver restore;
    for (const auto& [flag, value] : flags) Set(flag, value);
    try {
      HyperparametersFromFlags();
      ADD_FAILURE() << "--" << flags[0].first << " with --" << flags[1].first << " was accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string("--") + flags[0].first), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("--") + flags[1].first), std::string::npos) << message;
    }
  }
}

// The training health rules: on by default, off when asked, and nothing else.
TEST_F(OptimizerFlags, HealthRulesAreOnByDefaultOffWhenAskedAndAnythingElseIsRefused) {
  Set("train", "data");
  EXPECT_TRUE(TrainerOptionsFromFlags().health_rules);
  Set("health_rules", "off");
  EXPECT_FALSE(TrainerOptionsFromFlags().health_rules);
  Set("health_rules", "true");
  try {
    TrainerOptionsFromFlags();
    ADD_FAILURE() << "--health_rules=true was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--health_rules=true: must be on or off"),
              std::string::npos)
        << e.what();
  }
}

// A training job without --model_dir: a folder in the working directory,
// named for the job and the time (or the Slurm job, the same for every task).
TEST(DefaultModelDir, IsAFolderInTheWorkingDirectoryNamedForTheJobAndTheTime) {
  unsetenv("SLURM_JOB_ID");
  const std::string folder = DefaultModelDir("linear_learner");
  const std::string prefix =
      std::filesystem::current_path().string() + "/keel-model-linear_learner-";
  ASSERT_EQ(folder.rfind(prefix, 0), 0u) << folder;
  const std::string when = folder.substr(prefix.size());  // YYYYMMDD-HHMMSS
  ASSERT_EQ(when.size(), 15u) << folder;
  EXPECT_EQ(when[8], '-') << folder;
  EXPECT_EQ(std::count_if(when.begin(), when.end(),
                          [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }),
            14)
      << folder;
}

TEST(DefaultModelDir, UnderSlurmIsNamedForTheSlurmJob) {
  setenv("SLURM_JOB_ID", "4242", 1);
  const std::string folder = DefaultModelDir("factorization_machines");
  unsetenv("SLURM_JOB_ID");
  EXPECT_EQ(folder, std::filesystem::current_path().string() +
                        "/keel-model-factorization_machines-slurm4242");
}

}  // namespace
}  // namespace keel
