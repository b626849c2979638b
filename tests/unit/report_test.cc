// The job report's parts: the SVG chart writer, the reader of what a job
// recorded (history.jsonl, the timeline), the HTML page, and the timeline's
// writer.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "io/timeline_writer.h"
#include "report/job_record.h"
#include "report/report_page.h"
#include "report/svg_chart.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::CountOf;
using testing::ErrorOf;

// ---------------------------------------------------------------------------
// The SVG writer

TEST(SvgChart, EscapesEveryTextItDraws) {
  LineChart chart("loss <b>&", "x \"label\"", "y 'label'");
  chart.AddSeries("<script>alert(1)</script>", {{0, 1}, {1, 2}});
  chart.AddMarker(0.5, "kill & <stop>", "worker \"0\" <gone>");
  const std::string svg = chart.Svg();
  EXPECT_FALSE(Contains(svg, "<script")) << svg;
  EXPECT_FALSE(Contains(svg, "<b>")) << svg;
  EXPECT_FALSE(Contains(svg, "<stop>")) << svg;
  EXPECT_FALSE(Contains(svg, "<gone>")) << svg;
  EXPECT_TRUE(Contains(svg, "&lt;script&gt;alert(1)&lt;/script&gt;")) << svg;
  EXPECT_TRUE(Contains(svg, "loss &lt;b&gt;&amp;")) << svg;
  EXPECT_TRUE(Contains(svg, "x &quot;label&quot;")) << svg;
  BarChart bars("bars", "bucket", "pulls");
  bars.AddBar("<=4", 3);
  EXPECT_TRUE(Contains(bars.Svg(), "&lt;=4")) << bars.Svg();
}

TEST(SvgChart, NiceScaleCoversTheRangeWithRoundTicks) {
  const AxisScale scale = NiceScale(0.13, 0.87, 5);
  EXPECT_DOUBLE_EQ(scale.lo, 0);
  EXPECT_DOUBLE_EQ(scale.hi, 1);
  ASSERT_EQ(scale.ticks.size(), 6u);
  for (size_t i = 0; i < scale.ticks.size(); ++i) EXPECT_NEAR(scale.ticks[i], 0.2 * i, 1e-12);
}

TEST(SvgChart, NiceScaleOfLargeCountsStepsByRoundNumbers) {
  const AxisScale scale = NiceScale(1234, 98765, 6);
  EXPECT_DOUBLE_EQ(scale.lo, 0);
  EXPECT_DOUBLE_EQ(scale.hi, 100000);
  EXPECT_EQ(scale.ticks.size(), 6u);  // steps of 20000
}

TEST(SvgChart, ASingleValuedRangeIsWidenedAroundItsValue) {
  const AxisScale scale = NiceScale(5, 5, 5);
  EXPECT_LT(scale.lo, 5);
  EXPECT_GT(scale.hi, 5);
  const AxisScale zero = NiceScale(0, 0, 5);
  EXPECT_DOUBLE_EQ(zero.lo, 0);
  EXPECT_GT(zero.hi, 0);
}

TEST(SvgChart, ARangeTooWideForADoubleStillGetsFiniteTicks) {
  const AxisScale scale = NiceScale(-1.7e308, 1.7e308, 5);
  EXPECT_TRUE(std::isfinite(scale.hi - scale.lo));
  EXPECT_FALSE(scale.ticks.empty());
  LineChart chart("extremes", "x", "y");
  chart.AddSeries("a", {{0, -1.7e308}, {1, 1.7e308}});
  EXPECT_FALSE(Contains(chart.Svg(), "nan")) << chart.Svg();
}

TEST(SvgChart, MapPutsTheRangesEndsOnThePixelSpansEnds) {
  const AxisScale scale = NiceScale(0, 10, 5);
  EXPECT_DOUBLE_EQ(scale.Map(0, 64, 470), 64);
  EXPECT_DOUBLE_EQ(scale.Map(10, 64, 470), 470);
  EXPECT_DOUBLE_EQ(scale.Map(5, 254, 34), 144);  // a y axis runs upwards
}

