// The keel binary's command line as a user meets it: --help per command
// (exit 0), "did you mean" for a misspelled flag or command, flagfiles with
// unknown keys refused before anything starts, the model folder a job
// without --model_dir picks, and a data format read from the data.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command_flags.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

testing::Exit Keel(const std::vector<std::string>& args, double timeout_s = 10) {
  std::vector<std::string> argv = {KeelBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::Run(argv, timeout_s);
}

// `exit` is a refusal: it ended with status `code` saying `message`, and
// did not say `not_said` ("": not checked).
void ExpectRefusal(const testing::Exit& exit, int code, const std::string& message,
                   const std::string& not_said = "") {
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, code) << exit.output;
  EXPECT_TRUE(Contains(exit.output, message)) << exit.output;
  if (!not_said.empty()) {
    EXPECT_FALSE(Contains(exit.output, not_said)) << exit.output;
  }
}

TEST(Help, LaunchHelpExitsZeroListingItsGroups) {
  const auto exit = Keel({"launch", "--help"});
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 0) << exit.output;
  for (const std::string heading :
       {"\njob:\n", "\ndata:\n", "\ncluster:\n", "\ncheckpoints:\n", "\nfaults:\n"}) {
    EXPECT_TRUE(Contains(exit.output, heading)) << heading << "\n" << exit.output;
  }
  EXPECT_FALSE(Contains(exit.output, "logtostderr")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "Flags from")) << exit.output;
}

// What bash offers after `keel WORDS<TAB>`, from `keel completion bash`
// sourced into a real bash: the words of COMPREPLY, one per line.
std::vector<std::string> Completions(const std::string& script, const std::string& words) {
  const auto exit = testing::Shell("bash -c '. " + script + "; COMP_WORDS=(" + words +
                                   "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _keel; "
                                   "printf \"%s\\n\" \"${COMPREPLY[@]}\"'");
  EXPECT_TRUE(exit.finished && exit.code == 0) << words << ": " << exit.output;
  std::vector<std::string> lines;
  std::istringstream in(exit.output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

TEST(Completion, BashCompletesCommandsOperandsAndEveryFlagEachCommandTakes) {
  const testing::TempFolder folder("completion");
  const std::string script = folder.path() + "/keel.bash";
  const auto made = testing::Shell(KeelBinary() + " completion bash > " + script);
  ASSERT_TRUE(made.finished && made.code == 0) << made.output;
  EXPECT_EQ(Completions(script, "keel lau"), std::vector<std::string>{"launch"});
  EXPECT_EQ(Completions(script, "keel che"), std::vector<std::string>{"checkpoint"});
  EXPECT_EQ(Completions(script, "keel checkpoint ve"), std::vector<std::string>{"verify"});
  EXPECT_EQ(Completions(script, "keel bench re"), std::vector<std::string>{"reshard"});
  // A flag --help lists for a command is offered for its whole name: alone,
  // as "--flag=", or beside the longer flags it begins (--port, --port_file).
  size_t flags = 0;
  for (const std::string& command : CommandNames()) {
    const std::string words = "keel " + command;
    for (const FlagGroup& group : CommandFlagGroups(command)) {
      size_t sampled = 0;  // a sample of each group keeps the test short
      for (size_t i = 0; i < group.flags.size() && sampled < 6; i += 3, ++sampled, ++flags) {
        const std::string flag = "--" + group.flags[i];
        const auto offered = Completions(script, words + " " + flag);
        if (offered.size() == 1) {
          EXPECT_EQ(offered[0], flag + "=") << words;
        } else {
          EXPECT_NE(std::find(offered.begin(), offered.end(), flag), offered.end())
              << words << " " << flag;
        }
      }
    }
  }
  EXPECT_GT(flags, 100u);
  // A flag of another command is not offered.
  EXPECT_TRUE(Completions(script, "keel keygen --checkpoint_ev").empty());
}

TEST(Completion, AnotherShellIsRefusedNamingBash) {
  const auto exit = Keel({"completion", "zsh"});
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 2);
  EXPECT_TRUE(Contains(exit.output, "keel completion bash")) << exit.output;
}

TEST(Help, EveryCommandsHelpExitsZero) {
  for (const std::string command :
       {"scheduler", "server", "worker", "predict", "datagen", "bench", "keygen", "checkpoint"}) {
    const auto exit = Keel({command, "--help"});
    ASSERT_TRUE(exit.finished) << command;
    EXPECT_EQ(exit.code, 0) << command << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, "usage: keel " + command)) << exit.output;
  }
}

TEST(Help, HelpfullExitsZeroListingTheLoggingFlagsToo) {
  const auto exit = Keel({"predict", "--helpfull"});
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--logtostderr=")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--epochs=")) << exit.output;
}

