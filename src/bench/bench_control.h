// `keel bench control`: the scheduler (the real one, src/scheduler) driven by
// N simulated members that speak its protocol: a registration storm, steady
// heartbeats at Node's interval, and one member killed (see bench_control.cc).
#ifndef KEEL_BENCH_BENCH_CONTROL_H_
#define KEEL_BENCH_BENCH_CONTROL_H_

#include <cstdint>
#include <string>

#include "bench/bench_options.h"

namespace keel {

// What one run measured. Times in seconds, from the monotonic clock.
struct ControlReport {
  int nodes = 0, servers = 0, workers = 0, key_ranges = 0;
  std::string transport;    // "tcp" or "memory"
  int member_processes = 0;  // over tcp: processes of the members' own (0: in the scheduler's)
  bool view_deltas = true;  // SchedulerOptions::view_deltas
  // The storm: every member sends REGISTER at once.
  double storm_to_view_sent_s = -1;          // until the scheduler had sent view 1 to all
  double storm_to_first_member_view_s = -1;  // until the first member held a view
  double storm_to_all_views_s = -1;          // until every member held one
  int members_with_view = 0;
  uint64_t registration_refusals = 0;  // "try again" answers (back-pressure)
  uint64_t first_view_bytes = 0;       // every member's copy of the first view
  // One member's parse of its first view: the mean and the longest (on a
  // cluster each member parses its own, beside the others).
  double first_view_parse_mean_s = -1, first_view_parse_max_s = -1;
  // Steady state: heartbeats at heartbeat_interval_s.
  double steady_seconds = 0;
  double scheduler_cpu_share = -1;      // of one core, its threads only
  double scheduler_zmq_cpu_share = -1;  // of that, its ZeroMQ context's threads
  double process_cpu_share = -1;        // this process: scheduler and members in it
  uint64_t heartbeats_sent = 0;         // to the scheduler, in the window
  uint64_t heartbeats_acked = 0;        // answered (those that asked), in the window
  // ClusterView.heartbeat_relay: workers' heartbeats sent to servers, and
  // those the servers passed on that the scheduler took, in the window.
  bool heartbeat_relay = false;
  uint64_t heartbeats_relayed = 0, heartbeats_passed_on = 0;
  // Scheduler::status(), which the status page and every metrics scrape
  // take (under the scheduler's lock): the median of 5, and its members.
  double status_s = -1;
  int status_members = 0;
  // What the status page serves (/status.json: status, progress, JSON) and
  // one metrics scrape: medians of 5, and their bytes; the page as served
  // (500 rows of each table) and with every row.
  double status_json_s = -1, status_json_all_s = -1, scrape_s = -1;
  uint64_t status_json_bytes = 0, status_json_all_bytes = 0, scrape_bytes = 0;
  // A worker killed (its connection closes).
  double kill_to_view_sent_s = -1;          // until the scheduler had sent the new view to all
  double kill_to_first_member_view_s = -1;  // ~ detection: the first member on the new view
  double kill_to_all_views_s = -1;          // every living member on the new view
  double detection_to_all_views_s = -1;     // the difference: the new view's spread
  int living_members = 0, members_on_new_view = 0;
  bool killed_left_view = false;    // the scheduler's view no longer names it
  uint64_t failure_view_bytes = 0;  // the new view's bytes to every member
  uint64_t departures = 0;          // the scheduler's count (1: the one killed)
  // Memory and descriptors.
  double rss_growth_mb = 0;  // over the run: this process's (scheduler, members in it)
  double peak_rss_mb = 0;    // this process's
  double descriptors_per_member =
      0;  // this process's, over the storm (both ends or the scheduler's)
};

// Runs the benchmark once. Throws Error on bad options.
ControlReport RunControlBench(const BenchControlOptions& options);

// Runs it and prints the report (a table and a JSON line); returns 0, or 1 if
// some member never got the first view or the failure's view.
int BenchControl(const BenchControlOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_CONTROL_H_
