// `keel`'s last line of defence: whatever a command throws, one line naming
// the command and exit code 1.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/exit_status.h"
#include "cli/commands.h"

namespace keel {
namespace {

// The exit code of ExitCodeOf("keel predict", body) and what it printed.
struct Outcome {
  int code;
  std::string printed;
};

template <typename Body>
Outcome RunAsPredict(Body body) {
  ::testing::internal::CaptureStderr();
  const int code = ExitCodeOf("keel predict", body);
  return {code, ::testing::internal::GetCapturedStderr()};
}

TEST(ExitCodeOf, PassesTheCommandsOwnCodeThrough) {
  EXPECT_EQ(RunAsPredict([] { return 3; }).code, 3);
}

TEST(ExitCodeOf, SaysAKeelErrorsMessage) {
  const Outcome outcome = RunAsPredict([]() -> int { throw MakeError("model.bin: truncated"); });
  EXPECT_EQ(outcome.code, 1);
  EXPECT_EQ(outcome.printed, "keel predict: error: model.bin: truncated\n");
}

TEST(ExitCodeOf, SaysOutOfMemoryForBadAlloc) {
  const Outcome outcome = RunAsPredict([]() -> int { throw std::bad_alloc(); });
  EXPECT_EQ(outcome.code, 1);
  EXPECT_EQ(outcome.printed, "keel predict: error: out of memory\n");
}

TEST(ExitCodeOf, SaysAnotherStandardExceptionsMessage) {
  const Outcome outcome = RunAsPredict([]() -> int { throw std::length_error("vector"); });
  EXPECT_EQ(outcome.code, 1);
  EXPECT_EQ(outcome.printed, "keel predict: error: unexpected error: vector\n");
}

TEST(ExitCodeOf, NamesTheCommandForAnythingElseThrown) {
  const Outcome outcome = RunAsPredict([]() -> int { throw 42; });
  EXPECT_EQ(outcome.code, 1);
  EXPECT_EQ(outcome.printed, "keel predict: error: an exception that is not a std::exception\n");
}

TEST(ReportUncaughtExceptionsAs, EndsTheProcessWithOneLineWhenAThreadThrows) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ReportUncaughtExceptionsAs("keel server");
        std::thread([] { throw std::runtime_error("boom"); }).join();
      },
      ::testing::ExitedWithCode(1), "keel server: fatal error in a thread: unexpected error: boom");
}

// A command that takes operands before its flags (keel bench WHAT, keel
// checkpoint WHAT URI, ...) and lacks one, or finds a flag in its place, exits
// 2 after printing its usage line, and nothing else.
TEST(RunCommandLine, AMissingOperandPrintsTheCommandsUsage) {
  const std::string bench =
      "keel bench: say what to measure: keel bench "
      "kv|zmq|parse|backend|train|checkpoint|admission|reshard|control [flags]\n";
  const std::string admin = "keel admin: keel admin drain --scheduler HOST:PORT --rank R\n";
  const std::string report = "keel report: keel report MODEL_DIR [--out FILE]\n";
  const std::string checkpoint = "keel checkpoint: keel checkpoint ls|show|verify URI\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench"}, bench},
      {{"bench", "--bench_seconds=1"}, bench},
      {{"admin"}, admin},
      {{"admin", "--rank=1"}, admin},
      {{"report"}, report},
      {{"report", "--out=x.html"}, report},
      {{"checkpoint"}, checkpoint},
      {{"checkpoint", "ls"}, checkpoint},
      {{"checkpoint", "--verbose", "file:///tmp/c"}, checkpoint},
      {{"checkpoint", "ls", "--verbose"}, checkpoint},
  };
  for (const auto& [operands, usage] : cases) {
    std::vector<std::string> words = {"keel"};
    words.insert(words.end(), operands.begin(), operands.end());
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    ::testing::internal::CaptureStderr();
    const int code = RunCommandLine(static_cast<int>(argv.size()), argv.data());
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), usage) << words[1] << " " << words.size();
    EXPECT_EQ(code, 2) << words[1] << " " << words.size();
  }
}

}  // namespace
}  // namespace keel
