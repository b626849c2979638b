// What `keel launch` shows a user of a small job: progress lines (or a bar
// under a terminal), the closing summary, the roles' errors, and logs kept
// apart with --log_dir.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

class ProgressLaunch : public testing::TempFolderTest {
 public:
  ProgressLaunch() : TempFolderTest("progress") {}

  void Generate(int rows) {
    const auto exit = testing::Run(
        {KeelBinary(), "datagen", "--model=linear", "--rows=" + std::to_string(rows),
         "--features=500", "--nnz=8", "--seed=3", "--train_files=2", "--out=" + folder_},
        60);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

  // `keel launch` of a 3-epoch linear learner with 2 workers, and `flags`.
  std::vector<std::string> Launch(const std::vector<std::string>& flags) const {
    std::vector<std::string> argv = testing::LaunchCommand(
        1, 2,
        {"--job=linear_learner", "--epochs=3", "--train=" + folder_ + "/train",
         "--validation=" + folder_ + "/validation", "--model_dir=" + folder_ + "/model"});
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  }
};

// The epochs of the lines that end an epoch ("epoch K/3  100% ..."), in order.
std::vector<int> FinishedEpochs(const std::string& output) {
  std::vector<int> epochs;
  for (const std::string& epoch : testing::FirstGroups(output, "epoch ([0-9]+)/3  100%")) {
    epochs.push_back(std::stoi(epoch));
  }
  return epochs;
}

// Whether `output` holds a role's glog INFO line ("[worker 0] I1125 ...").
bool HasInfoLine(const std::string& output) {
  return std::regex_search(output, std::regex("\\] I[0-9]{4,8} [0-9]"));
}

TEST_F(ProgressLaunch, LinesShowEachEpochOnceInOrderThenASummaryNamingTheModel) {
  Generate(6000);
  const auto exit = testing::Run(Launch({"--progress=lines"}), 120);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_EQ(FinishedEpochs(exit.output), (std::vector<int>{1, 2, 3})) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "validation roc_auc_score ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "job done in ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "(exit status 0): 3 of 3 epochs")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "model        " + folder_ + "/model\n")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, folder_ + "/model/metrics.json")) << exit.output;
  EXPECT_EQ(exit.output.find('\r'), std::string::npos) << exit.output;
  EXPECT_FALSE(HasInfoLine(exit.output)) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "keel-progress {")) << exit.output;  // rendered, not shown
}

TEST_F(ProgressLaunch, AnEarlyStopEndsTheEpochsBeforeTheLastAndTheSummarySaysSo) {
  Generate(2000);
  // No later epoch can gain 99% on the first's loss: epoch 2 brings none, and
  // with a patience of 1 the job stops there, 2 epochs of 3.
  const auto exit = testing::Run(Launch({"--progress=lines", "--early_stopping_patience=1",
                                         "--early_stopping_tolerance=0.99"}),
                                 120);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_EQ(FinishedEpochs(exit.output), (std::vector<int>{1, 2})) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "no gain: stopping early")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "(exit status 0): 2 of 3 epochs")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "early, after epoch 2 of 3: no gain on validation"))
      << exit.output;
}

TEST_F(ProgressLaunch, UnderATerminalTheBarIsRewrittenInPlace) {
  const std::string script = testing::SystemTool("script");
  if (script.empty()) GTEST_SKIP() << "script (util-linux) is not installed";
  Generate(6000);
  std::string command = "TERM=xterm";
  for (const std::string& arg : Launch({})) command += " '" + arg + "'";
  // script runs the command under a pseudo-terminal: --progress=auto draws a bar.
  const auto exit = testing::Run({script, "-qfec", command, "/dev/null"}, 120);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "\repoch 3/3  100%")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "\033[K")) << exit.output;
  EXPECT_EQ(FinishedEpochs(exit.output), (std::vector<int>{1, 2, 3})) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "job done in ")) << exit.output;
}

TEST_F(ProgressLaunch, ARolesErrorReachesTheTerminalAndTheSummarySaysTheJobFailed) {
  Generate(2000);
  { std::ofstream(folder_ + "/train/part-1.libsvm", std::ios::app) << "1 5:1 oops:1\n"; }
  const auto exit = testing::Run(Launch({"--progress=lines"}), 120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "part-1.libsvm:")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "[worker 1] ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "job failed in ")) << exit.output;
}

TEST_F(ProgressLaunch, LogDirKeepsEveryRolesInfoLinesOffTheTerminal) {
  Generate(2000);
  const std::string logs = folder_ + "/logs";
  const auto exit = testing::Run(Launch({"--progress=lines", "--log_dir=" + logs}), 120);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_FALSE(HasInfoLine(exit.output)) << exit.output;
  for (const char* role : {"scheduler", "server-0", "worker-0", "worker-1"}) {
    const std::string log = testing::ReadFileOrEmpty(logs + "/" + role + ".log");
    EXPECT_TRUE(std::regex_search(log, std::regex("(^|\n)I[0-9]{4,8} [0-9]"))) << role << ":\n"
                                                                               << log;
  }
  EXPECT_TRUE(Contains(exit.output, "logs         " + logs + " (a file per role)")) << exit.output;
}

TEST_F(ProgressLaunch, VerboseShowsTheRolesInfoLines) {
  Generate(2000);
  const auto exit = testing::Run(Launch({"--progress=lines", "--verbose"}), 120);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_TRUE(HasInfoLine(exit.output)) << exit.output;
}

}  // namespace
}  // namespace keel
