// A real cluster on loopback: `keel scheduler` and `keel server` processes,
// and worker processes forked by the test that run the client. The exact sums
// hold with every node dropping or delaying its data messages, too.
#include <gtest/gtest.h>

#include <deque>
#include <fstream>
#include <regex>
#include <sstream>

#include "kv/kv_worker.h"
#include "kv/node.h"
#include "test_util.h"

namespace keel {
namespace {

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
struct ExactSumFaults {
  int iterations = kIterations;
  TransportFaults transport;
  std::vector<std::string> ServerFlags() const {
    return {"--drop_rate=" + std::to_string(transport.drop_rate),
            "--delay_ms=" + std::to_string(transport.delay_ms),
            "--delay_jitter_ms=" + std::to_string(transport.delay_jitter_ms),
            "--fault_seed=" + std::to_string(transport.seed)};
  }
};

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
  RequestRetry retry;
  retry.timeout_s = 0.1;  // drops are expected: resend soon
  retry.max_timeout_s = 1;
  retry.max_attempts = 20;
  KVWorker client(&node, retry);
  node.Start();
  const int rank = node.rank();

  std::vector<uint64_t> features;
  for (uint64_t f = FirstFeature(rank); f < FirstFeature(rank) + kFeaturesPerWorker; ++f) {
    features.push_back(f);
  }
  const std::vector<Key> keys = MixedKeySet(features);
  std::vector<float> gradient;
  for (Key key : keys) {
    for (int c = 0; c < kWidth; ++c) gradient.push_back(Gradient(rank, UnmixKey(key), c));
  }
  SharedArray<const Key> shared_keys(keys);
  SharedArray<const float> shared_gradient(gradient);
  std::deque<KVWorker::Handle> in_flight;
  for (int i = 0; i < iterations; ++i) {
    in_flight.push_back(client.Push(shared_keys, shared_gradient, kWidth));
    if (in_flight.size() == kInFlight) {
      client.Wait(in_flight.front(), 30);
      in_flight.pop_front();
    }
  }
  for (auto handle : in_flight) client.Wait(handle, 30);
  node.Barrier(kWorkerGroup, 30);

  std::vector<uint64_t> all;
  for (uint64_t f = 0; f < FirstFeature(kWorkers - 1) + kFeaturesPerWorker; ++f) all.push_back(f);
  const std::vector<Key> all_keys = MixedKeySet(all);
  SharedArray<float> values;
  client.Wait(client.Pull(SharedArray<const Key>(all_keys), &values, kWidth), 30);
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
  node.ReportDone(wrong ? "wrong sums" : "");
  node.WaitForShutdown(20);
  node.Stop();
  const TransportFaultCounts counts = node.transport_fault_counts();
  std::cerr << "worker " << rank << ": " << wrong << " wrong values of " << all_keys.size() * kWidth
            << std::endl;
  std::cerr << "transport faults: dropped " << counts.dropped << " and delayed " << counts.delayed
            << "; resent " << client.resends() << std::endl;
  return wrong == 0 ? 0 : 1;
}

std::string WaitForPortFile(const std::string& path, double timeout_s) {
  std::string port;
  testing::WaitFor(
      [&] {
        std::ifstream in(path);
        return static_cast<bool>(in >> port);
      },
      timeout_s);
  return port;
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

// Runs the exact-sum job; every role must succeed (the workers check the sums).
FaultTotals RunExactSums(const ExactSumFaults& faults) {
  FaultTotals totals;
  Processes processes;
  char folder[] = "/tmp/keel-exact-XXXXXX";
  EXPECT_NE(mkdtemp(folder), nullptr);
  const std::string port_file = std::string(folder) + "/port";
  const pid_t scheduler = processes.Start(
      {KeelBinary(), "scheduler", "--bind=127.0.0.1", "--port_file=" + port_file,
       "--num_servers=" + std::to_string(kServers), "--num_workers=" + std::to_string(kWorkers)});
  const std::string port = WaitForPortFile(port_file, 10);
  unlink(port_file.c_str());
  rmdir(folder);
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
  for (pid_t worker : workers) {
    const auto exit = processes.Wait(worker, 120);
    EXPECT_TRUE(exit.finished) << "worker timed out:\n" << exit.output;
    EXPECT_EQ(exit.code, 0) << exit.output;
    AddFaultTotals(exit.output, &totals);
  }
  for (pid_t server : servers) {
    const auto exit = processes.Wait(server, 20);
    EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
    AddFaultTotals(exit.output, &totals);
  }
  const auto exit = processes.Wait(scheduler, 20);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  return totals;
}

TEST(MultiProcessCluster, ConcurrentPushesFromThreeWorkersSumExactly) {
  const FaultTotals totals = RunExactSums(ExactSumFaults());
  EXPECT_EQ(totals.dropped + totals.delayed + totals.resent, 0u);
}

TEST(MultiProcessCluster, SumsStayExactWhenEveryNodeDropsOnePercentOfDataMessages) {
  ExactSumFaults faults;
  faults.iterations = kFaultIterations;
  faults.transport.drop_rate = 0.01;
  faults.transport.seed = 11;
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
  ExactSumFaults faults;
  faults.iterations = kFaultIterations;
  faults.transport.drop_rate = 0.01;
  faults.transport.delay_ms = 2;
  faults.transport.delay_jitter_ms = 3;
  faults.transport.seed = 13;
  const FaultTotals totals = RunExactSums(faults);
  EXPECT_GT(totals.dropped, 0u);
  EXPECT_GT(totals.delayed, 0u);
  EXPECT_GT(totals.resent, 0u);
}

}  // namespace
}  // namespace keel
