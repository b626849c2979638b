// The job's progress display: its arithmetic (rate, share of the epoch, time
// left), what the scheduler keeps and refuses, the records' wire form, the
// renderer (bar and lines), the launcher's choice of lines, and the summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/exit_status.h"
#include "launch/job_summary.h"
#include "launch/progress_display.h"
#include "launch/role_output.h"
#include "scheduler/job_progress.h"
#include "scheduler/progress_estimate.h"
#include "scheduler/progress_record.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;

// ---------------------------------------------------------------------------
// RateMeter and EstimateProgress

TEST(RateMeter, FirstWindowSetsTheRate) {
  RateMeter meter(/*window_s=*/1.0, /*time_constant_s=*/5.0);
  meter.Add(500, 10.0, 10.5);
  EXPECT_EQ(meter.rate(), 0);  // the window is not closed yet
  meter.Add(500, 10.5, 11.0);
  EXPECT_DOUBLE_EQ(meter.rate(), 1000);
}

TEST(RateMeter, AWindowOpensWhereItsFirstExamplesBegan) {
  RateMeter meter(1.0, 5.0);
  meter.Add(2000, 0.0, 2.0);
  EXPECT_DOUBLE_EQ(meter.rate(), 1000);
}

TEST(RateMeter, LaterWindowsMoveTheRateByTheirWeight) {
  RateMeter meter(1.0, 5.0);
  meter.Add(1000, 0.0, 1.0);  // 1000/s
  meter.Add(3000, 1.0, 2.0);  // a window of 3000/s moves it by 1 - e^(-1/5)
  const double weight = 1 - std::exp(-1.0 / 5.0);
  EXPECT_NEAR(meter.rate(), 1000 + weight * 2000, 1e-9);
}

TEST(RateMeter, APausedWindowIsNotCounted) {
  RateMeter meter(1.0, 5.0);
  meter.Add(1000, 0.0, 1.0);  // 1000/s
  meter.Add(100, 1.0, 1.5);
  meter.Pause();  // 100 examples in half a window: dropped, and the time until 10 s
  meter.Add(1000, 10.0, 11.0);
  EXPECT_DOUBLE_EQ(meter.rate(), 1000);
}

TEST(EstimateProgress, UnknownWithoutAnEpochSize) {
  ProgressCounts counts;
  counts.epoch = 1;
  counts.epochs = 3;
  counts.epoch_done = 400;
  counts.rate = 100;
  const ProgressFigures figures = EstimateProgress(counts);
  EXPECT_EQ(figures.epoch_fraction, -1);
  EXPECT_EQ(figures.eta_seconds, -1);
}

TEST(EstimateProgress, FirstEpochTimeLeftIsExamplesLeftOverTheRate) {
  ProgressCounts counts;
  counts.epoch = 1;
  counts.epochs = 3;
  counts.epoch_done = 250;
  counts.epoch_expected = 1000;
  counts.rate = 50;
  const ProgressFigures figures = EstimateProgress(counts);
  EXPECT_DOUBLE_EQ(figures.epoch_fraction, 0.25);
  // 750 left of this epoch and 2000 of the two after it, at 50/s.
  EXPECT_DOUBLE_EQ(figures.eta_seconds, 2750.0 / 50);
}

TEST(EstimateProgress, AfterAnEpochTheDecidedEpochsWallTimePerExampleWins) {
  ProgressCounts counts;
  counts.epoch = 2;
  counts.epochs = 3;
  counts.epoch_done = 500;
  counts.epoch_expected = 1000;
  counts.rate = 1000;                 // the bare reading rate
  counts.seconds_per_example = 0.01;  // with validation and barriers
  EXPECT_DOUBLE_EQ(EstimateProgress(counts).eta_seconds, 1500 * 0.01);
}

TEST(EstimateProgress, EarlyStopLeavesNoEpochsAfterThisOne) {
  ProgressCounts counts;
  counts.epoch = 2;
  counts.epochs = 10;
  counts.epoch_done = 1000;
  counts.epoch_expected = 1000;
  counts.seconds_per_example = 0.01;
  counts.stopping = true;
  EXPECT_DOUBLE_EQ(EstimateProgress(counts).eta_seconds, 0);
}

TEST(EstimateProgress, NoRateNoTimeLeft) {
  ProgressCounts counts;
  counts.epoch = 1;
  counts.epochs = 2;
  counts.epoch_expected = 1000;
  EXPECT_EQ(EstimateProgress(counts).eta_seconds, -1);
  EXPECT_EQ(EstimateProgress(counts).epoch_fraction, 0);
}

// ---------------------------------------------------------------------------
// JobProgress and its checks

proto::WorkerCursor Cursor(int epoch, uint64_t examples, double loss = 0) {
  proto::WorkerCursor cursor;
  cursor.set_epoch(epoch);
  cursor.set_examples(examples);
  cursor.set_loss(loss);
  return cursor;
}

proto::ProgressReport Share(int epochs, uint64_t share) {
  proto::ProgressReport report;
  report.set_epochs(epochs);
  report.set_share_examples(share);
  return report;
}

