// A real cluster on loopback: `keel scheduler` and `keel server` processes,
// and worker processes forked by the test that run the client. The exact sums
// hold with every node dropping or delaying its data messages, too.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <deque>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "test_util.h"
#include "worker/scheduler_link.h"

namespace keel {
namespace {

using testing::Contains;
using testing::CountOf;
using testing::KeelBinary;
using testing::Processes;

constexpr int kServers = 2;
constexpr int kWorkers = 3;
constexpr int kIterations = 40;
// With faults: enough messages that every kind of loss happens.
constexpr int kFaultIterations = 200;
constexpr int kWidth = 3;
constexpr int kInFlight = 4;

// Worker r owns feature indices [r * 200, r * 200 + 600): neighbours overlap.
uint64_t FirstFeature(int rank) { return static_cast<uint64_t>(rank) * 200; }
constexpr uint64_t kFeaturesPerWorker = 600;

// Small integers: every partial sum is exact in float.
float Gradient(int rank, uint64_t feature, int column) {
  return static_cast<float>((rank + 1) + static_cast<int>(feature % 5) + column);
}

// What a pull must return after `iterations` pushes of every worker (SGD, rate 1).
float Expected(uint64_t feature, int column, int iterations) {
  float sum = 0;
  for (int rank = 0; rank < kWorkers; ++rank) {
    if (feature >= FirstFeature(rank) && feature < FirstFeature(rank) + kFeaturesPerWorker) {
      sum += static_cast<float>(iterations) * Gradient(rank, feature, column);
    }
  }
  return -sum;
}

// The run's faults: the same on every node (servers get them as flags).
// Retries that resend soon (drops are expected): after 0.1 s, at most 1 s
// apart, `max_attempts` sends in all.
RequestRetry ResendSoon(int max_attempts) { return testing::Retries(0.1, 1, max_attempts); }

struct ExactSumFaults {
  // `iterations` iterations in which every node drops `drop_rate` of its data
  // messages, the decisions seeded with `seed`.
  static ExactSumFaults Dropping(int iterations, double drop_rate, uint64_t seed) {
    ExactSumFaults faults;
    faults.iterations = iterations;
    faults.transport.drop_rate = drop_rate;
    faults.transport.seed = seed;
    return faults;
  }

