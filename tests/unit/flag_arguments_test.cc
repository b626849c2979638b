// How Keel reads a command line's flags and its flagfiles before gflags sets
// them (flags/flag_arguments.h): every flag must exist, with the value it
// needs, and an error names the file, the line and the nearest flag.
#include "flags/flag_arguments.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/job_flags.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

class FlagArguments : public testing::TempFolderTest {
 protected:
  // The error ReadFlagArguments(args) throws, or "no error".
  static std::string ReadError(const std::vector<std::string>& args) {
    return ErrorOf([&] { ReadFlagArguments(args); });
  }
};

TEST_F(FlagArguments, ReadsTheCommandLinesFlagsInOrderWithTheirValues) {
  const auto arguments =
      ReadFlagArguments({"--epochs=3", "operand", "--nouse_bias", "--train", "/data", "-seed=9"});
  ASSERT_EQ(arguments.size(), 4u);
  EXPECT_EQ(arguments[0].name, "epochs");
  EXPECT_EQ(arguments[0].value, "3");
  EXPECT_EQ(arguments[1].name, "use_bias");
  EXPECT_EQ(arguments[1].value, "false");
  EXPECT_EQ(arguments[2].name, "train");
  EXPECT_EQ(arguments[2].value, "/data");
  EXPECT_EQ(arguments[3].name, "seed");
  for (const auto& argument : arguments) EXPECT_EQ(argument.origin, "") << argument.name;
}

TEST_F(FlagArguments, LeavesEveryFlagAsItWas) {
  ReadFlagArguments({"--epochs=3", "--nouse_bias"});
  EXPECT_EQ(FLAGS_epochs, 15);
  EXPECT_TRUE(FLAGS_use_bias);
  EXPECT_TRUE(gflags::GetCommandLineFlagInfoOrDie("epochs").is_default);
}

TEST_F(FlagArguments, AnUnknownFlagOnTheCommandLineIsAnErrorNamingTheNearestFlag) {
  EXPECT_EQ(ReadError({"--epoch=2"}), "unknown flag --epoch (did you mean --epochs?)");
  EXPECT_EQ(ReadError({"--learning_rat", "0.1"}),
            "unknown flag --learning_rat (did you mean --learning_rate?)");
}

TEST_F(FlagArguments, AnUnknownFlagFarFromEveryFlagIsAnErrorWithoutASuggestion) {
  EXPECT_EQ(ReadError({"--xyzzy=1"}), "unknown flag --xyzzy");
}

TEST_F(FlagArguments, FlagsAfterADoubleDashAreNotRead) {
  EXPECT_TRUE(ReadFlagArguments({"--", "--epoch=2"}).empty());
}

TEST_F(FlagArguments, AFlagfilesLinesAreReadWithTheirFileAndLine) {
  const std::string path = WriteFile("job.flags", "# the job\n\n--epochs=4\n  --keep_best_epoch\n");
  const auto arguments = ReadFlagArguments({"--flagfile=" + path});
  ASSERT_EQ(arguments.size(), 3u);
  EXPECT_EQ(arguments[0].name, "flagfile");
  EXPECT_EQ(arguments[1].name, "epochs");
  EXPECT_EQ(arguments[1].value, "4");
  EXPECT_EQ(arguments[1].origin, path + ":3");
  EXPECT_EQ(arguments[2].name, "keep_best_epoch");
  EXPECT_EQ(arguments[2].value, "true");
  EXPECT_EQ(arguments[2].origin, path + ":4");
}

TEST_F(FlagArguments, AnUnknownFlagInAFlagfileIsAnErrorNamingTheFileTheLineAndTheNearestFlag) {
  const std::string path = WriteFile("job.flags", "--job=linear_learner\n--epoch=2\n");
  EXPECT_EQ(ReadError({"--flagfile=" + path}),
            path + ":2: unknown flag --epoch (did you mean --epochs?)");
}

TEST_F(FlagArguments, AnUnknownFlagInANestedFlagfileNamesTheNestedFile) {
  const std::string inner = WriteFile("inner.flags", "--epochs=2\n\n--mini_batchsize=100\n");
  const std::string outer = WriteFile("outer.flags", "--job=linear_learner\n--flagfile=" + inner);
  EXPECT_EQ(ReadError({"--flagfile", outer}),
            inner + ":3: unknown flag --mini_batchsize (did you mean --mini_batch_size?)");
}