TEST(JobProgress, SumsTheWorkersExamplesAndKnowsTheEpochFromTheirShares) {
  JobProgress progress(2);
  const proto::WorkerCursor first = Cursor(1, 100, 50), second = Cursor(1, 300, 30);
  EXPECT_EQ(progress.OnReport(11, 0, &first, 0, Share(4, 500), 1.0), "");
  EXPECT_EQ(progress.OnReport(12, 1, &second, 0, Share(4, 500), 1.0), "");
  const ProgressSnapshot snapshot = progress.Snapshot(2.0);
  EXPECT_EQ(snapshot.epochs, 4);
  EXPECT_EQ(snapshot.epoch, 1);
  EXPECT_EQ(snapshot.epoch_done, 400u);
  EXPECT_EQ(snapshot.epoch_expected, 1000u);
  EXPECT_DOUBLE_EQ(snapshot.figures.epoch_fraction, 0.4);
  EXPECT_DOUBLE_EQ(snapshot.training_loss, 80.0 / 400);
  ASSERT_EQ(snapshot.workers.size(), 2u);
  EXPECT_EQ(snapshot.workers[1].node_id, 12);
  EXPECT_EQ(snapshot.workers[1].examples, 300u);
}

TEST(JobProgress, EpochSizeIsUnknownWhileAShareIsUnknown) {
  JobProgress progress(2);
  const proto::WorkerCursor cursor = Cursor(1, 100);
  progress.OnReport(11, 0, &cursor, 0, Share(4, 500), 1.0);
  EXPECT_EQ(progress.Snapshot(2.0).epoch_expected, 0u);  // rank 1 has not reported
  progress.OnReport(12, 1, &cursor, 0, Share(4, 0), 1.0);   // a pipe: not counted
  EXPECT_EQ(progress.Snapshot(2.0).epoch_expected, 0u);
  EXPECT_EQ(progress.Snapshot(2.0).figures.eta_seconds, -1);
}

TEST(JobProgress, ADecidedEpochSetsTheEpochSizeAndTheWorkersValidation) {
  JobProgress progress(1);
  const proto::WorkerCursor cursor = Cursor(1, 800);
  progress.OnReport(11, 0, &cursor, 0, Share(3, 0), 0.0);
  proto::ProgressReport decided = Share(3, 0);
  decided.mutable_decided()->set_epoch(1);
  decided.mutable_decided()->set_examples(800);
  decided.mutable_decided()->set_seconds(8.0);
  (*decided.mutable_decided()->mutable_metrics())["validation:roc_auc_score"] = 0.75;
  (*decided.mutable_decided()->mutable_metrics())["train:objective_loss"] = 0.5;
  EXPECT_EQ(progress.OnReport(11, 0, nullptr, 0, decided, 8.0), "");
  const ProgressSnapshot snapshot = progress.Snapshot(8.0);
  EXPECT_EQ(snapshot.epoch_expected, 800u);
  ASSERT_EQ(snapshot.decided.size(), 1u);
  EXPECT_DOUBLE_EQ(snapshot.decided[0].seconds, 8.0);
  EXPECT_EQ(snapshot.workers[0].validation.size(), 1u);
  // Epoch 1 took 8 s for 800 examples: two more epochs of 800 take 16 s.
  EXPECT_DOUBLE_EQ(snapshot.figures.eta_seconds, 16.0);
}

proto::ProgressReport Decided(int epochs, int epoch, uint64_t examples, double seconds) {
  proto::ProgressReport report = Share(epochs, 0);
  report.mutable_decided()->set_epoch(epoch);
  report.mutable_decided()->set_examples(examples);
  report.mutable_decided()->set_seconds(seconds);
  return report;
}

TEST(JobProgress, AfterTwoEpochsTheTimeLeftIsTheWallTimePerExampleBetweenThem) {
  JobProgress progress(1);
  progress.OnReport(11, 0, nullptr, 0, Decided(4, 1, 800, 10.0), 0.0);  // 10 s with the start
  progress.OnReport(11, 0, nullptr, 0, Decided(4, 2, 800, 14.0), 0.0);  // 4 s for 800
  EXPECT_DOUBLE_EQ(progress.Snapshot(0).figures.eta_seconds, 2 * 800 * 4.0 / 800);
  const proto::WorkerCursor cursor = Cursor(3, 200);
  progress.OnReport(11, 0, &cursor, 0, Share(4, 0), 0.0);
  const ProgressSnapshot snapshot = progress.Snapshot(0);
  EXPECT_EQ(snapshot.epoch, 3);
  EXPECT_DOUBLE_EQ(snapshot.figures.epoch_fraction, 0.25);
  EXPECT_DOUBLE_EQ(snapshot.figures.eta_seconds, (600 + 800) * 4.0 / 800);
}

TEST(JobProgress, TheEndRecordCountsTheDecidedEpochsExamples) {
  JobProgress progress(1);
  const proto::WorkerCursor cursor = Cursor(1, 300);  // a report before the epoch's end
  progress.OnReport(11, 0, &cursor, 0, Share(2, 0), 0.0);
  progress.OnReport(11, 0, nullptr, 0, Decided(2, 1, 1000, 3.0), 1.0);
  progress.OnReport(11, 0, nullptr, 0, Decided(2, 2, 1000, 5.0), 2.0);
  const ProgressRecord end = EndRecordOf(progress.Snapshot(2.0), 0, "");
  EXPECT_EQ(end.examples, 2000u);
  EXPECT_DOUBLE_EQ(end.seconds, 5.0);
  EXPECT_EQ(end.epochs_run, 2);
  EXPECT_FALSE(end.reported);  // no outcome came
}

