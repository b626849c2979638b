// Every role's metrics (metrics/role_metrics.h) and probes
// (metrics/role_probes.h) on a cluster in one process, over loopback: the
// names and label sets Prometheus's conventions ask for, label sets bounded
// whatever the keys, and figures that match what the cluster did.
#include "metrics/role_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "metrics/metrics_registry.h"
#include "metrics/role_probes.h"
#include "scheduler/scheduler.h"
#include "scrape.h"
#include "server/kv_server.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ParseExposition;
using testing::SumOfValues;
using testing::WaitFor;

// The label names every role's metrics may use: none names a key.
const std::set<std::string> kBoundedLabels = {"op",   "table", "server", "reason",
                                              "role", "rank",  "result", "le"};

// "name{labels}" -> the names of its labels.
std::set<std::string> LabelNames(const std::string& series) {
  std::set<std::string> names;
  size_t at = series.find('{');
  while (at != std::string::npos && at + 1 < series.size()) {
    const size_t equals = series.find('=', at + 1);
    if (equals == std::string::npos) break;
    names.insert(series.substr(at + 1, equals - at - 1));
    at = series.find("\",", equals);
    if (at != std::string::npos) ++at;
  }
  return names;
}

// metric name -> type, from the exposition's # TYPE lines.
std::map<std::string, std::string> Types(const std::string& text) {
  std::map<std::string, std::string> types;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    types[name] = type;
  }
  return types;
}

// Series of `exposition` whose name is `name` (labels aside).
std::map<std::string, double> SeriesOf(const std::string& exposition, const std::string& name) {
  std::map<std::string, double> series;
  for (const auto& [key, value] : ParseExposition(exposition)) {
    if (key == name || key.rfind(name + "{", 0) == 0) series[key] = value;
  }
  return series;
}

class RoleMetrics : public testing::ClusterTest {
 protected:
  static constexpr int kServers = 2;

  void SetUp() override {
    scheduler_ = std::make_unique<Scheduler>(testing::LocalScheduler(kServers, 1));
    AddSchedulerMetrics(scheduler_.get(), &scheduler_metrics_);
    scheduler_->Start();
    MakeSumServers(kServers);
    for (int i = 0; i < kServers; ++i) {
      server_metrics_.push_back(std::make_unique<MetricsRegistry>());
      AddNodeMetrics(server_nodes_[i].get(), server_metrics_.back().get());
      AddServerMetrics(servers_[i].get(), server_metrics_.back().get());
    }
    MakeWorker();
    AddNodeMetrics(worker_node_.get(), &worker_metrics_);
    AddWorkerMetrics(client_.get(), &counters_, &worker_metrics_);
  }

  // Pushes ones for `count` keys from `first` on (spread over the key space)
  // to `table`, and pulls them back.
  void PushAndPull(uint32_t table, Key first, size_t count) {
    std::vector<Key> keys;
    for (size_t i = 0; i < count; ++i) keys.push_back((first + i) * 0x9E3779B97F4A7C15ULL);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    SharedArray<const Key> shared_keys(keys);
    SharedArray<const float> ones(std::vector<float>(keys.size(), 1.0f));
    client_->Wait(client_->Push(shared_keys, ones, 1, table));
    SharedArray<float> values;
    client_->Wait(client_->Pull(shared_keys, &values, 1, table));
  }

  std::vector<std::string> Expositions() const {
    std::vector<std::string> texts = {scheduler_metrics_.TextExposition(),
                                      worker_metrics_.TextExposition()};
    for (const auto& registry : server_metrics_) texts.push_back(registry->TextExposition());
    return texts;
  }

  // The nodes' receive threads observe into these: ClusterTest's TearDown
  // destroys the nodes before them.
  MetricsRegistry scheduler_metrics_;
  MetricsRegistry worker_metrics_;
  std::vector<std::unique_ptr<MetricsRegistry>> server_metrics_;
  TrainingCounters counters_;
};

TEST_F(RoleMetrics, EveryNameFollowsPrometheusConventions) {
  StartAll();
  PushAndPull(0, 1, 100);
  for (const std::string& text : Expositions()) {
    const auto types = Types(text);
    ASSERT_FALSE(types.empty()) << text;
    for (const auto& [name, type] : types) {
      EXPECT_EQ(name.rfind("keel_", 0), 0u) << name;
      const bool total = name.size() > 6 && name.substr(name.size() - 6) == "_total";
      EXPECT_EQ(type == "counter", total) << name << " is a " << type;
    }
    for (const auto& [series, value] : ParseExposition(text)) {
      for (const std::string& label : LabelNames(series)) {
        EXPECT_TRUE(kBoundedLabels.count(label)) << series;
      }
    }
  }
}

TEST_F(RoleMetrics, RequestSeriesAreBoundedByOpsServersAndTablesNotKeys) {
  StartAll();
  for (uint32_t table = 0; table < 3; ++table) PushAndPull(table, 1, 100);
  const std::string name = "keel_worker_request_duration_seconds_count";
  const auto before = SeriesOf(worker_metrics_.TextExposition(), name);
  // 2 ops x 2 servers x 3 tables (100 mixed keys reach both servers).
  EXPECT_EQ(before.size(), 12u);
  EXPECT_EQ(SumOfValues(before), 12);
  for (uint32_t table = 0; table < 3; ++table) PushAndPull(table, 1000, 10000);
  const auto after = SeriesOf(worker_metrics_.TextExposition(), name);
  EXPECT_EQ(after.size(), 12u);
  EXPECT_EQ(SumOfValues(after), 24);
  EXPECT_EQ(after.count(name + "{op=\"push\",server=\"1\",table=\"2\"}"), 1u);
}

