// `keel`'s last line of defence: whatever a command throws, one line naming
// the command and exit code 1.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <thread>

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

}  // namespace
}  // namespace keel
