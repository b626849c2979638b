// FaultRunner on a ProcessGroup of stand-in children (shell commands): an item
// timed from the job's start waits for the scheduler's first progress record.
#include "faults/fault_runner.h"

#include <gtest/gtest.h>

#include <string>

#include "faults/fault_schedule.h"
#include "launch/launcher.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::EventsNamed;

class FaultRunnerTest : public testing::TempFolderTest {};

TEST_F(FaultRunnerTest, AKillTimedFromTheStartWaitsForTheSchedulersFirstProgressRecord) {
  const std::string log = folder_ + "/events.jsonl";
  ProcessGroup group;
  // The runner is the group's observer and line handler until it goes.
  FaultRunner runner(&group, ParseFaultSchedule("kill:server:0@start+0.3s", 1, 1), 1, 1, log, 1);
  // The "scheduler" reports progress 1.5 s after the launch (a cluster slow
  // to form); the "server" runs until killed.
  group.Spawn("scheduler",
              {"/bin/sh", "-c",
               "sleep 1.5; echo 'keel-progress {\"type\":\"progress\",\"epoch\":1}'; sleep 1.5"});
  group.Spawn("server 0", {"/bin/sh", "-c", "exec sleep 30"});
  EXPECT_EQ(group.Wait(20), 0);
  runner.Finish(0);
  const auto started = EventsNamed(log, "job_started");
  const auto kills = EventsNamed(log, "kill");
  ASSERT_EQ(started.size(), 1u);
  ASSERT_EQ(kills.size(), 1u);
  const double started_at = std::stod(started[0].at("t"));
  const double killed_at = std::stod(kills[0].at("t"));
  EXPECT_GE(started_at, 1.5);
  EXPECT_GE(killed_at, started_at + 0.3);
  EXPECT_EQ(kills[0].at("rank"), "0");
}

TEST_F(FaultRunnerTest, AnItemTimedFromAStartThatNeverCameIsLoggedNotFired) {
  const std::string log = folder_ + "/events.jsonl";
  ProcessGroup group;
  FaultRunner runner(&group, ParseFaultSchedule("kill:server:0@start+0.1s", 1, 1), 1, 1, log, 1);
  group.Spawn("scheduler", {"/bin/sh", "-c", "echo 'not a progress record'; sleep 0.5"});
  group.Spawn("server 0", {"/bin/sh", "-c", "sleep 0.5"});
  EXPECT_EQ(group.Wait(20), 0);
  runner.Finish(0);
  EXPECT_TRUE(EventsNamed(log, "kill").empty());
  EXPECT_TRUE(EventsNamed(log, "job_started").empty());
  const auto not_fired = EventsNamed(log, "not_fired");
  ASSERT_EQ(not_fired.size(), 1u);
  EXPECT_EQ(not_fired[0].at("spec"), "kill:server:0@start+0.1s");
}

}  // namespace
}  // namespace keel
