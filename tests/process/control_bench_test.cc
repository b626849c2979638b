// `keel bench control`: the scheduler under simulated members. Small runs,
// so that the benchmark cannot rot unnoticed: every member gets the first
// view, and the view after a killed member reaches every living one.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "base/json_reader.h"
#include "test_util.h"

namespace keel {
namespace {

// The report's JSON line in `output`.
JsonValue Report(const std::string& output) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("{\"bench\":\"control\"", 0) == 0) return ParseJson(line, "the report");
  }
  ADD_FAILURE() << "no report line in:\n" << output;
  return JsonValue();
}

double Number(const JsonValue& report, const std::string& field) {
  const JsonValue* value = report.Find(field);
  if (!value) {
    ADD_FAILURE() << "the report has no " << field;
    return -1;
  }
  return value->AsNumber();
}

void ExpectSaneReport(const std::string& output, const std::string& transport) {
  const JsonValue report = Report(output);
  ASSERT_EQ(report.type(), JsonValue::Type::kObject);
  EXPECT_EQ(report.Find("transport")->AsString(), transport);
  EXPECT_EQ(Number(report, "nodes"), 50);
  EXPECT_EQ(Number(report, "servers") + Number(report, "workers"), 50);
  // Every member holds the first view, which came after the storm began.
  EXPECT_EQ(Number(report, "members_with_view"), 50);
  EXPECT_GT(Number(report, "storm_to_all_views_s"), 0);
  EXPECT_GE(Number(report, "storm_to_all_views_s"), Number(report, "storm_to_first_member_view_s"));
  EXPECT_GT(Number(report, "first_view_bytes"), 50 * 1000);  // 50 copies of a view of 10^4 ranges
  // Heartbeats flowed in the steady window (50 a second for at least 5 s,
  // give or take the window's edges), about a third of them asking for an
  // answer and answered, and the scheduler used some CPU, less than the
  // whole process.
  const double sent = Number(report, "heartbeats_sent");
  EXPECT_GE(sent, 200);
  EXPECT_GE(Number(report, "heartbeats_acked"), sent / 5);
  EXPECT_LE(Number(report, "heartbeats_acked"), sent / 2);
  EXPECT_GE(Number(report, "scheduler_cpu_share"), 0);
  EXPECT_LE(Number(report, "scheduler_cpu_share"), Number(report, "process_cpu_share") + 0.02);
  // The killed worker left the view, and every living member got the new one.
  EXPECT_TRUE(report.Find("killed_left_view")->AsBool());
  EXPECT_EQ(Number(report, "living_members"), 49);
  EXPECT_EQ(Number(report, "members_on_new_view"), 49);
  EXPECT_GT(Number(report, "kill_to_all_views_s"), 0);
  EXPECT_GE(Number(report, "kill_to_all_views_s"), Number(report, "kill_to_first_member_view_s"));
  EXPECT_GT(Number(report, "failure_view_bytes"), 0);
  EXPECT_EQ(Number(report, "departures"), 1);
  EXPECT_GT(Number(report, "peak_rss_mb"), 0);
}

// `keel bench control` with 50 members over `transport`: finished, exit 0,
// a sane report (ExpectSaneReport). Returns its output.
std::string RunFiftyMembers(const std::string& transport, const std::string& more = "") {
  std::vector<std::string> command = {
      testing::KeelBinary(),      "bench",          "control", "--nodes=50",
      "--transport=" + transport, "--minloglevel=1"};
  if (!more.empty()) command.push_back(more);
  const auto exit = testing::Run(command, 120);
  EXPECT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  if (exit.finished && exit.code == 0) ExpectSaneReport(exit.output, transport);
  return exit.output;
}

TEST(ControlBench, FiftyMembersOverTcpAllGetEachView) {
  const std::string output = RunFiftyMembers("tcp");
  if (HasFailure()) return;
  EXPECT_GT(Number(Report(output), "descriptors_per_member"), 0);
}

TEST(ControlBench, FiftyMembersInProcessAllGetEachView) { RunFiftyMembers("memory"); }

// Over TCP with the members in processes of their own (as for more members
// than one process's descriptors hold beside the scheduler's): the same run.
TEST(ControlBench, FiftyMembersInTwoProcessesOfTheirOwnAllGetEachView) {
  const std::string output = RunFiftyMembers("tcp", "--member_processes=2");
  if (HasFailure()) return;
  EXPECT_EQ(Number(Report(output), "member_processes"), 2);
  EXPECT_NE(output.find("the members in 2 processes of their own"), std::string::npos) << output;
}

// The servers relaying the workers' heartbeats (--heartbeat_relay_from at
// most the workers): most of the workers' heartbeats go to the servers and are
// passed on, so fewer reach the scheduler than members beat.
TEST(ControlBench, FiftyMembersWithTheirHeartbeatsRelayedAllGetEachView) {
  const auto exit = testing::Run({testing::KeelBinary(), "bench", "control", "--nodes=50",
                                  "--transport=tcp", "--minloglevel=1", "--heartbeat_relay_from=1"},
                                 120);
  ASSERT_TRUE(exit.finished) << exit.output;
  ASSERT_EQ(exit.code, 0) << exit.output;
  const JsonValue report = Report(exit.output);
  ASSERT_EQ(report.type(), JsonValue::Type::kObject);
  EXPECT_TRUE(report.Find("heartbeat_relay")->AsBool());
  EXPECT_EQ(Number(report, "members_with_view"), 50);
  EXPECT_EQ(Number(report, "members_on_new_view"), 49);
  // 45 workers and 5 servers for at least 5 s: about 220 relayed, about 30 to
  // the scheduler (the servers' 25 and one in 30 of the workers').
  const double relayed = Number(report, "heartbeats_relayed");
  EXPECT_GE(relayed, 150);
  EXPECT_GE(Number(report, "heartbeats_passed_on"), relayed / 2);
  EXPECT_LT(Number(report, "heartbeats_sent"), relayed / 2);
  EXPECT_GE(Number(report, "heartbeats_sent"), 20);
  EXPECT_EQ(Number(report, "departures"), 1);
}

TEST(ControlBench, MembersInProcessesOfTheirOwnNeedTcp) {
  const auto exit = testing::Run({testing::KeelBinary(), "bench", "control", "--nodes=50",
                                  "--transport=memory", "--member_processes=2"},
                                 30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_NE(exit.output.find("--member_processes 2: members in processes of their own need "
                             "--transport=tcp"),
            std::string::npos)
      << exit.output;
}

TEST(ControlBench, RefusesAnUnknownTransport) {
  const auto exit = testing::Run(
      {testing::KeelBinary(), "bench", "control", "--nodes=50", "--transport=carrier-pigeon"}, 30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_NE(exit.output.find("--transport 'carrier-pigeon'"), std::string::npos) << exit.output;
}

}  // namespace
}  // namespace keel