// A scheduler started again mid-job hears only the epochs decided since (and
// the latest one, sent again): the end record counts the job's examples from
// the leading worker's running total, not from the epochs it heard. Before,
// a job of 40 epochs reported the examples of the last 30.
TEST(JobProgress, AfterASchedulerRestartTheEndRecordCountsEveryEpochsExamples) {
  JobProgress progress(1);
  proto::ProgressReport third = Decided(4, 3, 1000, 7.0), fourth = Decided(4, 4, 1000, 9.0);
  third.mutable_decided()->set_total_examples(3000);
  fourth.mutable_decided()->set_total_examples(4000);
  progress.OnReport(11, 0, nullptr, 0, third, 1.0);
  progress.OnReport(11, 0, nullptr, 0, fourth, 2.0);
  const ProgressRecord end = EndRecordOf(progress.Snapshot(2.0), 0, "");
  EXPECT_EQ(end.examples, 4000u);
  EXPECT_EQ(end.epochs_run, 4);  // the last decided epoch, not the 2 it heard
}

// A replacement of the leading worker counts its seconds and running total
// from its own start: the end record's neither go back.
TEST(JobProgress, ALeadingWorkersReplacementDoesNotSetTheJobsCountsBack) {
  JobProgress progress(1);
  proto::ProgressReport second = Decided(4, 2, 1000, 8.0), third = Decided(4, 3, 1000, 2.0);
  second.mutable_decided()->set_total_examples(2000);
  third.mutable_decided()->set_total_examples(1000);  // the replacement's first epoch
  progress.OnReport(11, 0, nullptr, 0, second, 1.0);
  progress.OnReport(12, 0, nullptr, 0, third, 2.0);
  const ProgressRecord end = EndRecordOf(progress.Snapshot(2.0), 0, "");
  EXPECT_EQ(end.examples, 3000u);
  EXPECT_DOUBLE_EQ(end.seconds, 8.0);
}

TEST(JobProgress, AWorkersRateComesFromItsReportsWithinAnEpoch) {
  JobProgress progress(1);
  const proto::WorkerCursor at_one = Cursor(1, 100), at_three = Cursor(1, 700);
  progress.OnReport(11, 0, &at_one, 0, Share(2, 0), 1.0);
  progress.OnReport(11, 0, &at_three, 0, Share(2, 0), 3.0);
  EXPECT_DOUBLE_EQ(progress.Snapshot(3.0).workers[0].examples_per_second, 300);
  EXPECT_EQ(progress.Snapshot(3.0).examples_read, 700u);
}

TEST(JobProgress, AWorkersFirstReportDoesNotCountTowardsTheRate) {
  JobProgress progress(1);
  const proto::WorkerCursor first = Cursor(1, 5000), later = Cursor(1, 5200),
                            last = Cursor(1, 5400);
  progress.OnReport(11, 0, &first, 0, Share(2, 0), 10.0);  // read over an unknown time
  progress.OnReport(11, 0, &later, 0, Share(2, 0), 11.0);
  progress.OnReport(11, 0, &last, 0, Share(2, 0), 12.0);
  EXPECT_DOUBLE_EQ(progress.Snapshot(12.0).examples_per_second, 200);
}

TEST(JobProgress, AnEpochsFirstReportCountsOverTheTimeTheWorkerSaysItRead) {
  // Epochs shorter than the reports' interval: every report is an epoch's
  // first. Each says the worker read 1000 examples in 0.5 s.
  JobProgress progress(1);
  const proto::WorkerCursor first = Cursor(1, 1000), second = Cursor(2, 1000),
                            third = Cursor(3, 1000);
  progress.OnReport(11, 0, &first, 0.5, Share(4, 1000), 10.0);
  EXPECT_DOUBLE_EQ(progress.Snapshot(10.0).workers[0].examples_per_second, 2000);
  progress.OnReport(11, 0, &second, 0.5, Share(4, 1000), 10.6);  // 0.1 s between epochs
  progress.OnReport(11, 0, &third, 0.5, Share(4, 1000), 11.2);
  // The job reads at 2000/s: the pauses between epochs are not counted.
  EXPECT_DOUBLE_EQ(progress.Snapshot(11.2).examples_per_second, 2000);
  EXPECT_EQ(progress.Snapshot(11.2).examples_read, 3000u);
}

TEST(JobProgress, TheJobsRateIsItsWorkersRatesOverTheirReadingTime) {
  JobProgress progress(2);
  const proto::WorkerCursor a = Cursor(1, 1000), b = Cursor(1, 3000), c = Cursor(1, 500);
  progress.OnReport(11, 0, &a, 1.0, Share(2, 0), 5.0);
  progress.OnReport(11, 0, &b, 2.0, Share(2, 0), 6.0);  // 2000 more in 1 s of reading
  progress.OnReport(12, 1, &c, 0.5, Share(2, 0), 6.0);  // 1000/s
  EXPECT_DOUBLE_EQ(progress.Snapshot(6.0).workers[0].examples_per_second, 2000);
  EXPECT_DOUBLE_EQ(progress.Snapshot(6.0).examples_per_second, 3000);
  // A worker not heard from for longer than kRateHeardWithinS no longer counts.
  const proto::WorkerCursor d = Cursor(1, 4000);
  progress.OnReport(11, 0, &d, 2.5, Share(2, 0), 6.0 + JobProgress::kRateHeardWithinS);
  EXPECT_DOUBLE_EQ(progress.Snapshot(6.5 + JobProgress::kRateHeardWithinS).examples_per_second,
                   2000);
}