TEST(SvgChart, TickLabelsAreShortWithUnitsForLargeValues) {
  EXPECT_EQ(TickLabel(0), "0");
  EXPECT_EQ(TickLabel(0.25), "0.25");
  EXPECT_EQ(TickLabel(25000), "25k");
  EXPECT_EQ(TickLabel(1.5e6), "1.5M");
  EXPECT_EQ(TickLabel(2e9), "2G");
}

TEST(SvgChart, AChartWithoutPointsSaysSoInsteadOfDrawingEmptyAxes) {
  LineChart chart("empty", "x", "y");
  chart.AddSeries("nothing", {});
  const std::string svg = chart.Svg();
  EXPECT_TRUE(Contains(svg, "no data to plot")) << svg;
  EXPECT_FALSE(Contains(svg, "<polyline")) << svg;
  BarChart bars("no bars", "x", "y");
  EXPECT_TRUE(Contains(bars.Svg(), "no data to plot"));
}

TEST(SvgChart, NonFinitePointsAreLeftOut) {
  LineChart chart("gaps", "x", "y");
  chart.AddSeries("a", {{0, 1}, {1, NAN}, {2, INFINITY}, {3, 2}});
  EXPECT_EQ(chart.points(), 2u);
  const std::string svg = chart.Svg();
  EXPECT_FALSE(Contains(svg, "nan")) << svg;
  EXPECT_FALSE(Contains(svg, "inf")) << svg;
}

TEST(SvgChart, EachSeriesIsOneLineWithALegendEntry) {
  LineChart chart("two", "x", "y");
  chart.AddSeries("worker 0", {{0, 1}, {1, 2}});
  chart.AddSeries("worker 1", {{0, 2}, {1, 1}});
  chart.AddMarker(0.5, "kill", "kill worker 1");
  chart.AddSpan(0.2, 0.4, "checkpoint", "checkpoint 1");
  const std::string svg = chart.Svg();
  EXPECT_EQ(CountOf(svg, "<svg"), 1u);
  EXPECT_EQ(CountOf(svg, "<polyline"), 2u);
  EXPECT_EQ(CountOf(svg, "class=\"marker\""), 1u);
  EXPECT_EQ(CountOf(svg, "class=\"span\""), 1u);
  EXPECT_TRUE(Contains(svg, ">worker 1</text>")) << svg;
  EXPECT_TRUE(Contains(svg, ">kill</text>")) << svg;
  EXPECT_TRUE(Contains(svg, ">checkpoint</text>")) << svg;
}

TEST(SvgChart, BarsOfNegativeOrNonFiniteValuesAreZeroHigh) {
  BarChart bars("bars", "x", "y");
  bars.AddBar("a", 4);
  bars.AddBar("b", -3);
  bars.AddBar("c", NAN);
  const std::string svg = bars.Svg();
  EXPECT_EQ(CountOf(svg, "class=\"bar\""), 3u);
  EXPECT_EQ(CountOf(svg, "height=\"0.0\""), 2u) << svg;
}

TEST(SvgChart, ABarsLabelTooWideForItIsCutWithAnEllipsis) {
  BarChart bars("bars", "x", "y");
  for (int i = 0; i < 12; ++i) bars.AddBar("ckpt-00000" + std::to_string(i) + "-000000000", 1);
  const std::string svg = bars.Svg();
  EXPECT_FALSE(Contains(svg, "-000000000<")) << svg;
  EXPECT_EQ(CountOf(svg, "…</text>"), 12u) << svg;
  BarChart short_labels("bars", "x", "y");
  short_labels.AddBar("1", 1);
  EXPECT_TRUE(Contains(short_labels.Svg(), ">1</text>"));
}

// ---------------------------------------------------------------------------
// Reading what a job recorded

TEST(JobRecord, AMalformedHistoryLineIsNamedByFileAndLine) {
  const std::string error = ErrorOf([] {
    ParseHistory("{\"epoch\": 1, \"train:objective_loss\": 0.5}\n{\"epoch\": 2, oops}\n",
                 "m/history.jsonl");
  });
  EXPECT_TRUE(Contains(error, "m/history.jsonl:2")) << error;
}

