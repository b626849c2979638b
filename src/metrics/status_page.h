// The scheduler's status page: `/` on its metrics port (--metrics_port) is
// one HTML page with its script (status_page_html.cc, shipped in the binary;
// it loads nothing from the network) that shows the job as the scheduler
// sees it: the view (nodes, roles, ranks, addresses, heartbeats, key ranges
// and their replica chains), the job's and each worker's progress and
// throughput, validation metrics per epoch, the last checkpoint and the
// latest membership events. The page carries the state it was served with,
// so it shows the job at once (and without script), then refreshes itself
// from `/status.json` every 2 s; once the scheduler stops answering it keeps
// the last state and says since when.
//
// The page writes every value the cluster sent (addresses, errors, event
// fields) as text, never as markup.
#ifndef KEEL_METRICS_STATUS_PAGE_H_
#define KEEL_METRICS_STATUS_PAGE_H_

#include <map>
#include <string>

#include "io/http_server.h"
#include "scheduler/job_progress.h"
#include "scheduler/scheduler.h"

namespace keel {

// Decided epochs /status.json carries at most (the latest).
constexpr size_t kStatusEpochs = 500;
// Rows of each table (nodes, key ranges, workers' progress) /status.json
// carries unless asked for others, and at most: a page, so that a job of
// 10^4 nodes does not cost megabytes every refresh.
constexpr size_t kStatusPageRows = 500;
constexpr size_t kStatusMaxRows = 5000;

// Which rows of each table a status carries: from row `*_from` (0-based),
// at most `*_max`. Nodes are ordered by role (servers first) and rank,
// key ranges and workers by number.
struct StatusPaging {
  size_t nodes_from = 0, nodes_max = kStatusPageRows;
  size_t ranges_from = 0, ranges_max = kStatusPageRows;
  size_t workers_from = 0, workers_max = kStatusPageRows;
};

// The paging a request's query asks for (nodes_from, nodes_max, ranges_from,
// ...; the others as StatusPaging's defaults). Throws Error naming a
// parameter that is not a whole number, a `*_max` above kStatusMaxRows, or
// a name it does not know.
StatusPaging StatusPagingOf(const std::multimap<std::string, std::string>& query);

// The scheduler's status and the job's progress as one JSON object (what
// /status.json serves; its fields are listed in docs/ARCHITECTURE.md,
// "Status page"): the rows `paging` asks for of each table, with each
// table's total and the members counted by role (all of them). `now_unix`
// is the Unix time it is taken at. Numbers that are not finite are null;
// key-range starts are hex strings (a JSON number cannot hold 64 bits).
std::string StatusJson(const SchedulerStatus& status, const ProgressSnapshot& progress,
                       double now_unix, const StatusPaging& paging = StatusPaging());

// The page's HTML and script (status_page_html.cc), with the marker
// {{STATUS_JSON}} where its initial state goes.
extern const char kStatusPageTemplate[];

// The page, with `status_json` (StatusJson's) as its initial state.
std::string StatusPage(const std::string& status_json);

// Routes GET / and GET /status.json on `http` (before it starts) for
// `scheduler`, which must outlive the serving (stop `http` first).
void RouteStatusPage(const Scheduler* scheduler, HttpServer* http);

}  // namespace keel

#endif  // KEEL_METRICS_STATUS_PAGE_H_