  int iterations = kIterations;
  TransportFaults transport;
  std::vector<std::string> ServerFlags() const {
    return {"--drop_rate=" + std::to_string(transport.drop_rate),
            "--delay_ms=" + std::to_string(transport.delay_ms),
            "--delay_jitter_ms=" + std::to_string(transport.delay_jitter_ms),
            "--fault_seed=" + std::to_string(transport.seed)};
  }
};

// Worker `rank`'s keys and the gradient it pushes for them every iteration.
struct WorkerGradient {
  SharedArray<const Key> keys;
  SharedArray<const float> values;
};

WorkerGradient GradientOf(int rank) {
  std::vector<uint64_t> features;
  for (uint64_t f = FirstFeature(rank); f < FirstFeature(rank) + kFeaturesPerWorker; ++f) {
    features.push_back(f);
  }
  const std::vector<Key> keys = MixedKeySet(features);
  std::vector<float> gradient;
  for (Key key : keys) {
    for (int c = 0; c < kWidth; ++c) gradient.push_back(Gradient(rank, UnmixKey(key), c));
  }
  return {SharedArray<const Key>(keys), SharedArray<const float>(gradient)};
}

// Every value of every worker's features against Expected; returns how many differ.
int CountWrongSums(KVWorker* client, int rank, int iterations) {
  std::vector<uint64_t> all;
  for (uint64_t f = 0; f < FirstFeature(kWorkers - 1) + kFeaturesPerWorker; ++f) all.push_back(f);
  const std::vector<Key> all_keys = MixedKeySet(all);
  SharedArray<float> values;
  client->Wait(client->Pull(SharedArray<const Key>(all_keys), &values, kWidth), 60);
  int wrong = 0;
  for (size_t i = 0; i < all_keys.size(); ++i) {
    const uint64_t feature = UnmixKey(all_keys[i]);
    for (int c = 0; c < kWidth; ++c) {
      const float want = Expected(feature, c, iterations);
      if (values[i * kWidth + c] != want && wrong++ < 5) {
        std::cerr << "worker " << rank << ": feature " << feature << " column " << c << " is "
                  << values[i * kWidth + c] << ", expected " << want << std::endl;
      }
    }
  }
  return wrong;
}

int RunExactSumWorker(const std::string& scheduler, const ExactSumFaults& faults, int index) {
  const int iterations = faults.iterations;
  NodeOptions options;
  options.role = proto::WORKER;
  options.scheduler = scheduler;
  options.bind_host = "127.0.0.1";
  options.register_timeout_s = 20;
  options.faults = faults.transport;
  options.faults.seed += 100 + index;  // not the servers' sequence of decisions
  Node node(options);
  KVWorker client(&node, ResendSoon(20));
  node.Start();
  const int rank = node.rank();
  const WorkerGradient gradient = GradientOf(rank);
  std::deque<KVWorker::Handle> in_flight;
  for (int i = 0; i < iterations; ++i) {
    in_flight.push_back(client.Push(gradient.keys, gradient.values, kWidth));
    if (in_flight.size() == kInFlight) {
      client.Wait(in_flight.front(), 30);
      in_flight.pop_front();
    }
  }
  for (auto handle : in_flight) client.Wait(handle, 30);
  node.Barrier(kWorkerGroup, 30);
  const int wrong = CountWrongSums(&client, rank, iterations);
  SchedulerLink(node).ReportDone(wrong ? "wrong sums" : "");
  node.WaitForShutdown(20);
  node.Stop();
  const TransportFaultCounts counts = node.transport_fault_counts();
  std::cerr << "worker " << rank << ": " << wrong << " wrong values" << std::endl;
  std::cerr << "transport faults: dropped " << counts.dropped << " and delayed " << counts.delayed
            << "; resent " << client.resends() << std::endl;
  return wrong == 0 ? 0 : 1;
}

// What the nodes of a run said they did.
struct FaultTotals {
  uint64_t dropped = 0, delayed = 0, resent = 0, repeated = 0;
};

void AddFaultTotals(const std::string& output, FaultTotals* totals) {
  std::smatch match;
  if (std::regex_search(output, match,
                        std::regex("transport faults: dropped ([0-9]+) and delayed ([0-9]+)"))) {
    totals->dropped += std::stoull(match[1]);
    totals->delayed += std::stoull(match[2]);
  }
  if (std::regex_search(output, match, std::regex("resent ([0-9]+)"))) {
    totals->resent += std::stoull(match[1]);
  }
  if (std::regex_search(output, match, std::regex("repeated ([0-9]+)"))) {
    totals->repeated += std::stoull(match[1]);
  }
}

// Waits for the workers `pids` (each must succeed) and adds up their fault counts.
void CollectWorkers(Processes* processes, const std::vector<pid_t>& pids, FaultTotals* totals) {
  for (pid_t worker : pids) {
    const auto exit = processes->Wait(worker, 120);
    EXPECT_TRUE(exit.finished) << "worker timed out:\n" << exit.output;
    EXPECT_EQ(exit.code, 0) << exit.output;
    AddFaultTotals(exit.output, totals);
  }
}

// Runs the exact-sum job; every role must succeed (the workers check the sums).
FaultTotals RunExactSums(const ExactSumFaults& faults) {
  FaultTotals totals;
  const testing::TempFolder folder("exact");
  Processes processes;
  const std::string port_file = folder.path() + "/port";
  const pid_t scheduler = processes.Start(
      {KeelBinary(), "scheduler", "--bind=127.0.0.1", "--port_file=" + port_file,
       "--num_servers=" + std::to_string(kServers), "--num_workers=" + std::to_string(kWorkers)});
  const std::string port = testing::WaitForPortFile(port_file, 10);
  EXPECT_FALSE(port.empty()) << processes.Output(scheduler);
  if (port.empty()) return totals;
  const std::string address = "127.0.0.1:" + port;

  std::vector<pid_t> servers, workers;
  for (int i = 0; i < kServers; ++i) {
    std::vector<std::string> argv = {
        KeelBinary(),       "server",          "--scheduler=" + address,
        "--bind=127.0.0.1", "--optimizer=sgd", "--learning_rate=1"};
    for (const std::string& flag : faults.ServerFlags()) argv.push_back(flag);
    servers.push_back(processes.Start(argv));
  }
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(processes.Fork([&] { return RunExactSumWorker(address, faults, i); }));
  }
  CollectWorkers(&processes, workers, &totals);
  for (pid_t server : servers) {
    const auto exit = processes.Wait(server, 20);
    EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
    AddFaultTotals(exit.output, &totals);
  }
  const auto exit = processes.Wait(scheduler, 20);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  return totals;
}

// Replication: two servers, each range on both (--replication=1). Server 1
// is killed with -9 while the workers push and started again; then, once the
// pushes are done, server 0 is killed too, and the sums are read from server
// 1 alone: what it copied when it rejoined and what was passed to it since.
constexpr int kReplicatedIterations = 300;

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

void Touch(const std::string& path) { std::ofstream(path) << "1\n"; }

int RunReplicatedWorker(const std::string& scheduler, const ExactSumFaults& faults, int index,
                        const std::string& folder) {
  NodeOptions options;
  options.role = proto::WORKER;
  options.scheduler = scheduler;
  options.bind_host = "127.0.0.1";
  options.register_timeout_s = 20;
  options.heartbeat_interval_s = 0.2;
  options.faults = faults.transport;
  options.faults.seed += 100 + index;
  Node node(options);
  KVWorker client(&node, ResendSoon(60));
  node.Start();
  const int rank = node.rank();
  const WorkerGradient gradient = GradientOf(rank);
  const std::string me = std::to_string(rank);
  std::deque<KVWorker::Handle> in_flight;
  for (int i = 0; i < faults.iterations; ++i) {
    if (i == faults.iterations / 3) Touch(folder + "/third-" + me);
    // Two thirds in: on only once the killed server has been started again,
    // so pushes flow while it rejoins.
    if (i == 2 * faults.iterations / 3 &&
        !testing::WaitFor([&] { return Exists(folder + "/restarted"); }, 60)) {
      std::cerr << "worker " << rank << ": the server was not started again" << std::endl;
      return 1;
    }
    in_flight.push_back(client.Push(gradient.keys, gradient.values, kWidth));
    if (in_flight.size() == kInFlight) {
      client.Wait(in_flight.front(), 60);
      in_flight.pop_front();
    }
    // Deliberate pacing: the pushes spread over the run, so that the faults
    // (drops, delays, a server's restart) land while traffic flows.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto handle : in_flight) client.Wait(handle, 60);
  node.Barrier(kWorkerGroup, 60);
  const int wrong_before = CountWrongSums(&client, rank, faults.iterations);
  Touch(folder + "/done-" + me);
  // The test kills server 0 now: the same sums must come from server 1 alone.
  int wrong_after = -1;
  if (testing::WaitFor([&] { return Exists(folder + "/go"); }, 60)) {
    wrong_after = CountWrongSums(&client, rank, faults.iterations);
  }
  SchedulerLink(node).ReportDone(wrong_before || wrong_after ? "wrong sums" : "");
  node.WaitForShutdown(20);
  node.Stop();
  const TransportFaultCounts counts = node.transport_fault_counts();
  std::cerr << "worker " << rank << ": " << wrong_before << " wrong values with both servers, "
            << wrong_after << " from the rejoined one alone" << std::endl;
  std::cerr << "transport faults: dropped " << counts.dropped << " and delayed " << counts.delayed
            << "; resent " << client.resends() << std::endl;
  return wrong_before == 0 && wrong_after == 0 ? 0 : 1;
}

// How server 1 leaves mid-run: killed with -9 and started again, or paused
// (SIGSTOP) past the heartbeat timeout and continued, when it starts over by
// itself.
enum class ServerFault { kKillAndRestart, kPauseAndContinue };

// A replicated server of rank `rank` joining the scheduler at `address`.
std::vector<std::string> ReplicatedServerArgv(const std::string& address,
                                              const ExactSumFaults& faults, int rank) {
  std::vector<std::string> argv = {KeelBinary(),
                                   "server",
                                   "--scheduler=" + address,
                                   "--bind=127.0.0.1",
                                   "--rank=" + std::to_string(rank),
                                   "--heartbeat_interval=0.2",
                                   "--optimizer=sgd",
                                   "--learning_rate=1"};
  for (const std::string& flag : faults.ServerFlags()) argv.push_back(flag);
  return argv;
}

// Waits until every worker has written folder/`name`-RANK.
bool AllWorkersWrote(const std::string& folder, const std::string& name) {
  return testing::WaitFor(
      [&] {
        for (int r = 0; r < kWorkers; ++r) {
          if (!Exists(folder + "/" + name + "-" + std::to_string(r))) return false;
        }
        return true;
      },
      90);
}

// The membership log says server 1 left first and its range went to its
// backup, server 0; then server 0 left, and server 1, holding replicas
// again, took both ranges.
void ExpectPromotionsInTurn(const std::string& membership) {
  auto leaves = testing::EventsNamed(membership, "leave");
  leaves.resize(2);  // (a missing one fails below)
  EXPECT_EQ(leaves[0]["rank"], "1") << testing::ReadFileOrEmpty(membership);
  EXPECT_TRUE(Contains(leaves[0]["promoted"], "\"primary\": 0")) << leaves[0]["promoted"];
  EXPECT_EQ(leaves[1]["rank"], "0") << testing::ReadFileOrEmpty(membership);
  EXPECT_TRUE(Contains(leaves[1]["promoted"], "\"primary\": 1")) << leaves[1]["promoted"];
}

FaultTotals RunReplicatedExactSums(const ExactSumFaults& faults, ServerFault fault) {
  FaultTotals totals;
  const testing::TempFolder temp_folder("replicated");
  const std::string folder = temp_folder.path();
  const std::string membership = folder + "/membership.jsonl";
  Processes processes;
  const pid_t scheduler = processes.Start(
      {KeelBinary(), "scheduler", "--bind=127.0.0.1", "--port_file=" + folder + "/port",
       "--num_servers=2", "--num_workers=" + std::to_string(kWorkers), "--replication=1",
       "--heartbeat_timeout=1", "--membership_log=" + membership});
  const std::string port = testing::WaitForPortFile(folder + "/port", 10);
  EXPECT_FALSE(port.empty()) << processes.Output(scheduler);
  if (port.empty()) return totals;
  const std::string address = "127.0.0.1:" + port;
  const pid_t server0 = processes.Start(ReplicatedServerArgv(address, faults, 0));
  const pid_t server1 = processes.Start(ReplicatedServerArgv(address, faults, 1));
  std::vector<pid_t> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(
        processes.Fork([&] { return RunReplicatedWorker(address, faults, i, folder); }));
  }
  // A third of the pushes done, and more on their way: server 1 dies.
  EXPECT_TRUE(AllWorkersWrote(folder, "third"));
  const bool pause = fault == ServerFault::kPauseAndContinue;
  // Stopped first, so that pushes are waiting on it when it dies: killed
  // outright between two pushes, its loss could be seen before any was sent
  // to it, and nothing would need resending.
  kill(server1, SIGSTOP);
  if (!pause) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(server1, SIGKILL);
  }
  EXPECT_TRUE(
      testing::WaitFor([&] { return !testing::EventsNamed(membership, "leave").empty(); }, 20))
      << processes.Output(scheduler);
  // A paused server learns it left at its next heartbeat, and starts over.
  if (pause) kill(server1, SIGCONT);
  const pid_t restarted =
      pause ? server1 : processes.Start(ReplicatedServerArgv(address, faults, 1));
  Touch(folder + "/restarted");
  // It copies both ranges from server 0 while the pushes go on.
  EXPECT_TRUE(AllWorkersWrote(folder, "done"));
  EXPECT_TRUE(testing::WaitFor(
      [&] { return CountOf(processes.Output(restarted), "holds a replica of it again") == 2; },
      30))
      << processes.Output(restarted);
  kill(server0, SIGKILL);
  Touch(folder + "/go");
  CollectWorkers(&processes, workers, &totals);
  const auto last = processes.Wait(restarted, 20);
  EXPECT_TRUE(last.finished && last.code == 0) << last.output;
  AddFaultTotals(last.output, &totals);
  const auto exit = processes.Wait(scheduler, 20);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  ExpectPromotionsInTurn(membership);
  return totals;
}

