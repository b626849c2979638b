// The --faults grammar: what it accepts, and how it names what it refuses.
#include "faults/fault_schedule.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

FaultSchedule Parse(const std::string& spec) { return ParseFaultSchedule(spec, 2, 3); }

TEST(FaultSchedule, AnEmptySpecHasNoFaults) { EXPECT_TRUE(Parse("").empty()); }

TEST(FaultSchedule, ParsesTheDocumentedExample) {
  const FaultSchedule schedule = Parse(
      "kill:server:1@5s,restart:server:1@7s,stop:worker:0@3s+2s,kill:worker:random@rate=0.1/s,"
      "drop:server:0=0.01,delay:worker:1=5ms~2ms");
  ASSERT_EQ(schedule.items.size(), 6u);
  const FaultItem& kill = schedule.items[0];
  EXPECT_EQ(kill.action, FaultAction::kKill);
  EXPECT_EQ(kill.role, "server");
  EXPECT_EQ(kill.rank, 1);
  EXPECT_DOUBLE_EQ(kill.at_s, 5);
  EXPECT_EQ(schedule.items[1].action, FaultAction::kRestart);
  EXPECT_DOUBLE_EQ(schedule.items[1].at_s, 7);
  const FaultItem& stop = schedule.items[2];
  EXPECT_EQ(stop.action, FaultAction::kStop);
  EXPECT_EQ(stop.role, "worker");
  EXPECT_EQ(stop.rank, 0);
  EXPECT_DOUBLE_EQ(stop.at_s, 3);
  EXPECT_DOUBLE_EQ(stop.duration_s, 2);
  const FaultItem& random = schedule.items[3];
  EXPECT_EQ(random.rank, FaultItem::kRandomRank);
  EXPECT_DOUBLE_EQ(random.rate_per_s, 0.1);
  EXPECT_DOUBLE_EQ(schedule.items[4].drop_rate, 0.01);
  EXPECT_DOUBLE_EQ(schedule.items[5].delay_ms, 5);
  EXPECT_DOUBLE_EQ(schedule.items[5].jitter_ms, 2);
  EXPECT_EQ(schedule.items[5].text, "delay:worker:1=5ms~2ms");
}

TEST(FaultSchedule, AcceptsMillisecondsFractionsPercentagesAndEveryRank) {
  const FaultSchedule schedule =
      Parse("stop:worker:*@1.5s+300ms,drop:worker:*=1%,delay:server:0=0.5s");
  ASSERT_EQ(schedule.items.size(), 3u);
  EXPECT_EQ(schedule.items[0].rank, FaultItem::kEveryRank);
  EXPECT_DOUBLE_EQ(schedule.items[0].at_s, 1.5);
  EXPECT_DOUBLE_EQ(schedule.items[0].duration_s, 0.3);
  EXPECT_DOUBLE_EQ(schedule.items[1].drop_rate, 0.01);
  EXPECT_DOUBLE_EQ(schedule.items[2].delay_ms, 500);
  EXPECT_DOUBLE_EQ(schedule.items[2].jitter_ms, 0);
}

TEST(FaultSchedule, RestartTakesRandomAndARateLikeKillAndStop) {
  const FaultSchedule schedule =
      Parse("restart:server:random@5s,restart:worker:random@rate=0.5/s,restart:worker:1@rate=2/s");
  ASSERT_EQ(schedule.items.size(), 3u);
  for (const FaultItem& item : schedule.items) EXPECT_EQ(item.action, FaultAction::kRestart);
  EXPECT_EQ(schedule.items[0].role, "server");
  EXPECT_EQ(schedule.items[0].rank, FaultItem::kRandomRank);
  EXPECT_DOUBLE_EQ(schedule.items[0].at_s, 5);
  EXPECT_DOUBLE_EQ(schedule.items[0].rate_per_s, 0);
  EXPECT_EQ(schedule.items[1].rank, FaultItem::kRandomRank);
  EXPECT_DOUBLE_EQ(schedule.items[1].rate_per_s, 0.5);
  EXPECT_EQ(schedule.items[2].rank, 1);
  EXPECT_DOUBLE_EQ(schedule.items[2].rate_per_s, 2);
}