TEST(CommandLine, AMisspelledFlagIsAnErrorSuggestingTheRightOne) {
  const auto exit =
      Keel({"launch", "--job=linear_learner", "--train=/d", "--epoch=2", "--check_flags"});
  ExpectRefusal(exit, 1, "keel launch: error: unknown flag --epoch (did you mean --epochs?)",
                "flags ok");
}

TEST(CommandLine, AMisspelledCommandIsAnErrorSuggestingTheRightOne) {
  const auto exit = Keel({"lanch", "--servers=1"});
  ExpectRefusal(exit, 2, "unknown command 'lanch' (did you mean launch?)");
}

TEST(CommandLine, AFlagTheCommandDoesNotTakeIsAnError) {
  const auto exit = Keel({"predict", "--model_dir=/m", "--data=/d", "--out=/o", "--epochs=3"});
  ExpectRefusal(exit, 1, "--epochs is not a flag of keel predict");
}

TEST(CommandLine, AnL1PenaltyIsTakenWhereTheJobsOptimizerTakesOne) {
  // A binary factorization machine's optimizer, auto, is ftrl: --l1 is its.
  for (std::vector<std::string> args : {std::vector<std::string>{"launch"},
                                        std::vector<std::string>{"server", "--scheduler=h:1"}}) {
    const std::string role = args[0];
    args.insert(args.end(), {"--job=factorization_machines", "--predictor_type=binary_classifier",
                             "--train=/d", "--l1=0.01", "--check_flags"});
    const auto taken = Keel(args);
    ASSERT_TRUE(taken.finished);
    EXPECT_EQ(taken.code, 0) << role << ": " << taken.output;
    EXPECT_TRUE(Contains(taken.output, "flags ok")) << role << ": " << taken.output;
  }
  // The linear learner's auto is adam, which has none.
  const auto refused =
      Keel({"launch", "--job=linear_learner", "--train=/d", "--l1=0.01", "--check_flags"});
  ExpectRefusal(refused, 1, "--l1=0.01: the adam optimizer has no L1 penalty", "flags ok");
}

class Flagfiles : public testing::TempFolderTest {};

TEST_F(Flagfiles, CheckFlagsRefusesAnUnknownKeyNamingTheFileAndLine) {
  const std::string path =
      WriteFile("job.flags", "--job=linear_learner\n--train=/data\n--learning_rat=0.1\n");
  const auto exit = Keel({"worker", "--scheduler=h:1", "--flagfile=" + path, "--check_flags"});
  ExpectRefusal(exit, 1,
                "keel worker: error: " + path +
                    ":3: unknown flag --learning_rat (did you mean "
                    "--learning_rate?)",
                "flags ok");
}

TEST_F(Flagfiles, LaunchRefusesAnUnknownKeyInANestedFlagfileBeforeStartingAnything) {
  const std::string inner = WriteFile("inner.flags", "--epochs=2\n--mini_bach_size=10\n");
  const std::string outer =
      WriteFile("outer.flags", "--job=linear_learner\n--flagfile=" + inner + "\n");
  const auto exit = Keel(
      {"launch", "--servers=1", "--workers=1", "--train=" + folder_ + "/t", "--flagfile=" + outer});
  ExpectRefusal(exit, 1,
                inner +
                    ":2: unknown flag --mini_bach_size (did you mean "
                    "--mini_batch_size?)",
                "[scheduler]");
}

TEST_F(Flagfiles, EveryRoleAcceptsTheSharedJobFlagfile) {
  const std::string path =
      WriteFile("job.flags",
                "--num_servers=1\n--num_workers=1\n--job=linear_learner\n--train=/d\n"
                "--epochs=2\n--checkpoint_uri=/c\n");
  for (const std::vector<std::string>& role :
       {std::vector<std::string>{"scheduler", "--port=9000"},
        std::vector<std::string>{"server", "--scheduler=h:1"},
        std::vector<std::string>{"worker", "--scheduler=h:1"}}) {
    std::vector<std::string> args = role;
    args.push_back("--flagfile=" + path);
    args.push_back("--check_flags");
    const auto exit = Keel(args);
    ASSERT_TRUE(exit.finished);
    EXPECT_EQ(exit.code, 0) << role[0] << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, "flags ok")) << role[0] << ": " << exit.output;
  }
}