TEST(JobRecord, AHistoryLineThatIsNotAnObjectIsNamed) {
  const std::string error = ErrorOf([] { ParseHistory("\n\n[1, 2]\n", "h.jsonl"); });
  EXPECT_TRUE(Contains(error, "h.jsonl:3: a line must be a JSON object, not an array")) << error;
}

TEST(JobRecord, ATimelineLineWithoutItsTimeIsNamed) {
  JobRecord record;
  const std::string error = ErrorOf([&] {
    ParseTimeline("worker-1.jsonl",
                  "{\"time\": 5, \"event\": \"start\"}\n{\"event\": \"sample\", \"epoch\": 1}\n",
                  "t/worker-1.jsonl", &record);
  });
  EXPECT_TRUE(Contains(error, "t/worker-1.jsonl:2: no \"time\"")) << error;
}

TEST(JobRecord, ATextWhereANumberBelongsIsNamed) {
  JobRecord record;
  const std::string error = ErrorOf([&] {
    ParseTimeline("worker-0.jsonl",
                  "{\"time\": 5, \"event\": \"sample\", \"epoch\": 1, \"examples\": \"many\", "
                  "\"examples_per_second\": 3, \"loss\": 0.5}\n",
                  "w0", &record);
  });
  EXPECT_TRUE(Contains(error, "w0:1: \"examples\" is a string, not a number")) << error;
}

TEST(JobRecord, AnEpochOrCountNoIntegerCanHoldIsNamed) {
  const std::string epoch = ErrorOf([] { ParseHistory("{\"epoch\": 1e300}\n", "h"); });
  EXPECT_TRUE(Contains(epoch, "h:1: \"epoch\" is 1e+300, not a whole number")) << epoch;
  const std::string fraction = ErrorOf([] { ParseHistory("{\"epoch\": 1.5}\n", "h"); });
  EXPECT_TRUE(Contains(fraction, "h:1: \"epoch\" is 1.5")) << fraction;
  JobRecord record;
  const std::string bytes = ErrorOf([&] {
    ParseTimeline("scheduler.jsonl",
                  "{\"time\": 1, \"event\": \"checkpoint\", \"started\": 1, \"seconds\": 1, "
                  "\"bytes\": -5}\n",
                  "s", &record);
  });
  EXPECT_TRUE(Contains(bytes, "s:1: \"bytes\" is -5")) << bytes;
}

TEST(JobRecord, AnUnknownTimelineFileIsRefused) {
  JobRecord record;
  const std::string error =
      ErrorOf([&] { ParseTimeline("notes.jsonl", "", "t/notes.jsonl", &record); });
  EXPECT_TRUE(Contains(error, "t/notes.jsonl: not a timeline file")) << error;
}

TEST(JobRecord, HistoryKeepsEveryFigureAndThePerTableHealth) {
  const auto history = ParseHistory(
      "{\"epoch\": 1, \"seconds\": 2.5, \"examples\": 100, \"train:objective_loss\": 0.6, "
      "\"model_1:validation:roc_auc_score\": 0.7, \"health\": {\"weights\": {\"weight_norm\": "
      "3.5, \"rows_created\": 12}, \"bias\": {\"gradient_norm\": 0.25}}}\n",
      "h");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].epoch, 1);
  EXPECT_DOUBLE_EQ(history[0].seconds, 2.5);
  EXPECT_DOUBLE_EQ(history[0].figures.at("train:objective_loss"), 0.6);
  EXPECT_DOUBLE_EQ(history[0].figures.at("model_1:validation:roc_auc_score"), 0.7);
  EXPECT_DOUBLE_EQ(history[0].health.at("weights").at("weight_norm"), 3.5);
  EXPECT_DOUBLE_EQ(history[0].health.at("weights").at("rows_created"), 12);
  EXPECT_DOUBLE_EQ(history[0].health.at("bias").at("gradient_norm"), 0.25);
}