TEST(FaultSchedule, PreemptTakesARankRandomOrARateAndTheSchedulerToo) {
  const FaultSchedule schedule =
      Parse("preempt:worker:0@2s,preempt:server:random@rate=0.5/s,preempt:scheduler@1.5s");
  ASSERT_EQ(schedule.items.size(), 3u);
  for (const FaultItem& item : schedule.items) EXPECT_EQ(item.action, FaultAction::kPreempt);
  EXPECT_EQ(schedule.items[0].role, "worker");
  EXPECT_EQ(schedule.items[0].rank, 0);
  EXPECT_DOUBLE_EQ(schedule.items[0].at_s, 2);
  EXPECT_EQ(schedule.items[1].rank, FaultItem::kRandomRank);
  EXPECT_DOUBLE_EQ(schedule.items[1].rate_per_s, 0.5);
  EXPECT_EQ(schedule.items[2].role, "scheduler");
  EXPECT_DOUBLE_EQ(schedule.items[2].at_s, 1.5);
  EXPECT_STREQ(FaultActionName(FaultAction::kPreempt), "preempt");
  EXPECT_TRUE(schedule.TransportFlags("worker", 0).empty());
}

TEST(FaultSchedule, TransportItemsBecomeTheTargetsFlagsOnly) {
  const FaultSchedule schedule =
      Parse("drop:server:0=0.01,delay:worker:*=5ms~2ms,kill:server:1@1s");
  EXPECT_EQ(schedule.TransportFlags("server", 0), (std::vector<std::string>{"--drop_rate=0.01"}));
  EXPECT_TRUE(schedule.TransportFlags("server", 1).empty());
  EXPECT_EQ(schedule.TransportFlags("worker", 2),
            (std::vector<std::string>{"--delay_ms=5", "--delay_jitter_ms=2"}));
}

TEST(FaultSchedule, ALaterTransportItemOverridesAnEarlierOne) {
  const FaultSchedule schedule = Parse("drop:worker:*=0.5,drop:worker:1=0.25");
  EXPECT_EQ(schedule.TransportFlags("worker", 0), (std::vector<std::string>{"--drop_rate=0.5"}));
  EXPECT_EQ(schedule.TransportFlags("worker", 1), (std::vector<std::string>{"--drop_rate=0.25"}));
}

TEST(FaultSchedule, TheSchedulerIsNamedWithoutARankForKillStopAndRestart) {
  const FaultSchedule schedule =
      Parse("kill:scheduler@2s,restart:scheduler@3s,stop:scheduler@5s+1s");
  ASSERT_EQ(schedule.items.size(), 3u);
  for (const FaultItem& item : schedule.items) {
    EXPECT_EQ(item.role, "scheduler");
    EXPECT_EQ(item.rank, 0);
  }
  EXPECT_EQ(schedule.items[0].action, FaultAction::kKill);
  EXPECT_DOUBLE_EQ(schedule.items[1].at_s, 3);
  EXPECT_DOUBLE_EQ(schedule.items[2].duration_s, 1);
}

TEST(FaultSchedule, APartitionNamesTwoGroupsOfProcessesWhoseCommasDoNotEndTheItem) {
  const FaultSchedule schedule = Parse(
      "kill:server:0@1s,partition:server:0|worker:0,worker:2,scheduler@5s+3s,"
      "stop:worker:1@2s+1s");
  ASSERT_EQ(schedule.items.size(), 3u);
  const FaultItem& partition = schedule.items[1];
  EXPECT_EQ(partition.action, FaultAction::kPartition);
  EXPECT_EQ(partition.side_a, (std::vector<std::string>{"server 0"}));
  EXPECT_EQ(partition.side_b, (std::vector<std::string>{"worker 0", "worker 2", "scheduler"}));
  EXPECT_DOUBLE_EQ(partition.at_s, 5);
  EXPECT_DOUBLE_EQ(partition.duration_s, 3);
  EXPECT_EQ(partition.text, "partition:server:0|worker:0,worker:2,scheduler@5s+3s");
  EXPECT_EQ(schedule.FirstPartition(), &partition);
  EXPECT_EQ(schedule.items[2].action, FaultAction::kStop);
}

TEST(FaultSchedule, APartitionIsNoTransportFlag) {
  const FaultSchedule schedule = Parse("partition:server:0|server:1@1s+1s");
  EXPECT_TRUE(schedule.TransportFlags("server", 0).empty());
  EXPECT_EQ(Parse("kill:server:0@1s").FirstPartition(), nullptr);
}

