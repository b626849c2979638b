// A real cluster on loopback: `keel scheduler` and `keel server` processes,
// and worker processes forked by the test that run the client.
#include <gtest/gtest.h>

#include <deque>
#include <fstream>
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
constexpr int kWidth = 3;
constexpr int kInFlight = 4;

// Worker r owns feature indices [r * 200, r * 200 + 600): neighbours overlap.
uint64_t FirstFeature(int rank) { return static_cast<uint64_t>(rank) * 200; }
constexpr uint64_t kFeaturesPerWorker = 600;

// Small integers: every partial sum is exact in float.
float Gradient(int rank, uint64_t feature, int column) {
  return static_cast<float>((rank + 1) + static_cast<int>(feature % 5) + column);
}

// What a pull must return after every push of every worker (SGD, rate 1).
float Expected(uint64_t feature, int column) {
  float sum = 0;
  for (int rank = 0; rank < kWorkers; ++rank) {
    if (feature >= FirstFeature(rank) && feature < FirstFeature(rank) + kFeaturesPerWorker) {
      sum += kIterations * Gradient(rank, feature, column);
    }
  }
  return -sum;
}

int RunExactSumWorker(const std::string& scheduler) {
  NodeOptions options;
  options.role = proto::WORKER;
  options.scheduler = scheduler;
  options.bind_host = "127.0.0.1";
  options.register_timeout_s = 20;
  Node node(options);
  KVWorker client(&node);
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
  for (int i = 0; i < kIterations; ++i) {
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
      const float want = Expected(feature, c);
      if (values[i * kWidth + c] != want && wrong++ < 5) {
        std::cerr << "worker " << rank << ": feature " << feature << " column " << c << " is "
                  << values[i * kWidth + c] << ", expected " << want << std::endl;
      }
    }
  }
  node.ReportDone(wrong ? "wrong sums" : "");
  node.WaitForShutdown(20);
  node.Stop();
  std::cerr << "worker " << rank << ": " << wrong << " wrong values of " << all_keys.size() * kWidth
            << std::endl;
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

TEST(MultiProcessCluster, ConcurrentPushesFromThreeWorkersSumExactly) {
  Processes processes;
  char folder[] = "/tmp/keel-exact-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string port_file = std::string(folder) + "/port";
  const pid_t scheduler = processes.Start(
      {KeelBinary(), "scheduler", "--bind=127.0.0.1", "--port_file=" + port_file,
       "--num_servers=" + std::to_string(kServers), "--num_workers=" + std::to_string(kWorkers)});
  const std::string port = WaitForPortFile(port_file, 10);
  unlink(port_file.c_str());
  rmdir(folder);
  ASSERT_FALSE(port.empty()) << processes.Output(scheduler);
  const std::string address = "127.0.0.1:" + port;

  std::vector<pid_t> servers, workers;
  for (int i = 0; i < kServers; ++i) {
    servers.push_back(
        processes.Start({KeelBinary(), "server", "--scheduler=" + address, "--bind=127.0.0.1",
                         "--optimizer=sgd", "--learning_rate=1"}));
  }
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(processes.Fork([&] { return RunExactSumWorker(address); }));
  }
  for (pid_t worker : workers) {
    const auto exit = processes.Wait(worker, 60);
    EXPECT_TRUE(exit.finished) << "worker timed out:\n" << exit.output;
    EXPECT_EQ(exit.code, 0) << exit.output;
  }
  for (pid_t server : servers) {
    const auto exit = processes.Wait(server, 20);
    EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }
  const auto exit = processes.Wait(scheduler, 20);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
}

}  // namespace
}  // namespace keel