TEST(JobRecord, AHealthThatIsNotAnObjectOfTablesIsNamed) {
  const std::string error =
      ErrorOf([] { ParseHistory("{\"epoch\": 1, \"health\": {\"weights\": 3}}\n", "h"); });
  EXPECT_TRUE(Contains(error, "h:1: \"health\".\"weights\" is a number")) << error;
}

class JobRecordFolder : public testing::TempFolderTest {};

TEST_F(JobRecordFolder, ReadsTheModelFolderAndLeavesOutAnEarlierJobsLines) {
  MakeDirectories(folder_ + "/timeline");
  WriteFile("history.jsonl", "{\"epoch\": 1, \"seconds\": 1, \"train:objective_loss\": 0.5}\n");
  WriteFile("metrics.json", "{\"validation:roc_auc_score\": 0.8, \"train:epochs\": 1}\n");
  WriteFile("model.json",
            "{\"format_version\": 2, \"job\": \"linear_learner\", \"hyperparameters\": "
            "{\"epochs\": 1, \"optimizer\": {\"name\": \"adam\"}}}\n");
  WriteFile("timeline/scheduler.jsonl",
            "{\"time\": 1000.5, \"event\": \"start\", \"role\": \"scheduler\"}\n"
            "{\"time\": 1003, \"event\": \"leave\", \"role\": \"worker\", \"rank\": 1, "
            "\"reason\": \"silent\"}\n"
            "{\"time\": 1002, \"event\": \"checkpoint\", \"id\": \"ckpt-1\", \"started\": 1001.5, "
            "\"seconds\": 0.5, \"files\": 2, \"bytes\": 4096}\n");
  WriteFile("timeline/launch.jsonl",
            "{\"time\": 1000, \"t\": 0, \"event\": \"start\", \"role\": \"worker\", \"rank\": 1}\n"
            "{\"time\": 1002.5, \"t\": 2.5, \"event\": \"kill\", \"role\": \"worker\", \"rank\": "
            "1, \"spec\": \"kill:worker:1@2.5s\"}\n");
  WriteFile("timeline/worker-0.jsonl",
            "{\"time\": 900, \"event\": \"sample\", \"epoch\": 1, \"examples\": 5, "
            "\"examples_per_second\": 5, \"loss\": 0.9}\n"
            "{\"time\": 1002, \"event\": \"sample\", \"epoch\": 1, \"examples\": 50, "
            "\"examples_per_second\": 25, \"loss\": 0.6}\n");
  WriteFile("timeline/worker-7.jsonl",
            "{\"time\": 800, \"event\": \"sample\", \"epoch\": 1, \"examples\": 5, "
            "\"examples_per_second\": 5, \"loss\": 0.9}\n");
  const JobRecord record = ReadJobRecord(folder_);
  EXPECT_DOUBLE_EQ(record.start_time, 1000);
  ASSERT_EQ(record.workers.size(), 1u);  // worker 7's file is an earlier job's
  ASSERT_EQ(record.workers.at(0).samples.size(), 1u);
  EXPECT_DOUBLE_EQ(record.workers.at(0).samples[0].examples_per_second, 25);
  ASSERT_EQ(record.events.size(), 2u);
  EXPECT_EQ(record.events[0].event, "kill");  // in time order, across files
  EXPECT_EQ(record.events[0].who, "worker 1");
  EXPECT_EQ(record.events[1].event, "leave");
  EXPECT_EQ(record.events[1].detail, "silent");
  ASSERT_EQ(record.checkpoints.size(), 1u);
  EXPECT_EQ(record.checkpoints[0].bytes, 4096u);
  ASSERT_EQ(record.history.size(), 1u);
  EXPECT_DOUBLE_EQ(record.final_metrics.at("validation:roc_auc_score"), 0.8);
  ASSERT_EQ(record.job.size(), 1u);
  EXPECT_EQ(record.job[0].second, "linear_learner");
  ASSERT_EQ(record.hyperparameters.size(), 1u);  // scalars only
  EXPECT_EQ(record.hyperparameters[0].first, "epochs");
}