TEST(MultiProcessCluster, ReplicatedSumsStayExactWhenServersAreKilledAndOneRestarted) {
  ExactSumFaults faults;
  faults.iterations = kReplicatedIterations;
  const FaultTotals totals = RunReplicatedExactSums(faults, ServerFault::kKillAndRestart);
  // Pushes lost with the killed server were resent to the promoted backup.
  EXPECT_GT(totals.resent, 0u);
}

TEST(MultiProcessCluster, APausedReplicatedServerLeavesAndOnContinueRejoinsWithoutStaleUpdates) {
  ExactSumFaults faults;
  faults.iterations = kReplicatedIterations;
  const FaultTotals totals = RunReplicatedExactSums(faults, ServerFault::kPauseAndContinue);
  EXPECT_GT(totals.resent, 0u);
}

TEST(MultiProcessCluster, ReplicatedSumsStayExactWithServerKillsAndOnePercentDrops) {
  const ExactSumFaults faults = ExactSumFaults::Dropping(kReplicatedIterations, 0.01, 14);
  const FaultTotals totals = RunReplicatedExactSums(faults, ServerFault::kKillAndRestart);
  EXPECT_GT(totals.dropped, 0u);
  EXPECT_GT(totals.resent, 0u);
}

TEST(MultiProcessCluster, ConcurrentPushesFromThreeWorkersSumExactly) {
  const FaultTotals totals = RunExactSums(ExactSumFaults());
  // No fault is injected. (A loaded machine may delay an answer past the
  // adaptive resend timeout: a resend then, deduplicated by the server.)
  EXPECT_EQ(totals.dropped + totals.delayed, 0u);
}