TEST(JobProgress, TheRateLeavesOutThePauseBetweenEpochs) {
  JobProgress progress(1);
  const proto::WorkerCursor a = Cursor(1, 0), b = Cursor(1, 1000), c = Cursor(1, 2000);
  progress.OnReport(11, 0, &a, 0, Share(2, 2000), 0.0);
  progress.OnReport(11, 0, &b, 0, Share(2, 2000), 1.0);  // 1000/s
  progress.OnReport(11, 0, &c, 0, Share(2, 2000), 2.0);
  progress.OnReport(11, 0, &c, 0, Share(2, 2000), 3.0);  // idle: validation
  progress.OnReport(11, 0, &c, 0, Share(2, 2000), 9.0);
  const proto::WorkerCursor d = Cursor(2, 500), e = Cursor(2, 1500), f = Cursor(2, 2000);
  progress.OnReport(11, 0, &d, 0, Share(2, 2000), 10.0);  // the epoch's first: a baseline
  progress.OnReport(11, 0, &e, 0, Share(2, 2000), 11.0);
  progress.OnReport(11, 0, &f, 0, Share(2, 2000), 11.5);
  EXPECT_NEAR(progress.Snapshot(11.5).examples_per_second, 1000, 1e-9);
}

TEST(JobProgress, TheOutcomeIsKept) {
  JobProgress progress(1);
  proto::ProgressReport report = Share(5, 0);
  report.mutable_outcome()->set_epochs_run(3);
  report.mutable_outcome()->set_stopped_early(true);
  report.mutable_outcome()->set_model_dir("/tmp/model");
  EXPECT_EQ(progress.OnReport(11, 0, nullptr, 0, report, 1.0), "");
  const ProgressSnapshot snapshot = progress.Snapshot(1.0);
  ASSERT_TRUE(snapshot.end.has_value());
  EXPECT_EQ(snapshot.end->epochs_run, 3);
  EXPECT_TRUE(snapshot.end->stopped_early);
  EXPECT_EQ(snapshot.end->model_dir, "/tmp/model");
}

TEST(JobProgress, EveryChangeAdvancesTheVersion) {
  JobProgress progress(1);
  const uint64_t before = progress.Snapshot(0).version;
  const proto::WorkerCursor cursor = Cursor(1, 1);
  progress.OnReport(11, 0, &cursor, 0, Share(2, 0), 1.0);
  EXPECT_GT(progress.WaitForChange(before, 0.0), before);
}

TEST(JobProgressChecks, OnlyWorkerZeroDecidesEpochs) {
  proto::ProgressReport report = Share(3, 0);
  report.mutable_decided()->set_epoch(1);
  EXPECT_TRUE(Contains(CheckProgressReport(1, nullptr, report), "only worker 0"));
  EXPECT_EQ(CheckProgressReport(0, nullptr, report), "");
}

TEST(JobProgressChecks, ADecidedEpochBeyondTheJobsIsRefused) {
  proto::ProgressReport report = Share(3, 0);
  report.mutable_decided()->set_epoch(4);
  EXPECT_TRUE(Contains(CheckProgressReport(0, nullptr, report), "epoch 4 of a job of 3"));
}

TEST(JobProgressChecks, ADecidedEpochsTimeOutOfBoundsIsRefused) {
  EXPECT_FALSE(CheckProgressReport(0, nullptr, Decided(3, 1, 10, -1)).empty());
  EXPECT_FALSE(CheckProgressReport(0, nullptr, Decided(3, 1, 10, NAN)).empty());
  EXPECT_EQ(CheckProgressReport(0, nullptr, Decided(3, 1, 10, 2.5)), "");
}

TEST(JobProgressChecks, EpochsOutOfBoundsAreRefused) {
  EXPECT_FALSE(CheckProgressReport(0, nullptr, Share(-1, 0)).empty());
  EXPECT_FALSE(CheckProgressReport(0, nullptr, Share(kMaxProgressEpochs + 1, 0)).empty());
  const proto::WorkerCursor cursor = Cursor(-5, 0);
  EXPECT_FALSE(CheckProgressReport(0, &cursor, Share(3, 0)).empty());
}

TEST(JobProgressChecks, TooManyMetricsAreRefused) {
  proto::ProgressReport report = Share(3, 0);
  for (int i = 0; i <= kMaxProgressMetrics; ++i) {
    (*report.mutable_outcome()->mutable_metrics())["m" + std::to_string(i)] = i;
  }
  EXPECT_TRUE(Contains(CheckProgressReport(0, nullptr, report), "metrics"));
}

TEST(JobProgressChecks, ALongModelFolderIsRefused) {
  proto::ProgressReport report = Share(3, 0);
  report.mutable_outcome()->set_model_dir(std::string(kMaxProgressPathBytes + 1, 'a'));
  EXPECT_TRUE(Contains(CheckProgressReport(0, nullptr, report), "model folder"));
}

