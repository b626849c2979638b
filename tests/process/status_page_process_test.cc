// The scheduler's status page on a running `keel launch` job, loaded in
// headless Chromium (Debian's chromium-headless-shell): it renders the view,
// the ranges, the progress and its charts without a console error, and
// refreshes itself from /status.json while the job runs.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>

#include "base/json_reader.h"
#include "browser.h"
#include "scrape.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Browser;
using testing::ConsoleMessages;
using testing::Contains;
using testing::CountOf;
using testing::HttpGet;
using testing::KeelBinary;
using testing::RunBrowser;
using testing::WaitFor;

// The scheduler's port from the launcher's "status page: http://127.0.0.1:PORT/"
// line; 0 until it is printed.
int StatusPagePort(const std::string& output) {
  static const std::regex kLine(R"(status page: http://127\.0\.0\.1:(\d+)/)");
  std::smatch match;
  return std::regex_search(output, match, kLine) ? std::stoi(match[1]) : 0;
}

class StatusPageJob : public testing::TempFolderTest {
 protected:
  StatusPageJob() : TempFolderTest("status-page") {}

  // Two servers with a backup of each other's range, two workers, validation
  // and checkpoints; it runs until the test stops it (early stopping waits a
  // thousand epochs).
  pid_t LaunchJob() {
    const auto data =
        testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=20000", "--features=2000",
                      "--nnz=10", "--seed=7", "--train_files=2", "--out=" + folder_ + "/data"},
                     60);
    EXPECT_EQ(data.code, 0) << data.output;
    return processes_.Start(
        {KeelBinary(), "launch", "--servers=2", "--workers=2", "--replication=1",
         "--job=linear_learner", "--epochs=100000", "--early_stopping_patience=1000",
         "--mini_batch_size=20", "--train=" + folder_ + "/data/train",
         "--validation=" + folder_ + "/data/validation", "--model_dir=" + folder_ + "/model",
         "--checkpoint_uri=" + folder_ + "/checkpoints"});
  }

  testing::Processes processes_;
};

TEST_F(StatusPageJob, ChromiumRendersTheRunningJobAndTheStatusRefreshesLive) {
  if (Browser().empty()) {
    GTEST_SKIP() << "chromium-headless-shell is not installed (scripts/setup.sh installs it): "
                    "the status page was not rendered";
  }
  const pid_t launcher = LaunchJob();
  int port = 0;
  ASSERT_TRUE(WaitFor([&] { return (port = StatusPagePort(processes_.Output(launcher))) > 0; }, 30))
      << processes_.Output(launcher);
  // The page is worth loading once two epochs are decided, a checkpoint is
  // committed and both workers have reported their progress (with heartbeats,
  // once a second: a fast start decides two epochs before the first).
  std::string status;
  ASSERT_TRUE(WaitFor(
      [&] {
        status = HttpGet(port, "/status.json").body;
        if (status.empty()) return false;
        const JsonValue json = ParseJson(status, "/status.json");
        size_t reported = 0;
        for (const JsonValue& worker : json.Find("progress")->Find("workers")->AsArray()) {
          reported += worker.Find("epoch")->AsNumber() > 0 ? 1 : 0;
        }
        return json.Find("progress")->Find("decided")->AsArray().size() >= 2 &&
               json.Find("checkpoints")->Find("committed")->AsNumber() >= 1 && reported == 2;
      },
      120))
      << status << processes_.Output(launcher);

  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  // Virtual time lets the page's 2 s refresh run a few times before the
  // browser takes the DOM or the screenshot.
  const std::string budget = "--virtual-time-budget=7000";
  const auto dom = RunBrowser(folder_ + "/profile", {"--dump-dom", budget}, url);
  ASSERT_TRUE(dom.finished && dom.code == 0) << dom.output;
  EXPECT_TRUE(ConsoleMessages(dom.output).empty()) << dom.output;
  const std::string& page = dom.output;
  // The view: two servers, two workers, each with its address.
  EXPECT_EQ(CountOf(page, "<td>server</td>"), 2u) << page;
  EXPECT_EQ(CountOf(page, "<td>worker</td>"), 2u) << page;
  EXPECT_GE(CountOf(page, "<td>127.0.0.1:"), 4u) << page;
  // The ranges: each backed up on the other server.
  EXPECT_TRUE(Contains(page, "<td>0x0000000000000000</td><td>server 0</td><td>server 1</td>"))
      << page;
  EXPECT_TRUE(Contains(page, "<td>server 1</td><td>server 0</td>")) << page;
  // Progress, the last checkpoint, the joins.
  EXPECT_TRUE(std::regex_search(page, std::regex(R"(Epoch \d+ of 100000)"))) << page;
  EXPECT_TRUE(Contains(page, "ckpt-")) << page;
  EXPECT_EQ(CountOf(page, "<td>join</td>"), 4u) << page;
  // Charts: examples/s of the job and both workers, the validation metric per epoch.
  EXPECT_TRUE(Contains(page, "validation roc_auc_score per epoch")) << page;
  EXPECT_GE(CountOf(page, "<polyline"), 4u) << page;
  // It refreshed from /status.json while the job ran.
  std::smatch refreshed;
  ASSERT_TRUE(std::regex_search(page, refreshed, std::regex(R"(refresh (\d+))"))) << page;
  EXPECT_GE(std::stoi(refreshed[1]), 1) << page;
  EXPECT_TRUE(Contains(page, "<div id=\"updated\" class=\"\">updated ")) << page;

  const std::string png = folder_ + "/status.png";
  const auto shot = RunBrowser(folder_ + "/profile",
                               {"--window-size=1280,1500", "--screenshot=" + png, budget}, url);
  ASSERT_TRUE(shot.finished && shot.code == 0) << shot.output;
  EXPECT_TRUE(ConsoleMessages(shot.output).empty()) << shot.output;
  const auto summary = testing::PngSummary(png);
  EXPECT_EQ(summary.at("width"), 1280);
  EXPECT_EQ(summary.at("height"), 1500);
  EXPECT_GT(summary.at("colours"), 16) << "a blank or one-colour page";
  EXPECT_GT(summary.at("non_white_share"), 0.05) << "a blank page";

  kill(launcher, SIGINT);
  EXPECT_TRUE(processes_.Wait(launcher, 30).finished);
}

}  // namespace
}  // namespace keel