TEST(FaultSchedule, JoinStartsAServerAndDrainNamesOneThatJoinedToo) {
  const FaultSchedule schedule =
      Parse("join:server@2s,join:server@2s,drain:server:3@5s,drain:server:0@6s");
  ASSERT_EQ(schedule.items.size(), 4u);
  EXPECT_EQ(schedule.items[0].action, FaultAction::kJoin);
  EXPECT_EQ(schedule.items[0].role, "server");
  EXPECT_DOUBLE_EQ(schedule.items[0].at_s, 2);
  EXPECT_EQ(schedule.items[2].action, FaultAction::kDrain);
  EXPECT_EQ(schedule.items[2].rank, 3);  // the second server that joins
  EXPECT_STREQ(FaultActionName(FaultAction::kDrain), "drain");
  EXPECT_TRUE(Contains(ErrorOf([] { Parse("drain:server:2@5s"); }), "there is no server 2"));
}

TEST(FaultSchedule, StartPlusTimeCountsFromTheJobsStartForEveryTimedAction) {
  const FaultSchedule schedule =
      Parse("kill:server:1@start+1.5s,stop:worker:0@start+1s+2s,kill:server:0@1.5s");
  ASSERT_EQ(schedule.items.size(), 3u);
  EXPECT_TRUE(schedule.items[0].after_start);
  EXPECT_DOUBLE_EQ(schedule.items[0].at_s, 1.5);
  EXPECT_TRUE(schedule.items[1].after_start);
  EXPECT_DOUBLE_EQ(schedule.items[1].at_s, 1);
  EXPECT_DOUBLE_EQ(schedule.items[1].duration_s, 2);
  EXPECT_FALSE(schedule.items[2].after_start);
  EXPECT_DOUBLE_EQ(schedule.items[2].at_s, 1.5);
}

// Before, a partition's time took no start+ ("time 'start' is not a duration").
TEST(FaultSchedule, APartitionTimedFromTheJobsStartKeepsItsDuration) {
  const FaultSchedule schedule = Parse("partition:server:0|worker:0,scheduler@start+2s+3s");
  ASSERT_EQ(schedule.items.size(), 1u);
  EXPECT_TRUE(schedule.items[0].after_start);
  EXPECT_DOUBLE_EQ(schedule.items[0].at_s, 2);
  EXPECT_DOUBLE_EQ(schedule.items[0].duration_s, 3);
  EXPECT_TRUE(Contains(ErrorOf([] { Parse("partition:server:0|worker:0@start+2s"); }),
                       "a partition needs a duration"));
}

// Each bad spec is refused with the item's position, its text, and the problem.
struct BadSpec {
  std::string spec;
  std::string names;  // expected in the message
};

class FaultScheduleRefuses : public ::testing::TestWithParam<BadSpec> {};

TEST_P(FaultScheduleRefuses, NamingTheOffendingItem) {
  const std::string error = ErrorOf([] { Parse(GetParam().spec); });
  EXPECT_TRUE(Contains(error, "--faults item")) << error;
  EXPECT_TRUE(Contains(error, GetParam().names)) << GetParam().spec << ": " << error;
}

