// Every role's metric definitions: names, help, labels and where each value
// comes from. Values Keel already counts are read at scrape time; request
// latencies and bytes are observed through the roles' RequestObserver.
#include "metrics/role_metrics.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/time.h"

namespace keel {
namespace {

using Samples = std::vector<MetricSample>;

double Number(uint64_t value) { return static_cast<double>(value); }

const char* RoleLabel(proto::Role role) {
  switch (role) {
    case proto::SERVER:
      return "server";
    case proto::WORKER:
      return "worker";
    default:
      return "scheduler";
  }
}

// Request latencies and bytes by operation, server rank and table, observed
// on one receive thread (so the cache of label sets needs no lock; the
// histograms and counters themselves are safe to scrape meanwhile).
class RequestMetrics {
 public:
  RequestMetrics(MetricsRegistry* registry, const std::string& prefix, const std::string& seconds,
                 const std::string& bytes, bool by_server)
      : seconds_(registry->AddHistogram(prefix + "request_duration_seconds", seconds)),
        bytes_(registry->AddObservedCounter(prefix + "request_bytes_total", bytes)),
        by_server_(by_server) {}

  void Observe(const RequestRecord& record) {
    const auto key = std::make_tuple(record.command, record.server_rank, record.table);
    auto found = series_.find(key);
    if (found == series_.end()) found = series_.emplace(key, MakeSeries(record)).first;
    found->second.seconds->Observe(record.seconds);
    found->second.bytes->Increment(static_cast<double>(record.bytes));
  }

 private:
  struct Series {
    prometheus::Histogram* seconds;
    prometheus::Counter* bytes;
  };

  Series MakeSeries(const RequestRecord& record) {
    prometheus::Labels labels = {{"op", OperationLabel(record.command)},
                                 {"table", std::to_string(record.table)}};
    if (by_server_) labels["server"] = std::to_string(record.server_rank);
    return {&seconds_.Add(labels, LatencyBucketsSeconds()), &bytes_.Add(labels)};
  }

