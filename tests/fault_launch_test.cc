// `keel launch --faults=...`: a training job that is stopped and loses
// messages still finishes, and the event log says what happened, in order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

struct Event {
  double t = 0;
  std::string event, role;
  int rank = -1;
  std::string line;
};

// The event log's lines, each with its time, event, role and rank.
std::vector<Event> ReadEvents(const std::string& path) {
  std::vector<Event> events;
  std::ifstream in(path);
  std::string line;
  const std::regex t("\"t\": ([0-9.]+)"), event("\"event\": \"([a-z_]+)\""),
      role("\"role\": \"([a-z]+)\""), rank("\"rank\": ([0-9]+)");
  while (std::getline(in, line)) {
    Event parsed;
    parsed.line = line;
    std::smatch match;
    if (std::regex_search(line, match, t)) parsed.t = std::stod(match[1]);
    if (std::regex_search(line, match, event)) parsed.event = match[1];
    if (std::regex_search(line, match, role)) parsed.role = match[1];
    if (std::regex_search(line, match, rank)) parsed.rank = std::stoi(match[1]);
    events.push_back(parsed);
  }
  return events;
}

// Index of the first event named `name` for `role` `rank` (-1: any), or -1.
int Find(const std::vector<Event>& events, const std::string& name, const std::string& role = "",
         int rank = -1) {
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].event == name && (role.empty() || events[i].role == role) &&
        (rank < 0 || events[i].rank == rank)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

class FaultLaunch : public testing::TempFolderTest {};

TEST_F(FaultLaunch, AJobStoppedAndLosingMessagesFinishesAndLogsItsFaultsInOrder) {
  const auto data =
      testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=20000", "--features=2000",
                    "--nnz=10", "--seed=7", "--train_files=2", "--out=" + folder_},
                   60);
  ASSERT_TRUE(data.finished && data.code == 0) << data.output;
  const std::string log = folder_ + "/events.jsonl";
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--job=linear_learner", "--epochs=2",
       "--mini_batch_size=100", "--train=" + folder_ + "/train",
       "--validation=" + folder_ + "/validation", "--model_dir=" + folder_ + "/model",
       "--minloglevel=1", "--request_timeout_ms=200",
       "--faults=stop:worker:0@1s+1s,drop:server:*=0.01,drop:worker:*=0.01", "--event_log=" + log},
      180);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "[faults] {\"t\": ")) << exit.output;  // echoed

  const std::vector<Event> events = ReadEvents(log);
  ASSERT_FALSE(events.empty());
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_LE(events[i - 1].t, events[i].t) << events[i - 1].line << "\n" << events[i].line;
  }
  const int drop = Find(events, "drop", "server");
  const int start = Find(events, "start", "worker", 0);
  const int stop = Find(events, "stop", "worker", 0);
  const int resume = Find(events, "continue", "worker", 0);
  const int exited = Find(events, "exit", "worker", 0);
  ASSERT_GE(drop, 0) << exit.output;
  ASSERT_GE(start, 0) << exit.output;
  ASSERT_GE(stop, 0) << exit.output;
  ASSERT_GE(resume, 0) << exit.output;
  ASSERT_GE(exited, 0) << exit.output;
  EXPECT_LT(drop, start);
  EXPECT_LT(start, stop);
  EXPECT_LT(stop, resume);
  EXPECT_LT(resume, exited);
  EXPECT_GE(events[stop].t, 1.0);
  EXPECT_GE(events[resume].t - events[stop].t, 1.0);
  EXPECT_TRUE(Contains(events[exited].line, "\"status\": \"exited with status 0\""))
      << events[exited].line;
  EXPECT_EQ(events.back().event, "end");
  EXPECT_TRUE(Contains(events.back().line, "\"code\": 0")) << events.back().line;
}

// Lines (examples) in every file of `folder`.
long CountLines(const std::string& folder) {
  const auto listing = testing::Run({"/bin/sh", "-c", "cat " + folder + "/* | wc -l"}, 30);
  return listing.finished && listing.code == 0 ? std::stol(listing.output) : -1;
}

TEST_F(FaultLaunch, AReplicatedJobSurvivesAServerKilledAndRestartedByTheSchedule) {
  const auto data =
      testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=200000", "--features=5000",
                    "--nnz=10", "--seed=7", "--train_files=2", "--out=" + folder_},
                   60);
  ASSERT_TRUE(data.finished && data.code == 0) << data.output;
  const std::string log = folder_ + "/events.jsonl";
  const std::string membership = folder_ + "/membership.jsonl";
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=2", "--workers=2", "--replication=1",
       "--job=linear_learner", "--epochs=4", "--mini_batch_size=100",
       "--train=" + folder_ + "/train", "--validation=" + folder_ + "/validation",
       "--model_dir=" + folder_ + "/model", "--heartbeat_interval=0.2", "--heartbeat_timeout=1",
       "--request_timeout_ms=200", "--faults=kill:server:1@2s,restart:server:1@3s",
       "--event_log=" + log, "--membership_log=" + membership},
      180);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  const std::vector<Event> events = ReadEvents(log);
  const int kill = Find(events, "kill", "server", 1);
  const int restart = Find(events, "restart", "server", 1);
  ASSERT_GE(kill, 0) << exit.output;
  ASSERT_GE(restart, 0) << exit.output;
  EXPECT_LT(kill, restart);
  // Its backup took over, and the restarted server copied its ranges back.
  EXPECT_TRUE(Contains(exit.output, "key range 1: backup server 0 is promoted to primary"))
      << exit.output;
  EXPECT_TRUE(Contains(exit.output, "it copies key range(s) 0 (from server 0), 1 (from server 0)"))
      << exit.output;
  EXPECT_TRUE(Contains(exit.output, "this server holds a replica of it again")) << exit.output;
  const std::string members = testing::ReadFileOrEmpty(membership);
  EXPECT_TRUE(Contains(members, "\"event\": \"leave\", \"role\": \"server\", \"rank\": 1"))
      << members;
  EXPECT_TRUE(Contains(members, "\"replaces\": true")) << members;
  // Every epoch read every example.
  const long examples = CountLines(folder_ + "/train");
  EXPECT_EQ(testing::ExamplesPerEpoch(exit.output), std::vector<long>(4, examples)) << exit.output;
}

TEST_F(FaultLaunch, ABadFaultSpecIsRefusedBeforeAnythingStarts) {
  const auto exit =
      testing::Run({KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=linear_learner",
                    "--train=" + folder_, "--faults=stop:worker:0@1s+1s,kill:worker:3@2s"},
                   30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--faults item 2 'kill:worker:3@2s': there is no worker 3"))
      << exit.output;
  EXPECT_FALSE(Contains(exit.output, "[scheduler]")) << exit.output;
}

}  // namespace
}  // namespace keel