TEST(JobProgressChecks, ARefusedReportChangesNothing) {
  JobProgress progress(2);
  proto::ProgressReport report = Share(3, 0);
  report.mutable_decided()->set_epoch(1);
  EXPECT_FALSE(progress.OnReport(12, 1, nullptr, 0, report, 1.0).empty());
  EXPECT_FALSE(progress.OnReport(13, 7, nullptr, 0, Share(3, 0), 1.0).empty());  // no such rank
  const ProgressSnapshot snapshot = progress.Snapshot(1.0);
  EXPECT_EQ(snapshot.version, 0u);
  EXPECT_TRUE(snapshot.decided.empty());
  EXPECT_TRUE(snapshot.workers.empty());
}

// ---------------------------------------------------------------------------
// Records

TEST(ProgressRecord, AnEpochRecordReadsBackAsWritten) {
  ProgressRecord record;
  record.type = ProgressRecord::Type::kEpoch;
  record.epoch = 3;
  record.epochs = 15;
  record.examples = 85000;
  record.seconds = 11.25;
  record.stop = true;
  record.metrics = {{"validation:roc_auc_score", 0.7712}, {"validation:rmse", NAN}};
  const std::string line = FormatProgressRecord(record);
  EXPECT_EQ(line.rfind(kProgressRecordPrefix, 0), 0u);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  ProgressRecord read;
  ASSERT_TRUE(ParseProgressRecord(line, &read));
  EXPECT_EQ(read.type, ProgressRecord::Type::kEpoch);
  EXPECT_EQ(read.epoch, 3);
  EXPECT_EQ(read.epochs, 15);
  EXPECT_EQ(read.examples, 85000u);
  EXPECT_DOUBLE_EQ(read.seconds, 11.25);
  EXPECT_TRUE(read.stop);
  EXPECT_DOUBLE_EQ(read.metrics.at("validation:roc_auc_score"), 0.7712);
  EXPECT_TRUE(std::isnan(read.metrics.at("validation:rmse")));
}

TEST(ProgressRecord, AnEndRecordKeepsItsPathsAndFailures) {
  ProgressRecord record;
  record.type = ProgressRecord::Type::kEnd;
  record.model_dir = "/data/model \"one\"";
  record.checkpoint_uri = "s3://bucket/ckpt";
  record.failed_workers = 2;
  record.reported = true;
  ProgressRecord read;
  ASSERT_TRUE(ParseProgressRecord(FormatProgressRecord(record), &read));
  EXPECT_EQ(read.model_dir, record.model_dir);
  EXPECT_EQ(read.checkpoint_uri, record.checkpoint_uri);
  EXPECT_EQ(read.failed_workers, 2);
  EXPECT_TRUE(read.reported);
  EXPECT_TRUE(read.lost_ranges.empty());
  record.lost_ranges = {1, 4};
  ASSERT_TRUE(ParseProgressRecord(FormatProgressRecord(record), &read));
  EXPECT_EQ(read.lost_ranges, (std::vector<size_t>{1, 4}));
}

TEST(ProgressRecord, AnotherLineIsNotARecord) {
  ProgressRecord read;
  EXPECT_FALSE(ParseProgressRecord("I1125 12:00:00.000000 1 x.cc:1] hello", &read));
}

TEST(ProgressRecord, AMalformedRecordIsAnErrorNamingIt) {
  ProgressRecord read;
  EXPECT_TRUE(Contains(testing::ErrorOf([&] { ParseProgressRecord("keel-progress {", &read); }),
                       "progress record"));
  EXPECT_TRUE(Contains(
      testing::ErrorOf([&] { ParseProgressRecord("keel-progress {\"type\":\"what\"}", &read); }),
      "unknown type 'what'"));
}

// ---------------------------------------------------------------------------
// The display

// A terminal as a transcript: what went to standard output and to standard error.
struct FakeConsole {
  std::string out, err;
  ConsoleWrite Write() {
    return [this](const std::string& text, bool to_stderr) { (to_stderr ? err : out) += text; };
  }
};

ProgressRecord Progress(int epoch, int epochs, uint64_t done, uint64_t expected, double rate,
                        double eta) {
  ProgressRecord record;
  record.type = ProgressRecord::Type::kProgress;
  record.epoch = epoch;
  record.epochs = epochs;
  record.examples = done;
  record.expected = expected;
  record.fraction = expected ? static_cast<double>(done) / expected : -1;
  record.rate = rate;
  record.eta = eta;
  return record;
}

ProgressRecord Epoch(int epoch, int epochs, double seconds, double auc, bool stop = false) {
  ProgressRecord record;
  record.type = ProgressRecord::Type::kEpoch;
  record.epoch = epoch;
  record.epochs = epochs;
  record.examples = 85000;
  record.seconds = seconds;
  record.stop = stop;
  record.metrics = {{"validation:roc_auc_score", auc}, {"train:objective_loss", 0.52}};
  return record;
}