  prometheus::Family<prometheus::Histogram>& seconds_;
  prometheus::Family<prometheus::Counter>& bytes_;
  const bool by_server_;
  std::map<std::tuple<proto::Command, int, uint32_t>, Series> series_;
};

// GateStats's staleness buckets as a Prometheus histogram (bounds 0, 1, 2,
// 4, 8, 16, 64 clocks).
HistogramSample StalenessHistogram(const GateStats& stats) {
  HistogramSample sample;
  sample.bounds = {0, 1, 2, 4, 8, 16, 64};
  uint64_t cumulative = 0;
  for (int b = 0; b < GateStats::kBuckets - 1; ++b) {
    cumulative += stats.histogram[b];
    sample.cumulative.push_back(cumulative);
  }
  sample.count = stats.pulls;
  sample.sum = static_cast<double>(stats.staleness_sum);
  return sample;
}

}  // namespace

const char* OperationLabel(proto::Command command) {
  return command == proto::PUSH ? "push" : command == proto::PULL ? "pull" : "other";
}

void AddNodeMetrics(const Node* node, MetricsRegistry* registry) {
  registry->AddGauge("keel_node_view_epoch", "Epoch of the cluster view this node has.",
                     MetricsRegistry::One([node] { return Number(node->epoch()); }));
  registry->AddGauge("keel_node_scheduler_contact_age_seconds",
                     "Seconds since the scheduler last wrote to this node (for a worker whose "
                     "heartbeats a server relays: or to that server, as its answers say).",
                     MetricsRegistry::One([node] { return node->SecondsSinceScheduler(); }));
  registry->AddCounter("keel_node_dropped_messages_total",
                       "Messages this node dropped, by reason: malformed (undecodable), "
                       "control (not from the scheduler), data (a newer view's beyond the held "
                       "queue's bounds, or not on the sender's connection), misrouted (of "
                       "data: not on the sender's connection).",
                       [node] {
                         return Samples{
                             {{{"reason", "malformed"}}, Number(node->malformed_messages())},
                             {{{"reason", "control"}}, Number(node->rejected_control_messages())},
                             {{{"reason", "data"}}, Number(node->rejected_data_messages())},
                             {{{"reason", "misrouted"}}, Number(node->misrouted_data_messages())}};
                       });
  registry->AddGauge("keel_node_held_messages",
                     "Data messages of a newer view held until this node has that view.",
                     MetricsRegistry::One([node] { return Number(node->held_messages()); }));
}

void AddServerMetrics(KVServer* server, MetricsRegistry* registry) {
  auto requests = std::make_shared<RequestMetrics>(
      registry, "keel_server_",
      "Seconds from a push's or pull's arrival to its answer (a pull's wait at the staleness "
      "gate included), by op and table.",
      "Key and value bytes of pushes received and pulls answered, by op and table.",
      /*by_server=*/false);
  server->SetRequestObserver([requests](const RequestRecord& r) { requests->Observe(r); });
  registry->AddCounter(
      "keel_server_served_requests_total", "Requests this server served.",
      MetricsRegistry::One([server] { return Number(server->served_requests()); }));
  registry->AddCounter(
      "keel_server_rejected_requests_total",
      "Requests refused (malformed, from a non-member, out of bounds, non-finite, out of "
      "memory); of them, non_finite and out_of_window by their reason, other the rest.",
      [server] {
        const uint64_t non_finite = server->non_finite_pushes();
        const uint64_t window = server->out_of_window_sequences();
        const uint64_t all = server->rejected_requests();
        const uint64_t other = all >= non_finite + window ? all - non_finite - window : 0;
        return Samples{{{{"reason", "non_finite"}}, Number(non_finite)},
                       {{{"reason", "out_of_window"}}, Number(window)},
                       {{{"reason", "other"}}, Number(other)}};
      });
  registry->AddCounter(
      "keel_server_duplicate_requests_total",
      "Pushes and clock messages received again after being applied (acknowledged, not "
      "applied twice).",
      MetricsRegistry::One([server] { return Number(server->duplicate_pushes()); }));
  registry->AddCounter(
      "keel_server_admitted_keys_total",
      "Keys given a row after --admit_after pushes (decided here as their range's primary).",
      MetricsRegistry::One([server] { return Number(server->admitted_keys()); }));
  registry->AddCounter(
      "keel_server_unadmitted_key_pushes_total",
      "Key gradients dropped because the key had not yet been pushed --admit_after times.",
      MetricsRegistry::One([server] { return Number(server->unadmitted_key_pushes()); }));
  registry->AddCounter(
      "keel_server_evicted_rows_total",
      "Rows removed because they were not pushed in the last --evict_after clocks.",
      MetricsRegistry::One([server] { return Number(server->evicted_rows()); }));
  registry->AddCounter(
      "keel_server_key_list_requests_total",
      "Key caching: lists kept for the workers, requests served from a kept list, and requests "
      "naming a list not held here (answered unknown; the worker sent the keys again).",
      [server] {
        return Samples{{{{"result", "kept"}}, Number(server->key_lists_kept())},
                       {{{"result", "named"}}, Number(server->key_list_hits())},
                       {{{"result", "unknown"}}, Number(server->unknown_key_lists())}};
      });
  registry->AddCounter(
      "keel_server_key_list_slot_requests_total",
      "Key caching: pushes and pulls served through the slots kept with their list (no key "
      "probed).",
      MetricsRegistry::One([server] { return Number(server->key_list_slot_hits()); }));
  registry->AddCounter("keel_server_gate_held_pulls_total",
                       "Pulls the staleness gate held until the slowest worker caught up.",
                       MetricsRegistry::One([server] { return Number(server->parked_pulls()); }));
  registry->AddGauge(
      "keel_server_table_rows", "Rows of each table on this server's replicas.", [server] {
        Samples samples;
        for (const auto& size : server->table_sizes()) {
          samples.push_back({{{"table", std::to_string(size.table)}}, Number(size.rows)});
        }
        return samples;
      });
  registry->AddGauge(
      "keel_server_table_memory_bytes",
      "Bytes of each table's slots and rows on this server's replicas.", [server] {
        Samples samples;
        for (const auto& size : server->table_sizes()) {
          samples.push_back({{{"table", std::to_string(size.table)}}, Number(size.bytes)});
        }
        return samples;
      });
  registry->AddGauge(
      "keel_server_replica_ranges_waiting",
      "Key ranges whose replica here still waits for its rows from its chain (replication lag).",
      MetricsRegistry::One([server] { return Number(server->ranges_waiting()); }));
  registry->AddGauge("keel_server_replica_held_pushes",
                     "Pushes passed down a chain and held until this replica has its range's rows.",
                     MetricsRegistry::One([server] { return Number(server->held_pushes()); }));
  registry->AddGauge(
      "keel_server_remembered_senders",
      "Senders whose applied sequences this server remembers (dedupe windows).",
      MetricsRegistry::One([server] { return Number(server->remembered_senders()); }));
}

namespace {

// The last epoch's training health, by table (worker 0 alone reports it).
void AddHealthMetrics(const LatestHealth* health, MetricsRegistry* registry) {
  using Figure = double (*)(const TableHealth&);
  const std::tuple<const char*, const char*, Figure> figures[] = {
      {"keel_worker_health_weight_norm", "L2 norm of the table's weights after the last epoch.",
       [](const TableHealth& t) { return t.weight_norm; }},
      {"keel_worker_health_gradient_norm",
       "Mean L2 norm of the table's pushed gradients in the last epoch.",
       [](const TableHealth& t) { return t.gradient_norm; }},
      {"keel_worker_health_nonfinite_ratio",
       "Share of non-finite values among the table's gradients in the last epoch.",
       [](const TableHealth& t) { return t.nonfinite_share; }},
      {"keel_worker_health_rows_created",
       "Rows the servers created in the table in the last epoch.",
       [](const TableHealth& t) { return static_cast<double>(t.rows_created); }}};
  for (const auto& [name, help, figure] : figures) {
    registry->AddGauge(name, std::string(help) + " Worker 0 only; none before an epoch ends.",
                       [health, figure = figure] {
                         Samples samples;
                         for (const auto& [table, figures] : health->Get().report) {
                           samples.push_back({{{"table", table}}, figure(figures)});
                         }
                         return samples;
                       });
  }
}

}  // namespace

void AddWorkerMetrics(KVWorker* client, const TrainingCounters* counters,
                      MetricsRegistry* registry) {
  auto requests = std::make_shared<RequestMetrics>(
      registry, "keel_worker_",
      "Seconds from a push's or pull's first send to a server's answer (resends included), by "
      "op, server rank and table.",
      "Key and value bytes of pushes sent and pulls received, by op, server rank and table.",
      /*by_server=*/true);
  client->SetRequestObserver([requests](const RequestRecord& r) { requests->Observe(r); });
  registry->AddCounter("keel_worker_resends_total",
                       "Request parts sent again for want of an answer.",
                       MetricsRegistry::One([client] { return Number(client->resends()); }));
  registry->AddCounter(
      "keel_worker_duplicate_responses_total",
      "Responses ignored because their request was already answered (or cancelled).",
      MetricsRegistry::One([client] { return Number(client->late_responses()); }));
  registry->AddCounter(
      "keel_worker_needless_resends_total",
      "Request parts sent again whose first copy was answered after all (the round trip was "
      "slow, not lost).",
      MetricsRegistry::One([client] { return Number(client->needless_resends()); }));
  registry->AddCounter(
      "keel_worker_wide_fp16_parts_total",
      "Push parts and pull answers asked for as fp16 that travelled as fp32, holding a value "
      "past fp16's range.",
      MetricsRegistry::One([client] { return Number(client->wide_fp16_parts()); }));
  registry->AddGauge("keel_worker_pending_requests", "Requests sent and not yet waited for.",
                     MetricsRegistry::One([client] { return Number(client->pending()); }));
  registry->AddCounter(
      "keel_worker_gate_waits_total", "Pulls the servers' staleness gate held back.",
      MetricsRegistry::One([client] { return Number(client->gate_stats().waited); }));
  registry->AddCounter("keel_worker_gate_wait_seconds_total",
                       "Seconds this worker's pulls spent held at the staleness gate.",
                       MetricsRegistry::One([client] {
                         return static_cast<double>(client->gate_stats().waited_us) * 1e-6;
                       }));
  registry->AddHistogramReader(
      "keel_worker_pull_staleness_clocks",
      "How many clocks a pull was ahead of the slowest worker when a server answered it.",
      [client] { return std::vector<HistogramSample>{StalenessHistogram(client->gate_stats())}; });
  if (!counters) return;
  registry->AddCounter("keel_worker_examples_total",
                       "Training examples this worker process trained on (rate(): examples/s).",
                       MetricsRegistry::One([counters] { return Number(counters->examples); }));
  registry->AddCounter("keel_worker_minibatches_total", "Minibatches this worker pushed.",
                       MetricsRegistry::One([counters] { return Number(counters->minibatches); }));
  registry->AddGauge(
      "keel_worker_epoch", "The epoch this worker is training (0: not started).",
      MetricsRegistry::One([counters] { return static_cast<double>(counters->epoch.load()); }));
  registry->AddGauge("keel_worker_train_loss",
                     "Mean training loss of this worker's examples of the current epoch so far.",
                     MetricsRegistry::One([counters] { return counters->epoch_loss.load(); }));
  AddHealthMetrics(&counters->health, registry);
}

namespace {

// The scheduler's status for the series of a scrape: taken once and shared
// for kReuseS, not once per series (a scrape reads it about a dozen times,
// and at 10^4 members each take holds the scheduler's lock for milliseconds).
// Thread-safe.
class ScrapeStatus {
 public:
  explicit ScrapeStatus(const Scheduler* scheduler) : scheduler_(scheduler) {}

