// `keel bench reshard`: how long pushes stall while key ranges move. A
// scheduler, two servers and a worker run in this process over loopback, on
// --key_ranges ranges; the worker fills a table of --reshard_keys rows
// (--reshard_width floats, SGD), then pushes --sparse_keys random keys at a
// time, one push in flight, without pause. Meanwhile a third server joins
// (a quarter of the ranges move to it) and then server 0 is drained (its
// ranges move to the others). Each push's wait is recorded; the figures are
// the median wait while no range moves, and the longest wait of a push that
// overlapped each move. It runs twice, with the moving ranges copied before
// their new server joins the chain (pre-copy: pushes wait only for the rows
// changed since) and without (they wait for the whole copy).
#include "bench/bench_reshard.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/time.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "scheduler/admin_client.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"

namespace keel {
namespace {

// One push: when it was sent and how long it waited for its answer.
struct PushTime {
  double sent = 0;
  double seconds = 0;
};

struct Move {
  double begin = 0, end = 0;  // from the request to a settled view
  double longest_push_s = 0;  // the longest wait of a push overlapping it
};

struct Run {
  double median_push_s = 0;  // pushes overlapping no move
  Move join, drain;
  uint64_t pushes = 0;
};

NodeOptions LocalNodeOptions(proto::Role role, int scheduler_port) {
  NodeOptions options;
  options.role = role;
  options.scheduler = "127.0.0.1:" + std::to_string(scheduler_port);
  options.bind_host = "127.0.0.1";
  options.register_timeout_s = 30;
  options.heartbeat_interval_s = 0.2;
  return options;
}

// Every range on one server of its home, none copying or pre-copying, and
// `servers` servers in the view.
bool Settled(const proto::ClusterView& view, int servers) {
  int members = 0;
  for (const auto& node : view.nodes()) members += node.role() == proto::SERVER;
  if (members != servers || view.ranges_size() == 0) return false;
  for (const auto& range : view.ranges()) {
    // A view names a range's home only where it is not the range's chain.
    if (range.copying_size() > 0 || range.precopy_size() > 0 || range.home_size() > 0) {
      return false;
    }
  }
  return true;
}

class ReshardCluster {
 public:
  ReshardCluster(bool precopy, int key_ranges) {
    SchedulerOptions options;
    options.bind_host = "127.0.0.1";
    options.num_servers = 2;
    options.num_workers = 1;
    options.key_ranges = key_ranges;
    options.precopy = precopy;
    options.heartbeat_timeout_s = 10;
    scheduler_ = std::make_unique<Scheduler>(options);
    scheduler_->Start();
    std::vector<std::thread> starting;
    for (int rank = 0; rank < 2; ++rank) {
      AddServer(rank, false);
      starting.emplace_back([this, rank] { nodes_[rank]->Start(); });
    }
    worker_node_ = std::make_unique<Node>(LocalNodeOptions(proto::WORKER, scheduler_->port()));
    client_ = std::make_unique<KVWorker>(worker_node_.get());
    worker_node_->Start();
    for (auto& thread : starting) thread.join();
  }

  ~ReshardCluster() {
    client_.reset();
    worker_node_->Stop();
    for (auto& node : nodes_) node->Stop();
    scheduler_->Stop();
  }

  void AddServer(int rank, bool join) {
    NodeOptions options = LocalNodeOptions(proto::SERVER, scheduler_->port());
    options.rank = join ? -1 : rank;
    options.join = join;
    OptimizerOptions sgd;
    sgd.name = "sgd";
    sgd.learning_rate = 0.01f;
    nodes_.push_back(std::make_unique<Node>(options));
    servers_.push_back(std::make_unique<KVServer>(nodes_.back().get(), sgd));
  }

  void Join() {
    AddServer(2, true);
    nodes_.back()->Start();
  }

  void Drain(int rank) {
    RequestDrain("127.0.0.1:" + std::to_string(scheduler_->port()), rank, std::nullopt, 30);
  }

