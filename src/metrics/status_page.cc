// The status page's JSON and routes; the page itself is status_page_html.cc.
#include "metrics/status_page.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "io/timeline_writer.h"

namespace keel {
namespace {

std::string Ranks(const std::vector<int>& ranks) {
  std::vector<std::string> items;
  for (int rank : ranks) items.push_back(std::to_string(rank));
  return JsonArray(items);
}

std::string Metrics(const MetricSet& metrics) {
  JsonObject object;
  for (const auto& [name, value] : metrics) object.Number(name.c_str(), value);
  return object.Close();
}

std::string Hex(uint64_t value) {
  char text[24];
  snprintf(text, sizeof(text), "0x%016" PRIx64, value);
  return JsonQuote(text);
}

// The rows [from, from + max) of `total`, as [begin, end).
std::pair<size_t, size_t> PageOf(size_t total, size_t from, size_t max) {
  const size_t begin = std::min(from, total);
  return {begin, begin + std::min(max, total - begin)};
}

// The members counted by role, the silent ones and the longest silence.
std::string MembersJson(const std::vector<SchedulerStatus::Node>& members) {
  size_t servers = 0, workers = 0, silent = 0;
  double oldest = 0;
  for (const SchedulerStatus::Node& node : members) {
    ++(node.role == proto::SERVER ? servers : workers);
    silent += node.silent ? 1 : 0;
    oldest = std::max(oldest, node.heartbeat_age_s);
  }
  return JsonObject()
      .Count("servers", servers)
      .Count("workers", workers)
      .Count("silent", silent)
      .Number("oldest_heartbeat_age_s", oldest)
      .Close();
}

std::string ViewJson(const SchedulerStatus& status, const StatusPaging& paging) {
  std::vector<const SchedulerStatus::Node*> ordered;
  for (const SchedulerStatus::Node& node : status.members) ordered.push_back(&node);
  std::sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
    return std::make_pair(a->role != proto::SERVER, a->rank) <
           std::make_pair(b->role != proto::SERVER, b->rank);
  });
  const auto [nodes_begin, nodes_end] = PageOf(ordered.size(), paging.nodes_from, paging.nodes_max);
  const auto [ranges_begin, ranges_end] =
      PageOf(status.ranges.size(), paging.ranges_from, paging.ranges_max);
  std::vector<std::string> nodes, ranges;
  for (size_t n = nodes_begin; n < nodes_end; ++n) {
    const SchedulerStatus::Node& node = *ordered[n];
    nodes.push_back(JsonObject()
                        .Count("id", node.id)
                        .String("role", node.role == proto::SERVER ? "server" : "worker")
                        .Add("rank", std::to_string(node.rank))
                        .String("address", node.address)
                        .Number("heartbeat_age_s", node.heartbeat_age_s)
                        .Bool("silent", node.silent)
                        .Bool("done", node.done)
                        .String("error", node.error)
                        .Close());
  }
  for (size_t r = ranges_begin; r < ranges_end; ++r) {
    const SchedulerStatus::Range& range = status.ranges[r];
    // Declared lost: when, and where its rows came back from.
    std::string lost = "null";
    for (const LostRange& gone : status.lost_ranges) {
      if (gone.range != r) continue;
      lost = JsonObject(JsonObject::Style::kCompact)
                 .Add("since", gone.since > 0 ? JsonUnixTime(gone.since) : "null")
                 .Add("last_server", gone.rank >= 0 ? std::to_string(gone.rank) : "null")
                 .String("rebuilt_from", gone.rebuilt_from)
                 .Add("pushes_lost_at_least",
                      gone.pushes_lost >= 0 ? std::to_string(gone.pushes_lost) : "null")
                 .Close();
    }
    ranges.push_back(JsonObject()
                         .Add("begin", Hex(range.begin))
                         .Add("primary", std::to_string(range.primary))
                         .Add("backups", Ranks(range.backups))
                         .Add("copying", Ranks(range.copying))
                         .Add("lost", lost)
                         .Close());
  }
  return JsonObject()
      .Count("epoch", status.epoch)
      .Add("expected_servers", std::to_string(status.expected_servers))
      .Add("expected_workers", std::to_string(status.expected_workers))
      .Add("replication", std::to_string(status.replication))
      .Add("members", MembersJson(status.members))
      .Count("nodes_total", ordered.size())
      .Count("nodes_from", nodes_begin)
      .Add("nodes", JsonArray(nodes))
      .Count("ranges_total", status.ranges.size())
      .Count("ranges_from", ranges_begin)
      .Add("ranges", JsonArray(ranges))
      .Close();
}