  std::shared_ptr<const SchedulerStatus> Get() {
    std::lock_guard<std::mutex> lock(mutex_);
    const double now = MonotonicSeconds();
    if (!status_ || now - taken_at_ > kReuseS) {
      status_ = std::make_shared<const SchedulerStatus>(scheduler_->status());
      taken_at_ = now;
    }
    return status_;
  }

 private:
  static constexpr double kReuseS = 0.25;
  const Scheduler* scheduler_;
  std::mutex mutex_;
  std::shared_ptr<const SchedulerStatus> status_;
  double taken_at_ = 0;
};

}  // namespace

void AddSchedulerMetrics(const Scheduler* scheduler, MetricsRegistry* registry) {
  const auto taken = std::make_shared<ScrapeStatus>(scheduler);
  registry->AddGauge(
      "keel_scheduler_view_epoch", "Epoch of the cluster view (0: none published yet).",
      MetricsRegistry::One([taken] { return Number(taken->Get()->epoch); }));
  registry->AddGauge("keel_scheduler_members", "Members of the view, by role.", [taken] {
    std::map<std::string, int> counts = {{"server", 0}, {"worker", 0}};
    for (const auto& member : taken->Get()->members) ++counts[RoleLabel(member.role)];
    Samples samples;
    for (const auto& [role, count] : counts) samples.push_back({{{"role", role}}, double(count)});
    return samples;
  });
  registry->AddGauge("keel_scheduler_expected_members", "Members the job expects, by role.",
                     [taken] {
                       const auto status = taken->Get();
                       return Samples{{{{"role", "server"}}, double(status->expected_servers)},
                                      {{{"role", "worker"}}, double(status->expected_workers)}};
                     });
  registry->AddGauge(
      "keel_scheduler_heartbeat_age_seconds",
      "Seconds since each member was last heard from, by role and rank (while the view has "
      "at most 256 members; keel_scheduler_heartbeat_age_max_seconds beyond).",
      [taken] {
        Samples samples;
        const auto status = taken->Get();
        if (status->members.size() > kMemberSeries) return samples;
        for (const auto& member : status->members) {
          samples.push_back(
              {{{"role", RoleLabel(member.role)}, {"rank", std::to_string(member.rank)}},
               member.heartbeat_age_s});
        }
        return samples;
      });
  registry->AddGauge("keel_scheduler_heartbeat_age_max_seconds",
                     "The longest any member of the role was not heard from, in seconds.",
                     [taken] {
                       std::map<std::string, double> oldest = {{"server", 0}, {"worker", 0}};
                       for (const auto& member : taken->Get()->members) {
                         double& age = oldest[RoleLabel(member.role)];
                         age = std::max(age, member.heartbeat_age_s);
                       }
                       Samples samples;
                       for (const auto& [role, age] : oldest) {
                         samples.push_back({{{"role", role}}, age});
                       }
                       return samples;
                     });
  registry->AddGauge(
      "keel_scheduler_workers_done", "Workers that reported the end of their job.",
      MetricsRegistry::One([taken] { return double(taken->Get()->workers_done); }));
  registry->AddGauge(
      "keel_scheduler_key_ranges_lost",
      "Key ranges that lost every replica during the job (their updates since the latest "
      "checkpoint are gone).",
      MetricsRegistry::One([taken] { return double(taken->Get()->lost_ranges.size()); }));
  registry->AddCounter(
      "keel_scheduler_departures_total",
      "Nodes removed from the view (heartbeat silence, or a closed connection to a dead process).",
      MetricsRegistry::One([taken] { return Number(taken->Get()->departures); }));
  registry->AddCounter(
      "keel_scheduler_rejected_messages_total",
      "Messages ignored: a member's id claimed on another connection, or a range not copied.",
      MetricsRegistry::One([scheduler] { return Number(scheduler->rejected_messages()); }));
  registry->AddCounter("keel_scheduler_checkpoints_total", "Checkpoints ended, by result.",
                       [taken] {
                         const CheckpointStats stats = taken->Get()->checkpoints;
                         return Samples{{{{"result", "committed"}}, Number(stats.committed)},
                                        {{{"result", "abandoned"}}, Number(stats.abandoned)}};
                       });
  registry->AddGauge(
      "keel_scheduler_last_checkpoint_duration_seconds",
      "Seconds from the newest committed checkpoint's copy to its commit (absent before one).",
      [taken] {
        const CheckpointStats stats = taken->Get()->checkpoints;
        return stats.committed ? Samples{{{}, stats.last_seconds}} : Samples{};
      });
  registry->AddGauge("keel_scheduler_last_checkpoint_bytes",
                     "Bytes of the newest committed checkpoint's files (absent before one).",
                     [taken] {
                       const CheckpointStats stats = taken->Get()->checkpoints;
                       return stats.committed ? Samples{{{}, Number(stats.last_bytes)}} : Samples{};
                     });
  registry->AddGauge("keel_scheduler_checkpoint_age_seconds",
                     "Seconds since the newest checkpoint was committed (absent before one).",
                     [taken] {
                       const CheckpointStats stats = taken->Get()->checkpoints;
                       if (!stats.committed) return Samples{};
                       return Samples{{{}, MonotonicSeconds() - stats.last_committed_at}};
                     });
}

}  // namespace keel