TEST_F(FlagArguments, ANestedFlagfilesFlagsAreReadInItsPlace) {
  const std::string inner = WriteFile("inner.flags", "--epochs=2\n");
  const std::string outer = WriteFile("outer.flags", "--flagfile=" + inner + "\n--seed=5\n");
  const auto arguments = ReadFlagArguments({"--flagfile=" + outer});
  ASSERT_EQ(arguments.size(), 4u);
  EXPECT_EQ(arguments[2].origin, inner + ":1");
  EXPECT_EQ(arguments[3].origin, outer + ":2");
}

TEST_F(FlagArguments, AFlagfileLineThatIsNotAFlagIsAnError) {
  // gflags would take it for a list of program names and skip every line after it.
  const std::string path = WriteFile("job.flags", "--seed=3\nepochs=2\n--epochs=3\n");
  EXPECT_EQ(ReadError({"--flagfile=" + path}),
            path +
                ":2: 'epochs=2' is not a flag: a flagfile holds --name=value lines, # comments "
                "and blank lines");
}

TEST_F(FlagArguments, AFlagWithoutItsValueInAFlagfileIsAnError) {
  const std::string path = WriteFile("job.flags", "--epochs\n");
  EXPECT_EQ(ReadError({"--flagfile=" + path}), path + ":1: --epochs has no value (--epochs=VALUE)");
}

TEST_F(FlagArguments, AFlagAndItsValueSplitBySpaceInAFlagfileIsAnError) {
  const std::string path = WriteFile("job.flags", "--epochs 2\n");
  EXPECT_EQ(ReadError({"--flagfile=" + path}),
            path + ":1: '--epochs 2': in a flagfile, write --epochs=VALUE");
}

TEST_F(FlagArguments, AValueTheFlagsTypeRefusesIsAnErrorNamingTheLine) {
  const std::string path = WriteFile("job.flags", "--epochs=two\n");
  EXPECT_EQ(ReadError({"--flagfile=" + path}),
            path + ":1: --epochs 'two' is not a valid int32 value");
}

TEST_F(FlagArguments, AFlagWithoutItsValueAtTheEndOfTheCommandLineIsAnError) {
  EXPECT_EQ(ReadError({"--epochs"}), "--epochs needs a value (--epochs=VALUE)");
}

TEST_F(FlagArguments, AFlagfileThatIncludesItselfIsAnError) {
  const std::string path = folder_ + "/loop.flags";
  WriteFile("loop.flags", "--seed=1\n--flagfile=" + path + "\n");
  EXPECT_EQ(ReadError({"--flagfile=" + path}),
            path + ":2: --flagfile=" + path + " includes itself");
}

TEST_F(FlagArguments, AMissingFlagfileIsAnErrorNamingIt) {
  const std::string error = ReadError({"--flagfile=" + folder_ + "/missing.flags"});
  EXPECT_TRUE(Contains(error, "--flagfile=" + folder_ + "/missing.flags: cannot read")) << error;
}

// Every flagfile the project ships holds only flags that exist: configs/ and
// the Kubernetes ConfigMap's job.flags.
TEST_F(FlagArguments, EveryShippedFlagfileHoldsOnlyFlagsThatExist) {
  int flagfiles = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::SourceDir() + "/configs")) {
    if (entry.path().extension() != ".flags") continue;
    const std::string path = entry.path().string();
    EXPECT_EQ(ReadError({"--flagfile=" + path}), "no error") << path;
    EXPECT_GT(ReadFlagArguments({"--flagfile=" + path}).size(), 3u) << path;
    ++flagfiles;
  }
  EXPECT_GE(flagfiles, 3);
}

// The ConfigMap's job.flags, the block under "job.flags: |", unindented.
std::string ConfigMapFlagfile(const std::string& yaml) {
  std::istringstream lines(yaml);
  std::string flagfile, indent;
  bool inside = false;
  for (std::string line; std::getline(lines, line);) {
    if (Contains(line, "job.flags: |")) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    if (indent.empty()) indent = line.substr(0, start);
    if (line.compare(0, indent.size(), indent) != 0) break;
    flagfile += line.substr(indent.size()) + "\n";
  }
  return flagfile;
}

TEST_F(FlagArguments, TheKubernetesJobFlagfileHoldsOnlyFlagsThatExist) {
  const std::string flags = ConfigMapFlagfile(
      testing::ReadFileOrEmpty(testing::SourceDir() + "/deploy/kubernetes/configmap.yaml"));
  ASSERT_TRUE(Contains(flags, "--job=")) << flags;
  const std::string path = WriteFile("job.flags", flags);
  EXPECT_EQ(ReadError({"--flagfile=" + path}), "no error") << flags;
}

}  // namespace
}  // namespace keel
