// Which flags each command takes (cli/command_flags.h) and what its --help
// lists (cli/command_help.h).
#include "cli/command_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command_help.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

// The error CheckCommandTakes throws for `args` given to `command`, or "no
// error"; *warnings gets what it warns of.
std::string TakesError(const std::string& command, const std::vector<std::string>& args,
                       std::string* warnings = nullptr) {
  std::ostringstream out;
  const std::string error =
      ErrorOf([&] { CheckCommandTakes(command, ReadFlagArguments(args), out); });
  if (warnings) *warnings = out.str();
  return error;
}

std::string Help(const std::string& command) {
  std::ostringstream out;
  PrintCommandHelp(command, out);
  return out.str();
}

TEST(FlagGroups, EveryFlagATableNamesExists) {
  for (const FlagGroup& group : KeelFlagGroups()) {
    for (const std::string& flag : group.flags) {
      gflags::CommandLineFlagInfo info;
      EXPECT_TRUE(gflags::GetCommandLineFlagInfo(flag.c_str(), &info))
          << group.heading << ": " << flag;
    }
  }
}

TEST(FlagGroups, NoFlagIsInTwoGroups) {
  std::set<std::string> seen;
  for (const FlagGroup& group : KeelFlagGroups()) {
    for (const std::string& flag : group.flags) {
      EXPECT_TRUE(seen.insert(flag).second) << flag << " is in two groups";
    }
  }
}

TEST(FlagGroups, ListTheIssuesHeadingsFirst) {
  std::vector<std::string> headings;
  for (const FlagGroup& group : KeelFlagGroups()) headings.push_back(group.heading);
  ASSERT_GE(headings.size(), 5u);
  EXPECT_EQ(headings[0], "job");
  EXPECT_EQ(headings[1], "data");
}

TEST(CommandFlags, PredictRefusesATrainingFlagOnTheCommandLineNamingWhoTakesIt) {
  EXPECT_EQ(TakesError("predict", {"--model_dir=m", "--epochs=3"}),
            "--epochs is not a flag of keel predict (it is for keel server, keel worker, keel "
            "launch); keel predict --help lists its flags");
}

TEST(CommandFlags, AFlagfileLineTheCommandDoesNotTakeIsAWarningNotAnError) {
  testing::TempFolder folder("flags");
  const std::string path = folder.path() + "/job.flags";
  testing::WriteFile(path, "--epochs=3\n");
  std::string warnings;
  EXPECT_EQ(TakesError("predict", {"--flagfile=" + path}, &warnings), "no error");
  EXPECT_TRUE(Contains(warnings, "keel predict: " + path +
                                     ":1: --epochs does nothing in keel "
                                     "predict"))
      << warnings;
}

TEST(CommandFlags, EveryRoleTakesEveryRolesFlagsSoOneFlagfileServesThemAll) {
  for (const std::string role : {"scheduler", "server", "worker", "launch"}) {
    EXPECT_EQ(TakesError(role, {"--epochs=3", "--train=/d", "--num_servers=2", "--rank=1",
                                "--checkpoint_uri=/c", "--drop_rate=0.1", "--servers=2",
                                "--bench_out=/b", "--check_flags"}),
              "no error")
        << role;
  }
}

TEST(CommandFlags, NoRoleTakesPredictsOrDatagensFlags) {
  EXPECT_TRUE(Contains(TakesError("launch", {"--rows=100"}), "is not a flag of keel launch"));
  EXPECT_TRUE(Contains(TakesError("worker", {"--out=/p"}), "is not a flag of keel worker"));
}

TEST(CommandFlags, EveryCommandTakesTheLoggingFlags) {
  for (const std::string& command : CommandNames()) {
    EXPECT_EQ(TakesError(command, {"--minloglevel=1", "--v=2"}), "no error") << command;
  }
}

TEST(CommandHelp, LaunchListsItsGroupsWithDefaultsAndDescriptions) {
  const std::string help = Help("launch");
  for (const std::string heading :
       {"\njob:\n", "\ndata:\n", "\ncluster:\n", "\ncheckpoints:\n", "\nfaults:\n"}) {
    EXPECT_TRUE(Contains(help, heading)) << heading << "\n" << help;
  }
  EXPECT_TRUE(Contains(help, "  --epochs=15 ")) << help;
  EXPECT_TRUE(Contains(help, "passes over the training data")) << help;
  EXPECT_TRUE(Contains(help, "  --train=\"\" ")) << help;
}

TEST(CommandHelp, ListsNoLoggingFlagsNorSourceFiles) {
  const std::string help = Help("launch");
  EXPECT_FALSE(Contains(help, "logtostderr")) << help;
  EXPECT_FALSE(Contains(help, ".cc")) << help;
  EXPECT_FALSE(Contains(help, "\npredict:\n")) << help;
}

TEST(CommandHelp, PredictListsItsOwnFlagsAndNotTrainingOnes) {
  const std::string help = Help("predict");
  EXPECT_TRUE(Contains(help, "usage: keel predict")) << help;
  EXPECT_TRUE(Contains(help, "--model_dir=")) << help;
  EXPECT_TRUE(Contains(help, "--data=")) << help;
  EXPECT_FALSE(Contains(help, "--epochs=")) << help;
  EXPECT_FALSE(Contains(help, "\ncheckpoints:\n")) << help;
}

TEST(CommandHelp, SchedulerListsItsOwnGroupsAndNotTheHyperparameters) {
  const std::string help = Help("scheduler");
  EXPECT_TRUE(Contains(help, "\nscheduler:\n")) << help;
  EXPECT_TRUE(Contains(help, "\ncheckpoints:\n")) << help;
  EXPECT_FALSE(Contains(help, "--epochs=")) << help;
  EXPECT_TRUE(Contains(help, "It also takes every other flag of the job's roles")) << help;
}

TEST(CommandHelp, NoLineIsLongerThanAHundredColumns) {
  for (const std::string& command : CommandNames()) {
    std::istringstream lines(Help(command));
    for (std::string line; std::getline(lines, line);) {
      // Only a word longer than the column (a long example) may stand out, alone on its line.
      const bool one_word = line.find(' ', line.find_first_not_of(' ')) == std::string::npos;
      EXPECT_TRUE(line.size() <= 100 || one_word) << command << ": " << line;
    }
  }
}

TEST(CommandHelp, HelpfullAddsTheOtherCommandsFlagsAndTheLoggingFlags) {
  std::ostringstream out;
  PrintFullHelp("predict", out);
  EXPECT_TRUE(Contains(out.str(), "--epochs=15")) << out.str();
  EXPECT_TRUE(Contains(out.str(), "\nlogging (glog):\n")) << out.str();
  EXPECT_TRUE(Contains(out.str(), "--logtostderr=")) << out.str();
}

}  // namespace
}  // namespace keel