TEST(ProgressMode, AutoIsABarOnATerminalAndLinesElsewhere) {
  EXPECT_EQ(ProgressModeFromFlag("auto", true), ProgressMode::kBar);
  EXPECT_EQ(ProgressModeFromFlag("auto", false), ProgressMode::kLines);
  EXPECT_EQ(ProgressModeFromFlag("none", true), ProgressMode::kNone);
  EXPECT_TRUE(Contains(testing::ErrorOf([] { ProgressModeFromFlag("fancy", true); }),
                       "--progress 'fancy'"));
}

TEST(ProgressText, DurationsAndCompactNumbers) {
  EXPECT_EQ(FormatDuration(21.4), "0:21");
  EXPECT_EQ(FormatDuration(725), "12:05");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(1e300), "?");
  EXPECT_EQ(FormatCompact(950), "950");
  EXPECT_EQ(FormatCompact(812000), "812k");
  EXPECT_EQ(FormatCompact(81200), "81.2k");
  EXPECT_EQ(FormatCompact(1234567), "1.23M");
}

TEST(ProgressDisplay, ABarIsRewrittenInPlaceAndEndsWithItsEpoch) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kBar, console.Write());
  display.OnRecord(Epoch(2, 15, 10, 0.7712), 0);
  console.out.clear();
  display.OnRecord(Progress(3, 15, 40000, 85000, 812000, 21), 1);
  EXPECT_EQ(console.out,
            "\repoch 3/15  47%  812k ex/s  ETA 0:21  validation roc_auc_score 0.7712"
            "\033[K");
  display.OnRecord(Progress(3, 15, 60000, 85000, 812000, 15), 2);
  display.OnRecord(Epoch(3, 15, 21, 0.78), 3);
  EXPECT_EQ(std::count(console.out.begin(), console.out.end(), '\n'), 1);
  EXPECT_TRUE(Contains(console.out,
                       "\repoch 3/15  100%  85.0k ex  0:11  validation roc_auc_score 0.7800  "
                       "loss 0.5200\033[K\n"));
}

TEST(ProgressDisplay, AShareBeyondTheEpochShowsAsAllOfIt) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kBar, console.Write());
  ProgressRecord record = Progress(1, 5, 10, 100, 5, 90);
  record.fraction = 1e300;  // a record this launcher did not write
  display.OnRecord(record, 0);
  EXPECT_TRUE(Contains(console.out, "epoch 1/5  100%")) << console.out;
}

TEST(ProgressDisplay, ABarWithoutAnEpochSizeShowsTheExamplesAndNoTimeLeft) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kBar, console.Write());
  display.OnRecord(Progress(1, 5, 40000, 0, 8000, -1), 0);
  EXPECT_EQ(console.out, "\repoch 1/5  40.0k ex  8.00k ex/s  ETA ?\033[K");
}

TEST(ProgressDisplay, ARateNotYetMeasuredIsShownAsUnknown) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kLines, console.Write());
  display.OnRecord(Progress(1, 5, 400, 1000, 0, -1), 0);
  EXPECT_TRUE(Contains(console.out, "? examples/s, ETA ?")) << console.out;
}

TEST(ProgressDisplay, AnotherLineGoesAboveTheBarWhichIsDrawnAgain) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kBar, console.Write());
  display.OnRecord(Progress(1, 5, 10, 100, 5, 90), 0);
  console.out.clear();
  display.PrintLine("[worker 0] W1125 something", true);
  EXPECT_EQ(console.err, "[worker 0] W1125 something\n");
  EXPECT_EQ(console.out, "\r\033[K\repoch 1/5  10%  5 ex/s  ETA 1:30\033[K");
}

TEST(ProgressDisplay, ABarIsCutToTheTerminalsWidth) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kBar, console.Write(), /*width=*/20);
  display.OnRecord(Progress(1, 5, 10, 100, 5, 90), 0);
  EXPECT_EQ(console.out, "\repoch 1/5  10%  5 e\033[K");
}

TEST(ProgressDisplay, LinesComeEveryIntervalAndAtEachEpochsEnd) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kLines, console.Write(), 0, /*line_interval_s=*/5);
  display.OnRecord(Progress(1, 2, 100, 1000, 50, 38), 0);
  display.OnRecord(Progress(1, 2, 200, 1000, 50, 36), 2);  // too soon
  display.OnRecord(Progress(1, 2, 400, 1000, 50, 32), 6);
  display.OnRecord(Epoch(1, 2, 20, 0.7), 7);
  EXPECT_EQ(console.out,
            "epoch 1/2: 10% (100 of 1000 examples), 50 examples/s, ETA 0:38, training loss "
            "0.0000\n"
            "epoch 1/2: 40% (400 of 1000 examples), 50 examples/s, ETA 0:32, training loss "
            "0.0000\n"
            "epoch 1/2  100%  85.0k ex  0:20  validation roc_auc_score 0.7000  loss 0.5200\n");
  EXPECT_EQ(console.out.find('\r'), std::string::npos);
}

TEST(ProgressDisplay, AnEarlyStopIsSaid) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kLines, console.Write());
  display.OnRecord(Epoch(4, 15, 20, 0.7, /*stop=*/true), 0);
  EXPECT_TRUE(Contains(console.out, "epoch 4/15") && Contains(console.out, "stopping early"))
      << console.out;
}