std::string CheckpointsJson(const SchedulerStatus& status, double now) {
  const CheckpointStats& stats = status.checkpoints;
  return JsonObject()
      .String("uri", status.checkpoint_uri)
      .String("last", status.last_checkpoint)
      .Count("committed", stats.committed)
      .Count("abandoned", stats.abandoned)
      .Number("last_seconds", stats.last_seconds)
      .Count("last_bytes", stats.last_bytes)
      .Add("last_age_s",
             stats.last_committed_at > 0 ? JsonNumberOrNull(now - stats.last_committed_at) : "null")
      .Close();
}

std::string WorkerJson(const WorkerProgress& worker, double now_unix) {
  return JsonObject()
      .Add("rank", std::to_string(worker.rank))
      .Count("node", worker.node_id)
      .Add("epoch", std::to_string(worker.epoch))
      .Count("examples", worker.examples)
      .Bool("epoch_done", worker.epoch_done)
      .Bool("reading", worker.reading)
      .Number("examples_per_second", worker.examples_per_second)
      .Number("loss", worker.loss)
      .Count("share_examples", worker.share_examples)
      .Add("validation", Metrics(worker.validation))
      .Add("age_s", worker.last_update_wall > 0
                          ? JsonNumberOrNull(now_unix - worker.last_update_wall)
                          : "null")
      .Close();
}

std::string ProgressJson(const ProgressSnapshot& progress, double now_unix,
                         const StatusPaging& paging) {
  std::vector<std::string> workers, decided;
  const auto [workers_begin, workers_end] =
      PageOf(progress.workers.size(), paging.workers_from, paging.workers_max);
  for (size_t w = workers_begin; w < workers_end; ++w) {
    workers.push_back(WorkerJson(progress.workers[w], now_unix));
  }
  const size_t first =
      progress.decided.size() > kStatusEpochs ? progress.decided.size() - kStatusEpochs : 0;
  for (size_t i = first; i < progress.decided.size(); ++i) {
    const DecidedEpoch& epoch = progress.decided[i];
    decided.push_back(JsonObject()
                          .Add("epoch", std::to_string(epoch.epoch))
                          .Count("examples", epoch.examples)
                          .Number("seconds", epoch.seconds)
                          .Bool("stop", epoch.stop)
                          .Add("metrics", Metrics(epoch.metrics))
                          .Close());
  }
  std::string end = "null";
  if (progress.end) {
    end = JsonObject()
              .Add("epochs_run", std::to_string(progress.end->epochs_run))
              .Bool("stopped_early", progress.end->stopped_early)
              .String("model_dir", progress.end->model_dir)
              .Add("metrics", Metrics(progress.end->metrics))
              .Close();
  }
  std::string headline;
  double value = 0;
  if (!progress.decided.empty()) HeadlineMetric(progress.decided.back().metrics, &headline, &value);
  return JsonObject()
      .Add("epochs", std::to_string(progress.epochs))
      .Add("epoch", std::to_string(progress.epoch))
      .Count("epoch_done", progress.epoch_done)
      .Count("epoch_expected", progress.epoch_expected)
      .Number("epoch_fraction", progress.figures.epoch_fraction)
      .Number("eta_seconds", progress.figures.eta_seconds)
      .Number("examples_per_second", progress.examples_per_second)
      .Count("examples_read", progress.examples_read)
      .Number("training_loss", progress.training_loss)
      .Number("seconds", progress.seconds)
      .Count("workers_total", progress.workers.size())
      .Count("workers_from", workers_begin)
      .Add("workers", JsonArray(workers))
      .String("headline_metric", headline)
      .Add("decided", JsonArray(decided))
      .Add("end", end)
      .Close();
}

}  // namespace