// A small training set in `format`, written by datagen (libsvm) and, for
// csv, rewritten densely: "label,x1,x2,...".
class DefaultsJob : public testing::TempFolderTest {
 protected:
  void Generate() {
    const auto exit = Keel({"datagen", "--model=linear", "--rows=2000", "--features=20", "--nnz=5",
                            "--train_files=1", "--out=" + folder_ + "/data"},
                           60);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }
  // The libsvm file `from` as csv of `features` columns after the label.
  void WriteCsv(const std::string& from, const std::string& to, int features) {
    std::istringstream lines(testing::ReadFileOrEmpty(from));
    std::string csv;
    for (std::string line; std::getline(lines, line);) {
      std::istringstream tokens(line);
      std::string label, token;
      tokens >> label;
      std::vector<std::string> row(features, "0");
      while (tokens >> token) {
        const size_t colon = token.find(':');
        row[std::stoi(token.substr(0, colon)) - 1] = token.substr(colon + 1);
      }
      csv += label;
      for (const std::string& value : row) csv += "," + value;
      csv += "\n";
    }
    testing::WriteFile(to, csv);
  }
  // `keel launch` of a 1-epoch linear learner run in `folder_` (the working
  // directory), with `flags`.
  testing::Exit Train(const std::vector<std::string>& flags) {
    std::string command = "cd '" + folder_ + "' && '" + KeelBinary() +
                          "' launch --servers=1 --workers=1 --job=linear_learner --epochs=1 "
                          "--minloglevel=0";
    for (const std::string& flag : flags) command += " '" + flag + "'";
    return testing::Shell(command + " 2>&1", 120);
  }
};

TEST_F(DefaultsJob, WithoutModelDirTheModelGoesToAFolderNamedAtStartAndEnd) {
  Generate();
  const auto exit = Train({"--train=" + folder_ + "/data/train"});
  ASSERT_TRUE(exit.finished);
  ASSERT_EQ(exit.code, 0) << exit.output;
  const std::string prefix = folder_ + "/keel-model-linear_learner-";
  EXPECT_TRUE(Contains(exit.output, "no --model_dir given: the model goes to " + prefix))
      << exit.output;
  EXPECT_TRUE(Contains(exit.output, "keel launch: the model is in " + prefix)) << exit.output;
  std::vector<std::string> models;
  for (const auto& entry : std::filesystem::directory_iterator(folder_)) {
    if (entry.path().string().rfind(prefix, 0) == 0) models.push_back(entry.path().string());
  }
  ASSERT_EQ(models.size(), 1u) << exit.output;
  EXPECT_TRUE(std::filesystem::exists(models[0] + "/weights.bin")) << exit.output;
  EXPECT_TRUE(std::filesystem::exists(models[0] + "/model.json")) << exit.output;
}

TEST_F(DefaultsJob, AFolderOfTheSameSecondIsLeftAloneAndTheJobTakesTheNextName) {
  // Folders for the next 30 seconds exist already (an earlier launch in the
  // same second): the job takes "<time>-2" and touches none of them.
  Generate();
  const std::string prefix = folder_ + "/keel-model-linear_learner-";
  std::vector<std::string> taken;
  const std::time_t now = std::time(nullptr);
  for (int s = 0; s < 30; ++s) {
    const std::time_t when = now + s;
    std::tm utc{};
    gmtime_r(&when, &utc);
    char name[32];
    std::strftime(name, sizeof(name), "%Y%m%d-%H%M%S", &utc);
    taken.push_back(prefix + name);
    std::filesystem::create_directory(taken.back());
    testing::WriteFile(taken.back() + "/earlier", "kept");
  }
  const auto exit = Train({"--train=" + folder_ + "/data/train"});
  ASSERT_TRUE(exit.finished);
  ASSERT_EQ(exit.code, 0) << exit.output;
  std::string chosen;
  for (const std::string& folder : taken) {
    EXPECT_EQ(testing::ReadFileOrEmpty(folder + "/earlier"), "kept") << folder;
    EXPECT_FALSE(std::filesystem::exists(folder + "/weights.bin")) << folder;
    if (std::filesystem::exists(folder + "-2/weights.bin")) chosen = folder + "-2";
  }
  ASSERT_FALSE(chosen.empty()) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "the model goes to " + chosen + "\n")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "keel launch: the model is in " + chosen)) << exit.output;
}

TEST_F(DefaultsJob, CsvDataIsReadAsCsvWithoutDataFormat) {
  Generate();
  WriteCsv(folder_ + "/data/train/part-0.libsvm", folder_ + "/train.csv", 20);
  const auto exit = Train({"--train=" + folder_ + "/train.csv", "--model_dir=" + folder_ + "/m"});
  ASSERT_TRUE(exit.finished);
  ASSERT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "shows commas, so the data is read as csv")) << exit.output;
  EXPECT_TRUE(Contains(testing::ReadFileOrEmpty(folder_ + "/m/model.json"), "\"csv\""));
}

TEST_F(DefaultsJob, CsvDataReadAsLibsvmIsAnErrorNamingTheFlagToSet) {
  Generate();
  WriteCsv(folder_ + "/data/train/part-0.libsvm", folder_ + "/train.csv", 20);
  const auto exit = Train({"--train=" + folder_ + "/train.csv", "--model_dir=" + folder_ + "/m",
                           "--data_format=libsvm"});
  ExpectRefusal(exit, 1,
                "keel launch: error: --data_format=libsvm but " + folder_ +
                    "/train.csv shows commas: it is csv data; set "
                    "--data_format=csv",
                "[scheduler]");  // before anything started
}

}  // namespace
}  // namespace keel