TEST(ProgressDisplay, NoneShowsNoProgressButKeepsTheEnd) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kNone, console.Write());
  display.OnRecord(Progress(1, 2, 100, 1000, 50, 38), 0);
  display.OnRecord(Epoch(1, 2, 20, 0.7), 1);
  ProgressRecord end;
  end.type = ProgressRecord::Type::kEnd;
  display.OnRecord(end, 2);
  EXPECT_EQ(console.out, "");
  EXPECT_TRUE(display.end().has_value());
}

TEST(ProgressDisplay, ALateRecordOfADecidedEpochIsIgnored) {
  FakeConsole console;
  ProgressDisplay display(ProgressMode::kBar, console.Write());
  display.OnRecord(Epoch(1, 2, 20, 0.7), 0);
  console.out.clear();
  display.OnRecord(Progress(1, 2, 1000, 1000, 50, 20), 1);
  EXPECT_EQ(console.out, "");
}

// ---------------------------------------------------------------------------
// The launcher's lines

TEST(RoleOutput, GlogLinesAreKnownByTheirSeverity) {
  EXPECT_EQ(KindOfLine("I20261125 12:34:56.789012 4242 x.cc:12] hi"), LineKind::kInfo);
  EXPECT_EQ(KindOfLine("W1125 12:34:56.789012 4242 x.cc:12] careful"), LineKind::kWarning);
  EXPECT_EQ(KindOfLine("E1125 12:34:56.789012 4242 x.cc:12] broken"), LineKind::kError);
  EXPECT_EQ(KindOfLine("F1125 12:34:56.789012 4242 x.cc:12] dead"), LineKind::kError);
  EXPECT_EQ(KindOfLine("epoch 1: 5000 examples"), LineKind::kPlain);
  EXPECT_EQ(KindOfLine("I am not glog"), LineKind::kPlain);
}

TEST(RoleOutput, ByDefaultInfoAndPlainOutputAreHiddenAndErrorsShown) {
  FakeConsole console;
  LaunchOutputOptions options;
  LaunchOutput output(options, console.Write());
  output.Line("worker 0", "I1125 12:34:56.789012 1 x.cc:1] chatter", true, 0);
  output.Line("worker 0", "epoch 1: 5000 examples across 1 worker(s)", false, 0);
  output.Line("worker 0", "W1125 12:34:56.789012 1 x.cc:1] careful", true, 0);
  output.Line("worker 1", "keel worker: error: data.libsvm:3: bad", true, 0);
  output.Line("launch", "worker 1 exited with status 1; stopping the others", true, 0);
  EXPECT_EQ(console.out, "");
  EXPECT_EQ(console.err,
            "[worker 0] W1125 12:34:56.789012 1 x.cc:1] careful\n"
            "[worker 1] keel worker: error: data.libsvm:3: bad\n"
            "[launch] worker 1 exited with status 1; stopping the others\n");
}

TEST(RoleOutput, TheFaultSchedulesEventsAreShown) {
  FakeConsole console;
  LaunchOutput output(LaunchOutputOptions{}, console.Write());
  output.Line("faults", "{\"t\": 1.000, \"event\": \"kill\"}", false, 0);
  EXPECT_EQ(console.out, "[faults] {\"t\": 1.000, \"event\": \"kill\"}\n");
}

TEST(RoleOutput, VerboseShowsEveryLine) {
  FakeConsole console;
  LaunchOutputOptions options;
  options.verbose = true;
  LaunchOutput output(options, console.Write());
  output.Line("worker 0", "I1125 12:34:56.789012 1 x.cc:1] chatter", true, 0);
  output.Line("worker 0", "epoch 1: 5000 examples", false, 0);
  EXPECT_EQ(console.err, "[worker 0] I1125 12:34:56.789012 1 x.cc:1] chatter\n");
  EXPECT_EQ(console.out, "[worker 0] epoch 1: 5000 examples\n");
}

TEST(RoleOutput, RecordsFromTheSchedulerAreRenderedNotPrinted) {
  FakeConsole console;
  LaunchOutputOptions options;
  options.verbose = true;
  LaunchOutput output(options, console.Write());
  output.Line("scheduler", FormatProgressRecord(Epoch(1, 2, 5, 0.7)), false, 0);
  EXPECT_FALSE(Contains(console.out, kProgressRecordPrefix)) << console.out;
  EXPECT_TRUE(Contains(console.out, "epoch 1/2  100%")) << console.out;
}

TEST(RoleOutput, ARecordFromAnotherRoleIsJustALine) {
  FakeConsole console;
  LaunchOutputOptions options;
  options.mode = ProgressMode::kNone;
  LaunchOutput output(options, console.Write());
  output.Line("worker 0", FormatProgressRecord(Epoch(1, 2, 5, 0.7)), false, 0);
  EXPECT_TRUE(Contains(console.out, "[worker 0] keel-progress ")) << console.out;
}

TEST(RoleOutput, LogDirKeepsEveryLineOfEachRoleInItsFile) {
  testing::TempFolder folder("logs");
  FakeConsole console;
  LaunchOutputOptions options;
  options.log_dir = folder.path() + "/logs";
  {
    LaunchOutput output(options, console.Write());
    output.Line("worker 0", "I1125 12:34:56.789012 1 x.cc:1] chatter", true, 0);
    output.Line("worker 0", "epoch 1: 5000 examples", false, 0);
    output.Line("host7 server 1", "W1125 12:34:56.789012 1 x.cc:1] careful", true, 0);
  }
  EXPECT_EQ(testing::ReadFileOrEmpty(options.log_dir + "/worker-0.log"),
            "I1125 12:34:56.789012 1 x.cc:1] chatter\nepoch 1: 5000 examples\n");
  EXPECT_EQ(testing::ReadFileOrEmpty(options.log_dir + "/host7-server-1.log"),
            "W1125 12:34:56.789012 1 x.cc:1] careful\n");
}