StatusPaging StatusPagingOf(const std::multimap<std::string, std::string>& query) {
  StatusPaging paging;
  const std::map<std::string, size_t*> fields = {
      {"nodes_from", &paging.nodes_from},     {"nodes_max", &paging.nodes_max},
      {"ranges_from", &paging.ranges_from},   {"ranges_max", &paging.ranges_max},
      {"workers_from", &paging.workers_from}, {"workers_max", &paging.workers_max}};
  for (const auto& [name, value] : query) {
    const auto field = fields.find(name);
    if (field == fields.end()) throw MakeError("unknown parameter '", name, "'");
    const bool whole = !value.empty() && value.size() <= 9 &&
                       value.find_first_not_of("0123456789") == std::string::npos;
    if (!whole) throw MakeError(name, " '", value, "' is not a whole number");
    *field->second = std::stoul(value);
    if (name.size() > 4 && name.compare(name.size() - 4, 4, "_max") == 0 &&
        *field->second > kStatusMaxRows) {
      throw MakeError(name, " ", value, " is above ", kStatusMaxRows);
    }
  }
  return paging;
}

std::string StatusJson(const SchedulerStatus& status, const ProgressSnapshot& progress,
                       double now_unix, const StatusPaging& paging) {
  return JsonObject()
      .Add("time", JsonUnixTime(now_unix))
      .Add("view", ViewJson(status, paging))
      .Add("workers_done", std::to_string(status.workers_done))
      .Count("departures", status.departures)
      .Count("lost_ranges", status.lost_ranges.size())
      .Count("rejected_messages", status.rejected_messages)
      .Add("checkpoints", CheckpointsJson(status, MonotonicSeconds()))
      .Add("progress", ProgressJson(progress, now_unix, paging))
      .Add("events", JsonArray(status.events))
      .Close();
}

std::string StatusPage(const std::string& status_json) {
  // Inside <script> the JSON must not close the element: "</" becomes "<\/"
  // (the same string to a JSON parser).
  std::string embedded;
  embedded.reserve(status_json.size());
  for (size_t i = 0; i < status_json.size(); ++i) {
    embedded += status_json[i];
    if (status_json[i] == '<' && i + 1 < status_json.size() && status_json[i + 1] == '/') {
      embedded += '\\';
    }
  }
  std::string page = kStatusPageTemplate;
  const std::string marker = "{{STATUS_JSON}}";
  page.replace(page.find(marker), marker.size(), embedded);
  return page;
}

void RouteStatusPage(const Scheduler* scheduler, HttpServer* http) {
  // A query the paging does not take is answered 400, naming what is wrong.
  const auto serve = [scheduler](const HttpRequest& request, bool page) {
    HttpResponse response;
    response.headers.emplace("Cache-Control", "no-store");
    StatusPaging paging;
    try {
      paging = StatusPagingOf(request.query);
    } catch (const Error& e) {
      HttpResponse refused = TextResponse(400, e.what());
      refused.headers = response.headers;
      return refused;
    }
    const std::string json =
        StatusJson(scheduler->status(), scheduler->progress().Snapshot(MonotonicSeconds()),
                   WallSeconds(), paging);
    response.body = page ? StatusPage(json) : json;
    response.content_type = page ? "text/html; charset=utf-8" : "application/json";
    return response;
  };
  http->Route("GET", "/", [serve](const HttpRequest& request) { return serve(request, true); });
  http->Route("GET", "/status.json",
              [serve](const HttpRequest& request) { return serve(request, false); });
}

}  // namespace keel
