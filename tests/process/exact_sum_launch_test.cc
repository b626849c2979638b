// `keel launch --job=exact_sum`: the checking job on a local cluster, its
// report on the terminal and in exact_sum.json, and its flags.
#include <gtest/gtest.h>

#include "base/files.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

TEST(ExactSumJob, PassesWithNoViolationsOnTwoReplicatedServersAndTwoWorkers) {
  const testing::TempFolder folder("exact-sum");
  const std::string model_dir = folder.path() + "/run";
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--replication=1", "--job=exact_sum",
       "--epochs=3", "--exact_sum_minibatches=30", "--model_dir=" + model_dir},
      120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "4096 keys checked in 2 key range(s), 0 violation(s)"))
      << exit.output;
  const auto report = testing::ParseJsonObject(ReadFile(model_dir + "/exact_sum.json"));
  EXPECT_EQ(report.at("ok"), "true");
  EXPECT_EQ(report.at("keys_checked"), "4096");
  EXPECT_EQ(report.at("violations"), "0");
  // 2 workers x 3 epochs x 30 minibatches, each acknowledged once.
  EXPECT_TRUE(Contains(report.at("pushes"), "\"acknowledged\":180")) << report.at("pushes");
  EXPECT_TRUE(Contains(report.at("pushes"), "\"repeated\":0")) << report.at("pushes");
}

TEST(ExactSumJob, AWorkerWithoutAModelDirIsRefusedBeforeItStarts) {
  const auto exit = testing::Run(
      {KeelBinary(), "worker", "--scheduler=h:1", "--job=exact_sum", "--check_flags"}, 10);
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--job=exact_sum needs --model_dir")) << exit.output;
}

TEST(ExactSumJob, LaunchPicksAModelDirWhenNoneIsGiven) {
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=exact_sum", "--check_flags"},
      10);
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "flags ok")) << exit.output;
}

}  // namespace
}  // namespace keel
