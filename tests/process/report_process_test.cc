// `keel launch --report` end to end: a small job of two workers records its
// timeline, the report it writes is one self-contained file, and headless
// Chromium (Debian's chromium-headless-shell) renders its plots without a
// console error.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "browser.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Browser;
using testing::ConsoleMessages;
using testing::Contains;
using testing::CountOf;
using testing::KeelBinary;
using testing::PngSummary;
using testing::RunBrowser;

class Report : public testing::TempFolderTest {
 protected:
  // A two-worker job with validation, checkpoints and a worker stopped for a
  // second; returns the launcher's output. 100,000 rows in minibatches of 20
  // make the job last about 2.5 s on an idle machine, so the stop half a
  // second after the job's start finds it running (with 20,000 rows it ended
  // at 0.7 s, once the start-up was fast; timed from the launch, the stop
  // could come before the cluster formed on a loaded machine).
  std::string LaunchJobWithReport() {
    const auto data =
        testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=100000", "--features=2000",
                      "--nnz=10", "--seed=7", "--train_files=2", "--out=" + folder_},
                     60);
    EXPECT_TRUE(data.finished && data.code == 0) << data.output;
    const auto exit =
        testing::Run({KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=linear_learner",
                      "--epochs=3", "--mini_batch_size=20", "--train=" + folder_ + "/train",
                      "--validation=" + folder_ + "/validation", "--model_dir=" + model_dir_,
                      "--checkpoint_uri=" + folder_ + "/checkpoints",
                      "--faults=stop:worker:1@start+0.5s+1s", "--minloglevel=1", "--report"},
                     240);
    EXPECT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 0) << exit.output;
    return exit.output;
  }

  const std::string model_dir_ = folder_ + "/model";
};

TEST_F(Report, ALaunchedJobRecordsItsTimelineAndWritesASelfContainedReportChromiumRenders) {
  const std::string output = LaunchJobWithReport();
  const std::string html_path = model_dir_ + "/report.html";
  EXPECT_TRUE(Contains(output, "report: " + html_path)) << output;
  const std::string html = testing::ReadFileOrEmpty(html_path);
  ASSERT_FALSE(html.empty()) << output;

  // The roles recorded their parts of the timeline.
  const std::string timeline = model_dir_ + "/timeline/";
  for (const char* worker : {"worker-0.jsonl", "worker-1.jsonl"}) {
    EXPECT_FALSE(testing::EventsNamed(timeline + worker, "sample").empty()) << worker;
    EXPECT_EQ(testing::EventsNamed(timeline + worker, "epoch").size(), 3u) << worker;
  }
  EXPECT_EQ(testing::EventsNamed(timeline + "scheduler.jsonl", "join").size(), 4u);
  EXPECT_FALSE(testing::EventsNamed(timeline + "scheduler.jsonl", "checkpoint").empty());
  EXPECT_EQ(testing::EventsNamed(timeline + "launch.jsonl", "stop").size(), 1u);

  // Self-contained: nothing for a browser to fetch.
  for (const char* outside :
       {"src=", "href=", "http://", "https://", "<script", "<link", "@import", "url("}) {
    EXPECT_FALSE(Contains(html, outside)) << outside;
  }
  for (const char* plot : {"Loss per epoch", "Validation roc_auc_score per epoch",
                           "Examples/s per worker", "Training loss per worker",
                           "Observed staleness", "Gate waits per epoch", "Checkpoint times"}) {
    EXPECT_TRUE(Contains(html, plot)) << plot;
  }
  EXPECT_TRUE(Contains(html, "stop worker 1")) << "the fault marked on the time axis";

  if (Browser().empty()) {
    GTEST_SKIP() << "chromium-headless-shell is not installed (scripts/setup.sh installs it): "
                    "the report was not rendered";
  }
  const std::string url = "file://" + html_path;
  const std::string png = folder_ + "/report.png";
  const auto shot =
      RunBrowser(folder_ + "/profile", {"--window-size=1280,1600", "--screenshot=" + png}, url);
  ASSERT_TRUE(shot.finished && shot.code == 0) << shot.output;
  EXPECT_TRUE(ConsoleMessages(shot.output).empty()) << shot.output;
  const auto summary = PngSummary(png);
  EXPECT_EQ(summary.at("width"), 1280);
  EXPECT_EQ(summary.at("height"), 1600);
  EXPECT_GT(summary.at("colours"), 16) << "a blank or one-colour page";
  EXPECT_GT(summary.at("non_white_share"), 0.02) << "a blank page";

  const auto dom = RunBrowser(folder_ + "/profile", {"--dump-dom"}, url);
  ASSERT_TRUE(dom.finished && dom.code == 0) << dom.output;
  EXPECT_TRUE(ConsoleMessages(dom.output).empty()) << dom.output;
  EXPECT_GE(CountOf(dom.output, "<svg"), 7u);
  EXPECT_EQ(CountOf(dom.output, "<svg"), CountOf(html, "<svg"));
  EXPECT_EQ(CountOf(dom.output, "<polyline"), CountOf(html, "<polyline"));
  EXPECT_GE(CountOf(dom.output, "<polyline"), 8u);  // 2 losses, 1 metric, 2x2 over time, 2 waits
}

TEST_F(Report, AMalformedTimelineLineFailsTheCommandNamingFileAndLineAndWritesNothing) {
  testing::WriteFile(folder_ + "/history.jsonl", "{\"epoch\": 1, \"seconds\": 1}\n");
  mkdir((folder_ + "/timeline").c_str(), 0755);
  testing::WriteFile(folder_ + "/timeline/worker-1.jsonl",
                     "{\"time\": 5, \"event\": \"start\"}\n{\"time\": 6, \"event\": \"sample\"");
  const auto exit = testing::Run({KeelBinary(), "report", folder_}, 30);
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(
      Contains(exit.output, "keel report: error: " + folder_ + "/timeline/worker-1.jsonl:2"))
      << exit.output;
  EXPECT_FALSE(Contains(exit.output, "report: /")) << exit.output;
  EXPECT_TRUE(testing::ReadFileOrEmpty(folder_ + "/report.html").empty());
}

// The check for console errors above can fail: a page that logs one and
// throws is caught by it.
TEST_F(Report, TheConsoleCheckSeesAPagesErrors) {
  if (Browser().empty()) GTEST_SKIP() << "chromium-headless-shell is not installed";
  testing::WriteFile(folder_ + "/bad.html",
                     "<!DOCTYPE html><html><body><p>x</p><script>console.error('boom');"
                     "throw new Error('uncaught in the page');</script></body></html>");
  const auto exit =
      RunBrowser(folder_ + "/profile", {"--dump-dom"}, "file://" + folder_ + "/bad.html");
  ASSERT_TRUE(exit.finished) << exit.output;
  const auto messages = ConsoleMessages(exit.output);
  ASSERT_EQ(messages.size(), 2u) << exit.output;
  EXPECT_TRUE(Contains(messages[0], "boom")) << messages[0];
  EXPECT_TRUE(Contains(messages[1], "Uncaught Error: uncaught in the page")) << messages[1];
}

}  // namespace
}  // namespace keel
