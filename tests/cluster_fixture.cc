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