TEST_F(RoleMetrics, ServersCountTheRowsAndRequestsOfEachTable) {
  StartAll();
  PushAndPull(4, 1, 1000);
  // The sizes are taken just after each push is answered.
  double rows = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        rows = 0;
        for (const auto& registry : server_metrics_) {
          rows += SumOfValues(SeriesOf(registry->TextExposition(), "keel_server_table_rows"));
        }
        return rows == 1000;
      },
      10))
      << rows;
  double pushes = 0;
  for (const auto& registry : server_metrics_) {
    pushes += SumOfValues(
        SeriesOf(registry->TextExposition(),
                 "keel_server_request_duration_seconds_count{op=\"push\",table=\"4\"}"));
  }
  EXPECT_GE(pushes, 2);  // each server had a part of the first push
}

TEST_F(RoleMetrics, TheSchedulerCountsMembersByRoleAndEachOnesHeartbeatAge) {
  StartAll();
  const auto samples = ParseExposition(scheduler_metrics_.TextExposition());
  EXPECT_EQ(samples.at("keel_scheduler_members{role=\"server\"}"), 2);
  EXPECT_EQ(samples.at("keel_scheduler_members{role=\"worker\"}"), 1);
  EXPECT_EQ(samples.at("keel_scheduler_view_epoch"), 1);
  const auto ages =
      SeriesOf(scheduler_metrics_.TextExposition(), "keel_scheduler_heartbeat_age_seconds");
  EXPECT_EQ(ages.size(), 3u);
  EXPECT_EQ(ages.count("keel_scheduler_heartbeat_age_seconds{rank=\"1\",role=\"server\"}"), 1u);
  const auto oldest = SeriesOf(scheduler_metrics_.TextExposition(),
                               "keel_scheduler_heartbeat_age_max_seconds");
  EXPECT_EQ(oldest.count("keel_scheduler_heartbeat_age_max_seconds{role=\"server\"}"), 1u);
  EXPECT_EQ(oldest.count("keel_scheduler_heartbeat_age_max_seconds{role=\"worker\"}"), 1u);
  EXPECT_EQ(samples.count("keel_scheduler_checkpoint_age_seconds"), 0u);  // none committed
}

TEST_F(RoleMetrics, AWorkerShowsTheLastEpochsTrainingHealthByTable) {
  StartAll();
  const std::string name = "keel_worker_health_weight_norm";
  EXPECT_TRUE(SeriesOf(worker_metrics_.TextExposition(), name).empty());  // no epoch yet
  HealthReport report;
  report["weights"] = TableHealth{2.5, 0.75, 0.0, 1000};
  report["bias"] = TableHealth{0.5, 0.25, 0.0, 1};
  counters_.health.Set(1, report);
  const auto samples = ParseExposition(worker_metrics_.TextExposition());
  EXPECT_EQ(samples.at(name + "{table=\"weights\"}"), 2.5);
  EXPECT_EQ(samples.at(name + "{table=\"bias\"}"), 0.5);
  EXPECT_EQ(samples.at("keel_worker_health_gradient_norm{table=\"weights\"}"), 0.75);
  EXPECT_EQ(samples.at("keel_worker_health_nonfinite_ratio{table=\"weights\"}"), 0.0);
  EXPECT_EQ(samples.at("keel_worker_health_rows_created{table=\"weights\"}"), 1000);
}

TEST_F(RoleMetrics, ProbesAreReadyOnlyOnceTheViewIsFormed) {
  const Probe scheduler_ready = SchedulerReady(scheduler_.get());
  const Probe server_ready = ServerReady(server_nodes_[0].get(), servers_[0].get());
  const Probe worker_ready = WorkerReady(worker_node_.get());
  EXPECT_EQ(scheduler_ready(),
            "no cluster view yet: 0 of 2 server(s) and 0 of 1 worker(s) registered");
  EXPECT_EQ(server_ready(), "registering with the scheduler");
  EXPECT_EQ(worker_ready(), "registering with the scheduler");
  EXPECT_EQ(SchedulerLive(scheduler_.get())(), "");
  StartAll();
  EXPECT_EQ(scheduler_ready(), "");
  EXPECT_TRUE(WaitFor([&] { return server_ready().empty(); }, 10)) << server_ready();
  EXPECT_EQ(worker_ready(), "");
  EXPECT_EQ(NodeLive(worker_node_.get(), 1)(), "");
}

TEST_F(RoleMetrics, ANodeWhoseHeartbeatLoopStoppedIsNotLive) {
  StartAll();
  // The heartbeat comes every second (LocalNode); stalled after 5 s here.
  const Probe live = NodeLive(worker_node_.get(), 1, /*min_stall_s=*/0);
  EXPECT_EQ(live(), "");
  worker_node_->Stop();
  EXPECT_TRUE(WaitFor([&] { return !live().empty(); }, 15));
  EXPECT_TRUE(Contains(live(), "the heartbeat loop has not run for ")) << live();
}

}  // namespace
}  // namespace keel
