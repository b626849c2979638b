#include "cluster_fixture.h"

#include <exception>
#include <thread>

#include "test_util.h"

namespace keel::testing {

SchedulerOptions LocalScheduler(int servers, int workers) {
  SchedulerOptions options;
  options.bind_host = "127.0.0.1";
  options.num_servers = servers;
  options.num_workers = workers;
  return options;
}

std::unique_ptr<Scheduler> StartScheduler(const SchedulerOptions& options) {
  auto scheduler = std::make_unique<Scheduler>(options);
  scheduler->Start();
  return scheduler;
}

void StartNodes(const std::vector<Node*>& nodes) {
  if (nodes.empty()) return;
  // A node that cannot register (its registration timed out on a loaded
  // machine) throws; on a thread of its own that would end the process, so
  // the first error is taken to the caller, where the test fails with it.
  std::vector<std::exception_ptr> errors(nodes.size());
  std::vector<std::thread> starting;
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    starting.emplace_back([node = nodes[i], error = &errors[i]] {
      try {
        node->Start();
      } catch (...) {
        *error = std::current_exception();
      }
    });
  }
  try {
    nodes.back()->Start();
  } catch (...) {
    errors.back() = std::current_exception();
  }
  for (auto& thread : starting) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

RequestRetry Retries(double timeout_s, double max_timeout_s, int max_attempts) {
  RequestRetry retry;
  retry.timeout_s = timeout_s;
  retry.max_timeout_s = max_timeout_s;
  retry.max_attempts = max_attempts;
  return retry;
}

RequestRetry PatientRetry() {
  RequestRetry retry;
  retry.timeout_s = 0.2;
  retry.max_attempts = 100;
  return retry;
}

namespace {

// Stops every node of `nodes` that exists, in order, then `scheduler` if it
// exists.
void StopCluster(const std::vector<Node*>& nodes, Scheduler* scheduler) {
  for (Node* node : nodes) {
    if (node) node->Stop();
  }
  if (scheduler) scheduler->Stop();
}

}  // namespace

void ClusterTest::TearDown() {
  std::vector<Node*> nodes = {worker_node_.get()};
  for (auto& node : server_nodes_) nodes.push_back(node.get());
  StopCluster(nodes, scheduler_.get());
  client_.reset();
  worker_node_.reset();
  servers_.clear();
  server_nodes_.clear();
  scheduler_.reset();
}

void ClusterTest::MakeWorker(double heartbeat_interval_s, const RequestRetry& retry) {
  worker_node_ =
      std::make_unique<Node>(LocalNode(proto::WORKER, scheduler_->port(), heartbeat_interval_s));
  client_ = std::make_unique<KVWorker>(worker_node_.get(), retry);
}

void ClusterTest::MakeSumServers(int servers) {
  OptimizerOptions sgd;
  sgd.learning_rate = 1.0f;
  for (int i = 0; i < servers; ++i) {
    server_nodes_.push_back(std::make_unique<Node>(LocalNode(proto::SERVER, scheduler_->port())));
    servers_.push_back(std::make_unique<KVServer>(server_nodes_.back().get(), sgd));
  }
}

void ClusterTest::StartReplicatedScheduler(int servers, int replication) {
  SchedulerOptions options = LocalScheduler(servers, 1);
  options.replication = replication;
  options.heartbeat_timeout_s = 0.5;
  scheduler_ = StartScheduler(options);
  server_nodes_.resize(servers);
  servers_.resize(servers);
}

void ClusterTest::StartAll() {
  std::vector<Node*> nodes;
  for (auto& node : server_nodes_) {
    if (node) nodes.push_back(node.get());
  }
  if (worker_node_) nodes.push_back(worker_node_.get());
  StartNodes(nodes);
}

int ClusterTest::ServerRankOf(Key key) const {
  return worker_node_->ranges()->server(worker_node_->ranges()->RangeOf(key));
}

void ClusterTest::StopServer(int rank) {
  servers_[rank].reset();
  server_nodes_[rank].reset();
}

bool ClusterTest::ChainsBecome(const std::vector<int>& chain) {
  return WaitFor(
      [&] {
        auto ranges = worker_node_->ranges();
        for (size_t r = 0; ranges && r < ranges->num_ranges(); ++r) {
          if (ranges->Chain(r) != chain) return false;
        }
        return ranges != nullptr;
      },
      20);
}

void ReplicatedClusterTest::StartServersAndWorker(const SchedulerOptions& options,
                                                  const MakeClient& make_client) {
  scheduler_ = StartScheduler(options);
  server_nodes_.resize(options.num_servers);
  servers_.resize(options.num_servers);
  for (int rank = 0; rank < options.num_servers; ++rank) MakeServer(rank);
  if (make_client) {
    worker_node_ = std::make_unique<Node>(LocalNode(proto::WORKER, scheduler_->port(), 0.1));
    client_ = make_client(worker_node_.get(), PatientRetry());
  } else {
    MakeWorker(0.1, PatientRetry());
  }
  StartAll();
}

void ReplicatedClusterTest::MakeServer(int rank) {
  NodeOptions options = LocalNode(proto::SERVER, scheduler_->port(), 0.1);
  options.rank = rank;
  OptimizerOptions sgd;
  sgd.name = "sgd";
  sgd.learning_rate = 1.0f;
  server_nodes_[rank] = std::make_unique<Node>(options);
  servers_[rank] = std::make_unique<KVServer>(server_nodes_[rank].get(), sgd);
  if (page_bytes_ > 0) servers_[rank]->SetPageBytes(page_bytes_);
}

void ReplicatedClusterTest::RestartServer(int rank) {
  MakeServer(rank);
  server_nodes_[rank]->Start();
}

void ReplicatedClusterTest::Push(const std::vector<Key>& keys, int times) {
  std::vector<float> gradient;
  for (size_t i = 0; i < keys.size(); ++i) {
    for (int c = 0; c < kWidth; ++c) gradient.push_back(static_cast<float>(c + 1));
  }
  for (int t = 0; t < times; ++t) {
    client_->Wait(
        client_->Push(SharedArray<const Key>(keys), SharedArray<const float>(gradient), kWidth),
        60);
  }
}

std::vector<float> ReplicatedClusterTest::Pull(const std::vector<Key>& keys) {
  SharedArray<float> values;
  client_->Wait(client_->Pull(SharedArray<const Key>(keys), &values, kWidth), 60);
  return std::vector<float>(values.begin(), values.end());
}

std::vector<Key> ReplicatedClusterTest::SpreadKeys(uint64_t features) {
  std::vector<uint64_t> indices;
  for (uint64_t f = 0; f < features; ++f) indices.push_back(f);
  return MixedKeySet(indices);
}

void OneServerClusterTest::StartCluster(
    int workers, const std::function<std::unique_ptr<KVServer>(Node*)>& make_server,
    const RequestRetry& retry, int key_ranges) {
  SchedulerOptions options = LocalScheduler(1, workers);
  options.heartbeat_timeout_s = 1;
  options.key_ranges = key_ranges;
  scheduler_ = StartScheduler(options);
  server_node_ = std::make_unique<Node>(LocalNode(proto::SERVER, scheduler_->port(), 0.2));
  server_ = make_server(server_node_.get());
  std::vector<Node*> nodes = {server_node_.get()};
  for (int i = 0; i < workers; ++i) {
    worker_nodes_.push_back(
        std::make_unique<Node>(LocalNode(proto::WORKER, scheduler_->port(), 0.2)));
    clients_.push_back(std::make_unique<KVWorker>(worker_nodes_.back().get(), retry));
    nodes.push_back(worker_nodes_.back().get());
  }
  StartNodes(nodes);
}

void OneServerClusterTest::TearDown() {
  std::vector<Node*> nodes;
  for (auto& node : worker_nodes_) nodes.push_back(node.get());
  nodes.push_back(server_node_.get());
  StopCluster(nodes, scheduler_.get());
  clients_.clear();
  worker_nodes_.clear();
  server_.reset();
  server_node_.reset();
  scheduler_.reset();
}

}  // namespace keel::testing