  // Waits (up to 120 s) until the view is settled on `servers` servers.
  void AwaitSettled(int servers) {
    const double deadline = MonotonicSeconds() + 120;
    while (!Settled(scheduler_->view(), servers)) {
      if (MonotonicSeconds() > deadline) throw MakeError("the ranges did not settle in 120 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  KVWorker* client() { return client_.get(); }

 private:
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<KVServer>> servers_;
  std::unique_ptr<Node> worker_node_;
  std::unique_ptr<KVWorker> client_;
};

// The table's keys: the mixed images of features 0 .. count - 1.
std::vector<Key> TableKeys(uint64_t count) {
  std::vector<uint64_t> features(count);
  for (uint64_t f = 0; f < count; ++f) features[f] = f;
  return MixedKeySet(features);
}

Run Measure(bool precopy, const std::vector<Key>& keys, int width, size_t per_push,
            int key_ranges) {
  ReshardCluster cluster(precopy, key_ranges);
  KVWorker* client = cluster.client();
  // Fill: every key gets its row.
  constexpr size_t kFillKeys = 100000;
  std::vector<float> gradient(kFillKeys * width, 0.5f);
  for (size_t begin = 0; begin < keys.size(); begin += kFillKeys) {
    const size_t n = std::min(kFillKeys, keys.size() - begin);
    client->Wait(client->Push(
        SharedArray<const Key>(std::vector<Key>(keys.begin() + begin, keys.begin() + begin + n)),
        SharedArray<const float>(
            std::vector<float>(gradient.begin(), gradient.begin() + n * width)),
        width));
  }
  std::mutex mutex;
  std::vector<PushTime> times;
  std::atomic<bool> stop{false};
  std::string error;
  std::thread pusher([&] {
    std::mt19937_64 random(7);
    std::uniform_int_distribution<size_t> pick(0, keys.size() - 1);
    const SharedArray<const float> values(std::vector<float>(per_push * width, 0.25f));
    try {
      while (!stop.load()) {
        std::vector<Key> batch(per_push);
        for (Key& key : batch) key = keys[pick(random)];
        std::sort(batch.begin(), batch.end());
        batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
        const size_t count = batch.size();
        const double sent = MonotonicSeconds();
        client->Wait(client->Push(SharedArray<const Key>(std::move(batch)),
                                  values.Slice(0, count * width), width));
        std::lock_guard<std::mutex> lock(mutex);
        times.push_back({sent, MonotonicSeconds() - sent});
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  Run run;
  auto pause = [](double seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  };
  pause(1);
  run.join.begin = MonotonicSeconds();
  cluster.Join();
  cluster.AwaitSettled(3);
  run.join.end = MonotonicSeconds();
  pause(1);
  run.drain.begin = MonotonicSeconds();
  cluster.Drain(0);
  cluster.AwaitSettled(2);
  run.drain.end = MonotonicSeconds();
  pause(0.5);
  stop.store(true);
  pusher.join();
  if (!error.empty()) throw MakeError("a push failed: ", error);
  std::vector<double> quiet;
  for (const PushTime& push : times) {
    const double done = push.sent + push.seconds;
    bool during = false;
    for (Move* move : {&run.join, &run.drain}) {
      if (push.sent <= move->end && done >= move->begin) {
        move->longest_push_s = std::max(move->longest_push_s, push.seconds);
        during = true;
      }
    }
    if (!during) quiet.push_back(push.seconds);
  }
  std::sort(quiet.begin(), quiet.end());
  run.median_push_s = quiet.empty() ? 0 : quiet[quiet.size() / 2];
  run.pushes = times.size();
  return run;
}

}  // namespace

int BenchReshard(const BenchReshardOptions& options) {
  const int key_ranges = options.key_ranges;
  const std::vector<Key> keys = TableKeys(options.reshard_keys);
  const int width = options.reshard_width;
  const double row_bytes = sizeof(Key) + sizeof(float) * width;
  printf(
      "reshard: %zu rows x %d floats (%.0f MB), %d key ranges on 2 servers; pushes of %zu "
      "random keys, one in flight; a server joins (%d ranges move to it), then server 0 is "
      "drained\n",
      keys.size(), width, keys.size() * row_bytes / 1e6, key_ranges,
      static_cast<size_t>(options.sparse_keys), key_ranges / 3);
  printf("%-10s %10s %12s %12s %12s %12s %8s\n", "copy", "push p50", "join took", "join stall",
         "drain took", "drain stall", "pushes");
  for (bool precopy : {false, true}) {
    const Run run = Measure(precopy, keys, width, options.sparse_keys, key_ranges);
    printf("%-10s %8.1fms %10.0fms %10.1fms %10.0fms %10.1fms %8lu\n",
           precopy ? "pre-copy" : "whole", run.median_push_s * 1e3,
           (run.join.end - run.join.begin) * 1e3, run.join.longest_push_s * 1e3,
           (run.drain.end - run.drain.begin) * 1e3, run.drain.longest_push_s * 1e3,
           static_cast<unsigned long>(run.pushes));
    fflush(stdout);
  }
  return 0;
}

}  // namespace keel