TEST_F(JobRecordFolder, AFolderWithNothingRecordedIsRefused) {
  const std::string error = ErrorOf([&] { ReadJobRecord(folder_); });
  EXPECT_TRUE(Contains(error, folder_ + ": no model.json, metrics.json, history.jsonl or "
                                        "timeline/"))
      << error;
}

TEST_F(JobRecordFolder, AMalformedTimelineFileIsNamedByItsLine) {
  MakeDirectories(folder_ + "/timeline");
  WriteFile("timeline/worker-0.jsonl", "{\"time\": 1, \"event\": \"start\"}\n{\"time\": \n");
  const std::string error = ErrorOf([&] { ReadJobRecord(folder_); });
  EXPECT_TRUE(Contains(error, "timeline/worker-0.jsonl:2")) << error;
}

// ---------------------------------------------------------------------------
// The page

JobRecord TrainingOnlyRecord() {
  JobRecord record;
  record.model_dir = "/tmp/model";
  record.history = ParseHistory(
      "{\"epoch\": 1, \"train:objective_loss\": 0.6}\n{\"epoch\": 2, \"train:objective_loss\": "
      "0.5}\n",
      "h");
  return record;
}

TEST(ReportPage, MissingDataGivesNotesInsteadOfEmptyPlots) {
  const std::string html = ReportHtml(TrainingOnlyRecord(), "now");
  EXPECT_EQ(CountOf(html, "<svg"), 1u) << html;  // the loss per epoch
  EXPECT_TRUE(Contains(html, "No validation channel")) << html;
  EXPECT_TRUE(Contains(html, "No worker timeline")) << html;
  EXPECT_TRUE(Contains(html, "No membership changes or faults")) << html;
  EXPECT_TRUE(Contains(html, "No checkpoints")) << html;
  EXPECT_TRUE(Contains(html, "No metrics.json")) << html;
  EXPECT_FALSE(Contains(html, "no data to plot")) << html;
}

TEST(ReportPage, IsSelfContained) {
  JobRecord record = TrainingOnlyRecord();
  record.model_dir = "<img src=\"http://example.com/x.png\">";
  const std::string html = ReportHtml(record, "now");
  // The folder's name is text (escaped), not an element a browser would fetch.
  EXPECT_TRUE(Contains(html, "&lt;img src=&quot;http://example.com/x.png&quot;&gt;")) << html;
  EXPECT_FALSE(Contains(html, "src=\"")) << html;
  EXPECT_FALSE(Contains(html, "href=\"")) << html;
  EXPECT_FALSE(Contains(html, "<script")) << html;
  EXPECT_FALSE(Contains(html, "<img")) << html;
  EXPECT_FALSE(Contains(html, "url(")) << html;
}

TEST(ReportPage, HealthFiguresGetAPlotEachWithALinePerTable) {
  JobRecord record = TrainingOnlyRecord();
  record.history = ParseHistory(
      "{\"epoch\": 1, \"health\": {\"weights\": {\"weight_norm\": 1, \"gradient_norm\": 2}, "
      "\"bias\": {\"weight_norm\": 0.5, \"gradient_norm\": 0.1}}}\n"
      "{\"epoch\": 2, \"health\": {\"weights\": {\"weight_norm\": 2, \"gradient_norm\": 1}, "
      "\"bias\": {\"weight_norm\": 0.6, \"gradient_norm\": 0.2}}}\n",
      "h");
  const std::string html = ReportHtml(record, "now");
  EXPECT_TRUE(Contains(html, "weight_norm per epoch")) << html;
  EXPECT_TRUE(Contains(html, "gradient_norm per epoch")) << html;
  const size_t health = html.find("Training health");
  ASSERT_NE(health, std::string::npos);
  EXPECT_EQ(CountOf(html.substr(health), "<polyline"), 4u);
}