INSTANTIATE_TEST_SUITE_P(
    BadSpecs, FaultScheduleRefuses,
    ::testing::Values(
        BadSpec{"kil:server:1@5s", "item 1 'kil:server:1@5s': unknown action 'kil'"},
        BadSpec{"kill:server:1@start+rate=1/s", "start+ takes a TIME"},
        BadSpec{"kill:server:1@start+", "no time after '@'"},
        BadSpec{"join:worker@5s", "expected join:server@WHEN"},
        BadSpec{"join:server@rate=1/s", "a join happens once"},
        BadSpec{"drain:server:*@5s", "expected drain:server:R@TIME"},
        BadSpec{"drain:worker:0@5s", "expected drain:server:R@TIME"},
        BadSpec{"drain:server:0@rate=1/s", "a drain happens once"},
        BadSpec{"kill:server:1@5s,kill:sever:1@5s", "item 2 'kill:sever:1@5s': unknown role"},
        BadSpec{"kill:server:2@5s", "there is no server 2 (the job has 2 servers)"},
        BadSpec{"kill:worker:-1@5s", "'-1' is not a rank"},
        BadSpec{"kill:worker:one@5s", "'one' is not a rank, * or random"},
        BadSpec{"kill:server:1@5", "time '5' is not a duration"},
        BadSpec{"kill:server:1", "expected kill:ROLE:WHO@WHEN"},
        BadSpec{"kill:server:1@", "no time after '@'"},
        BadSpec{"kill:server:1@5s+1s", "only stop takes a duration"},
        BadSpec{"stop:worker:0@3s", "a stop needs a duration"},
        BadSpec{"stop:worker:0@3s+0s", "a stop needs a positive duration"},
        BadSpec{"kill:worker:random@rate=0.1", "rate '0.1' is not a positive number per second"},
        BadSpec{"kill:worker:random@rate=-1/s", "rate '-1/s'"},
        BadSpec{"drop:server:random=0.1",
                "item 1 'drop:server:random=0.1': 'random' picks a process for kill, preempt, "
                "stop or restart only"},
        BadSpec{"kill:worker:0@1s,preempt:worker:3@2s",
                "item 2 'preempt:worker:3@2s': there is no worker 3"},
        BadSpec{"preempt:worker:0@2s+1s", "item 1 'preempt:worker:0@2s+1s': only stop takes a"},
        BadSpec{"preempt:worker:0", "expected preempt:ROLE:WHO@WHEN"},
        BadSpec{"preempt:scheduler:1@2s", "the scheduler has no rank: preempt:scheduler@WHEN"},
        BadSpec{"preempt:launcher:0@2s", "unknown role 'launcher' (server, worker, scheduler)"},
        BadSpec{"kill:scheduler:0@2s", "the scheduler has no rank: kill:scheduler@WHEN"},
        BadSpec{"kill:server:0@1s,restart:server:random@rate=0/s",
                "item 2 'restart:server:random@rate=0/s': rate '0/s' is not a positive number "
                "per second"},
        BadSpec{"restart:worker:random@rate=1/m", "rate '1/m' is not a positive number"},
        BadSpec{"restart:worker:random@5s+1s",
                "item 1 'restart:worker:random@5s+1s': only stop takes a duration"},
        BadSpec{"restart:worker:random", "expected restart:ROLE:WHO@WHEN"},
        BadSpec{"restart:worker:random@", "no time after '@'"},
        BadSpec{"drop:server:0=1.5", "drop share '1.5' is not a number in [0, 1]"},
        BadSpec{"drop:server:0=abc", "drop share 'abc'"},
        BadSpec{"drop:server:0@5s", "expected drop:ROLE:WHO=VALUE"},
        BadSpec{"delay:worker:1=5", "delay '5' is not a duration"},
        BadSpec{"delay:worker:1=5ms~x", "jitter 'x'"},
        BadSpec{"kill:server:1@-2s", "time '-2s' is negative"},
        BadSpec{"kill:server:1@5s,,stop:worker:0@1s+1s", "item 2 is empty"},
        BadSpec{"kill:server:1@5s,", "item 2 is empty"},
        BadSpec{"kill:scheduler:0@5s", "the scheduler has no rank: kill:scheduler@WHEN"},
        BadSpec{"drop:scheduler=1%", "the scheduler sends no data messages"},
        BadSpec{"kill:scheduler", "expected kill:ROLE:WHO@WHEN or kill:scheduler@WHEN"},
        BadSpec{"partition:server:0@1s+1s", "expected partition:GROUP|GROUP@TIME+DURATION"},
        BadSpec{"partition:server:0|worker:0@1s", "a partition needs a duration"},
        BadSpec{"partition:server:0|server:0@1s+1s", "server 0 is on both sides"},
        BadSpec{"partition:server:0|@1s+1s", "a partition's group is empty"},
        BadSpec{"partition:server:0|worker:5@1s+1s", "there is no worker 5"},
        BadSpec{"partition:server:*|worker:0@1s+1s", "name each process of a group"},
        BadSpec{"partition:server:0|sever:1@1s+1s", "'sever:1' is not a process"},
        BadSpec{"partition:server:0,server:0|worker:0@1s+1s", "'server:0' is named twice"},
        BadSpec{"partition:server:0|worker:0@1s+0s", "a partition needs a positive duration"}));

}  // namespace
}  // namespace keel
