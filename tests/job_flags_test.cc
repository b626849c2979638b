// The training jobs' optimizer flags (SageMaker's names) as the servers'
// tables receive them.
#include "cli/job_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cli/cluster_flags.h"

namespace keel {
namespace {

// Each test sets flags as a command line would; the fixture restores them.
class OptimizerFlags : public testing::Test {
 protected:
  OptimizerFlags() { Set("job", "linear_learner"); }
  static void Set(const char* flag, const std::string& value) {
    ASSERT_FALSE(gflags::SetCommandLineOption(flag, value.c_str()).empty()) << flag;
  }

 private:
  gflags::FlagSaver saver_;
};

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

}  // namespace
}  // namespace keel