TEST(ReportPage, EveryModelsLossAndValidationMetricArePlotted) {
  JobRecord record;
  record.history = ParseHistory(
      "{\"epoch\": 1, \"model_0:train:objective_loss\": 0.6, \"model_1:train:objective_loss\": "
      "0.7, \"model_0:validation:objective_loss\": 0.61, \"model_1:validation:objective_loss\": "
      "0.71, \"model_0:validation:roc_auc_score\": 0.8, \"model_1:validation:roc_auc_score\": "
      "0.75, \"validation:roc_auc_score\": 0.8, \"train:objective_loss\": 0.6}\n",
      "h");
  const std::string html = ReportHtml(record, "now");
  EXPECT_TRUE(Contains(html, ">model 1 validation</text>")) << html;
  EXPECT_TRUE(Contains(html, "Validation roc_auc_score per epoch")) << html;
  EXPECT_EQ(CountOf(html, "<svg"), 2u);
  EXPECT_EQ(CountOf(html, "<polyline"), 6u);  // 4 losses, 2 metrics
}

// ---------------------------------------------------------------------------
// The timeline's writer

class TimelineWriterTest : public testing::TempFolderTest {};

TEST_F(TimelineWriterTest, WritesEachLineAtOnceIntoALocalFolder) {
  TimelineWriter writer(folder_, "worker-3", /*fresh=*/true);
  writer.Record("sample", "\"rank\": 3");
  const auto lines = testing::ReadJsonLines(folder_ + "/timeline/worker-3.jsonl");
  ASSERT_EQ(lines.size(), 1u);  // before any Flush
  EXPECT_EQ(lines[0].at("event"), "sample");
  EXPECT_EQ(lines[0].at("rank"), "3");
  EXPECT_GT(std::stod(lines[0].at("time")), 1.7e9);  // Unix seconds
}

TEST_F(TimelineWriterTest, AFreshStartReplacesTheFileAndAResumedOneGoesOn) {
  {
    TimelineWriter writer(folder_, "scheduler", /*fresh=*/true);
    writer.Record("start", "");
  }
  {
    TimelineWriter writer(folder_, "scheduler", /*fresh=*/false);
    writer.Record("start", "");
  }
  EXPECT_EQ(testing::ReadJsonLines(folder_ + "/timeline/scheduler.jsonl").size(), 2u);
  {
    TimelineWriter writer(folder_, "scheduler", /*fresh=*/true);
    writer.Record("start", "");
  }
  EXPECT_EQ(testing::ReadJsonLines(folder_ + "/timeline/scheduler.jsonl").size(), 1u);
}

TEST_F(TimelineWriterTest, AStorageUrisObjectIsWrittenWholeOnFlushAndContinued) {
  const std::string uri = "file://" + folder_;
  {
    TimelineWriter writer(uri, "launch", /*fresh=*/true);
    writer.Record("start", "");  // the first line goes out at once
    writer.Record("kill", "");   // later ones wait for the interval or Flush
    EXPECT_EQ(testing::ReadJsonLines(folder_ + "/timeline/launch.jsonl").size(), 1u);
    writer.Flush();
    EXPECT_EQ(testing::ReadJsonLines(folder_ + "/timeline/launch.jsonl").size(), 2u);
  }
  {
    TimelineWriter writer(uri, "launch", /*fresh=*/false);
    writer.Record("restart", "");
  }
  const auto lines = testing::ReadJsonLines(folder_ + "/timeline/launch.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].at("event"), "restart");
}

TEST_F(TimelineWriterTest, WithoutAModelFolderNothingIsRecorded) {
  TimelineWriter writer("", "worker-0", /*fresh=*/true);
  EXPECT_FALSE(writer.enabled());
  EXPECT_EQ(writer.location(), "");
  writer.Record("sample", "");
  writer.Flush();
}

TEST(TimelineNumbers, NonFiniteNumbersAreNullAndTimesKeepTheirMilliseconds) {
  EXPECT_EQ(JsonNumberOrNull(NAN), "null");
  EXPECT_EQ(JsonNumberOrNull(INFINITY), "null");
  EXPECT_EQ(JsonNumberOrNull(0.25), "0.25");
  EXPECT_EQ(JsonUnixTime(1764073000.1234), "1764073000.123");
}

}  // namespace
}  // namespace keel