// ---------------------------------------------------------------------------
// The summary

TEST(JobSummary, NamesTheTimeTheMetricsAndWhereEverythingWent) {
  JobSummaryInput input;
  input.wall_seconds = 83;
  input.working_folder = "/home/me";
  ProgressRecord end;
  end.type = ProgressRecord::Type::kEnd;
  end.reported = true;
  end.epochs = 15;
  end.epochs_run = 15;
  end.examples = 1200000;
  end.seconds = 60;
  end.model_dir = "model";
  end.checkpoint_uri = "s3://bucket/job";
  end.metrics = {{"validation:roc_auc_score", 0.77123},
                 {"test:roc_auc_score", 0.765},
                 {"train:best_epoch", 12}};
  input.end = end;
  input.log_dir = "/tmp/logs";
  const std::string summary = FormatJobSummary(input);
  EXPECT_TRUE(Contains(summary,
                       "job done in 1:23 (exit status 0): 15 of 15 epochs, 1.20M "
                       "examples, 20.0k examples/s\n"))
      << summary;
  EXPECT_TRUE(
      Contains(summary, "validation   (epoch 12, kept for its lowest loss) roc_auc_score 0.7712\n"))
      << summary;
  EXPECT_TRUE(Contains(summary, "test         roc_auc_score 0.7650\n")) << summary;
  EXPECT_TRUE(Contains(summary, "model        /home/me/model\n")) << summary;
  EXPECT_TRUE(Contains(summary, "/home/me/model/metrics.json, /home/me/model/history.jsonl"))
      << summary;
  EXPECT_TRUE(Contains(summary, "checkpoints  s3://bucket/job\n")) << summary;
  EXPECT_TRUE(Contains(summary, "logs         /tmp/logs (a file per role)\n")) << summary;
}

TEST(JobSummary, AJobThatLostDataSaysWhichRangesAndHowItEnded) {
  JobSummaryInput input;
  input.wall_seconds = 14;
  input.exit_code = kDataLostExitStatus;
  ProgressRecord end;
  end.type = ProgressRecord::Type::kEnd;
  end.lost_ranges = {1, 3};
  input.end = end;
  const std::string summary = FormatJobSummary(input);
  EXPECT_TRUE(Contains(summary, "job lost data (--allow_data_loss lets such a job end with 0) in "
                                "0:14 (exit status 3)"))
      << summary;
  EXPECT_TRUE(Contains(summary, "data lost    key range(s) 1, 3 lost every replica")) << summary;
  input.exit_code = 0;  // allowed: the loss is still said
  input.end->lost_ranges = {2};
  EXPECT_TRUE(Contains(FormatJobSummary(input), "data lost    key range(s) 2 lost every replica"));
}

TEST(JobSummary, TheRateIsOverTheJobsTimeAndWhileTrainingWhenReported) {
  JobSummaryInput input;
  ProgressRecord end;
  end.type = ProgressRecord::Type::kEnd;
  end.epochs = end.epochs_run = 1;
  end.examples = 1000;
  end.seconds = 10;
  input.end = end;
  EXPECT_TRUE(Contains(FormatJobSummary(input), "1.00k examples, 100 examples/s"));
  input.end->metrics["train:examples_per_second"] = 4000;
  EXPECT_TRUE(Contains(FormatJobSummary(input),
                       "1.00k examples, 100 examples/s (4.00k/s while training)\n"));
}

TEST(JobSummary, AJobWithoutEpochsSaysOnlyHowItEnded) {
  JobSummaryInput input;
  input.wall_seconds = 3;
  ProgressRecord end;
  end.type = ProgressRecord::Type::kEnd;
  input.end = end;
  EXPECT_TRUE(Contains(FormatJobSummary(input), "job done in 0:03 (exit status 0)\n"));
}

TEST(JobSummary, AnEarlyStopIsSaid) {
  JobSummaryInput input;
  ProgressRecord end;
  end.type = ProgressRecord::Type::kEnd;
  end.reported = true;
  end.epochs = 15;
  end.epochs_run = 4;
  end.stop = true;
  input.end = end;
  const std::string summary = FormatJobSummary(input);
  EXPECT_TRUE(Contains(summary, "4 of 15 epochs")) << summary;
  EXPECT_TRUE(Contains(summary, "early, after epoch 4 of 15")) << summary;
}

TEST(JobSummary, AFailedJobSaysSoWithItsExitStatus) {
  JobSummaryInput input;
  input.exit_code = 1;
  input.wall_seconds = 5;
  const std::string summary = FormatJobSummary(input);
  EXPECT_TRUE(Contains(summary, "job failed in 0:05 (exit status 1)")) << summary;
  EXPECT_TRUE(Contains(summary, "--log_dir=DIR")) << summary;
}

}  // namespace
}  // namespace keel