TEST(MultiProcessCluster, SumsStayExactWhenEveryNodeDropsOnePercentOfDataMessages) {
  const ExactSumFaults faults = ExactSumFaults::Dropping(kFaultIterations, 0.01, 11);
  const FaultTotals totals = RunExactSums(faults);
  // The losses happened, were made good by resends, and a resent push whose
  // first copy had been applied was acknowledged without being applied again.
  EXPECT_GT(totals.dropped, 0u);
  EXPECT_GT(totals.resent, 0u);
  EXPECT_GT(totals.repeated, 0u);
}

TEST(MultiProcessCluster, SumsStayExactWhenEveryNodeDelaysItsDataMessages) {
  ExactSumFaults faults;
  faults.transport.delay_ms = 5;
  faults.transport.delay_jitter_ms = 5;
  faults.transport.seed = 12;
  const FaultTotals totals = RunExactSums(faults);
  EXPECT_GT(totals.delayed, 0u);
  EXPECT_EQ(totals.dropped, 0u);
}

TEST(MultiProcessCluster, SumsStayExactWithDropsAndDelaysTogether) {
  ExactSumFaults faults = ExactSumFaults::Dropping(kFaultIterations, 0.01, 13);
  faults.transport.delay_ms = 2;
  faults.transport.delay_jitter_ms = 3;
  const FaultTotals totals = RunExactSums(faults);
  EXPECT_GT(totals.dropped, 0u);
  EXPECT_GT(totals.delayed, 0u);
  EXPECT_GT(totals.resent, 0u);
}

}  // namespace
}  // namespace keel
