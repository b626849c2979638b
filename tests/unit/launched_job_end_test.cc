// LaunchedJobEnd: when a launched job is over, told from its processes' exits.
#include "launch/launched_job_end.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

namespace keel {
namespace {

constexpr int kClean = W_EXITCODE(0, 0);
constexpr int kFailed = W_EXITCODE(1, 0);
constexpr int kKilled = W_EXITCODE(0, SIGKILL);

// A job of two servers and two workers, every process started.
LaunchedJobEnd Started() {
  LaunchedJobEnd job(2);
  for (const char* name : {"scheduler", "server 0", "server 1", "worker 0", "worker 1"}) {
    job.Started(name);
  }
  return job;
}

TEST(LaunchedJobEnd, IsNotOverWhileEveryProcessRuns) {
  const LaunchedJobEnd job = Started();
  EXPECT_FALSE(job.over());
  EXPECT_EQ(job.reason(), "");
}

TEST(LaunchedJobEnd, IsOverWhenTheSchedulerExits) {
  LaunchedJobEnd job = Started();
  job.Exited("scheduler", kClean);
  EXPECT_TRUE(job.over());
  EXPECT_EQ(job.reason(), "the scheduler exited");
}

TEST(LaunchedJobEnd, IsNotOverWhenADrainedServerExits) {
  LaunchedJobEnd job = Started();
  job.Drained("server 1");
  job.Exited("server 1", kClean);
  EXPECT_FALSE(job.over());
  job.Exited("server 0", kClean);
  EXPECT_EQ(job.reason(), "server 0 was shut down");
}

TEST(LaunchedJobEnd, IsNotOverWhenAFaultKilledTheScheduler) {
  LaunchedJobEnd job = Started();
  job.Exited("scheduler", kKilled, /*tolerated=*/true);
  EXPECT_FALSE(job.over());
}

TEST(LaunchedJobEnd, IsOverWhenTheSchedulerAFaultRestartedExits) {
  LaunchedJobEnd job = Started();
  job.Exited("scheduler", kKilled, /*tolerated=*/true);
  job.Started("scheduler");
  job.Exited("scheduler", kClean, /*tolerated=*/true);
  EXPECT_TRUE(job.over());
  EXPECT_EQ(job.reason(), "the scheduler exited");
}

TEST(LaunchedJobEnd, IsOverWhenTheSchedulerIsKilledByAnyoneElse) {
  LaunchedJobEnd job = Started();
  job.Exited("scheduler", kKilled);
  EXPECT_TRUE(job.over());
}

TEST(LaunchedJobEnd, IsOverWhenAServerExitsCleanlyButNotWhenOneIsKilledOrFails) {
  LaunchedJobEnd job = Started();
  job.Exited("server 0", kKilled);
  job.Exited("server 1", kFailed);
  EXPECT_FALSE(job.over());
  job.Started("server 1");
  job.Exited("server 1", kClean);
  EXPECT_TRUE(job.over());
  EXPECT_EQ(job.reason(), "server 1 was shut down");
}

TEST(LaunchedJobEnd, IsOverWhenEveryWorkerFinished) {
  LaunchedJobEnd job = Started();
  job.Exited("worker 0", kClean);
  EXPECT_FALSE(job.over());
  job.Exited("worker 1", kClean);
  EXPECT_TRUE(job.over());
  EXPECT_EQ(job.reason(), "every worker finished");
}

TEST(LaunchedJobEnd, AKilledWorkerIsNotFinished) {
  LaunchedJobEnd job = Started();
  job.Exited("worker 0", kKilled);
  job.Exited("worker 1", kClean);
  EXPECT_FALSE(job.over());
}

TEST(LaunchedJobEnd, AWorkerRestartedAfterItFinishedIsNotFinishedAnyMore) {
  LaunchedJobEnd job = Started();
  job.Exited("worker 0", kClean);
  job.Started("worker 0");
  job.Exited("worker 1", kClean);
  EXPECT_FALSE(job.over());
}

TEST(LaunchedJobEnd, IgnoresNamesThatAreNotTheJobsRoles) {
  LaunchedJobEnd job = Started();
  job.Exited("workers 0", kClean);
  job.Exited("worker x", kClean);
  job.Exited("guard 1", kClean);
  job.Exited("worker 1", kClean);
  EXPECT_FALSE(job.over());
}

}  // namespace
}  // namespace keel
