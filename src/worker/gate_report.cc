#include "worker/gate_report.h"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

#include "worker/barriers.h"

namespace keel {
namespace {

// The figures' keys in the control table, as offsets from kGateFeature.
constexpr uint64_t kHeldMicros = 0;      // servers' time holding pulls at the gate
constexpr uint64_t kHeldPulls = 1;       // pulls the gate held
constexpr uint64_t kPulls = 2;           // every pull
constexpr uint64_t kTrainingMicros = 3;  // workers' training time
constexpr uint64_t kPullWaitMicros = 4;  // workers' time blocked on their next pull
constexpr uint64_t kHistogram = 10;      // + bucket: pulls per observed staleness
constexpr uint64_t kMaxStaleness = 100;  // + rank: a maximum does not sum, one key per worker

uint64_t GateKey(uint64_t figure) { return ControlTable::kGateFeature + figure; }

// The job-wide sums, as worker 0 reads them back.
struct GateTotals {
  double held = 0;    // seconds
  double worked = 0;  // seconds
  double waited = 0;  // seconds
  uint64_t held_pulls = 0;
  uint64_t pulls = 0;
  uint64_t histogram[GateStats::kBuckets] = {};
  uint64_t max_staleness = 0;
};

void AddFigures(const GateStats& stats, int rank, double training_seconds, double pull_wait_seconds,
                ControlTable* control) {
  control->Add(GateKey(kHeldMicros), static_cast<uint64_t>(stats.waited_us));
  control->Add(GateKey(kHeldPulls), stats.waited);
  control->Add(GateKey(kPulls), stats.pulls);
  control->Add(GateKey(kTrainingMicros), static_cast<uint64_t>(training_seconds * 1e6));
  control->Add(GateKey(kPullWaitMicros), static_cast<uint64_t>(pull_wait_seconds * 1e6));
  for (int b = 0; b < GateStats::kBuckets; ++b) {
    control->Add(GateKey(kHistogram + b), stats.histogram[b]);
  }
  control->Add(GateKey(kMaxStaleness + rank),
               static_cast<uint64_t>(std::max<int64_t>(0, stats.max_staleness)));
}

GateTotals ReadTotals(int workers, ControlTable* control) {
  GateTotals totals;
  totals.held = control->Read(GateKey(kHeldMicros)) * 1e-6;
  totals.worked = control->Read(GateKey(kTrainingMicros)) * 1e-6;
  totals.waited = control->Read(GateKey(kPullWaitMicros)) * 1e-6;
  totals.held_pulls = control->Read(GateKey(kHeldPulls));
  totals.pulls = control->Read(GateKey(kPulls));
  for (int b = 0; b < GateStats::kBuckets; ++b) {
    totals.histogram[b] = control->Read(GateKey(kHistogram + b));
  }
  for (int r = 0; r < workers; ++r) {
    totals.max_staleness =
        std::max(totals.max_staleness, control->Read(GateKey(kMaxStaleness + r)));
  }
  return totals;
}

void AddMetrics(const GateTotals& totals, int64_t staleness, MetricSet* metrics) {
  (*metrics)["train:staleness"] = static_cast<double>(staleness);
  // Time workers sat blocked on their next minibatch's pull (the gate, plus
  // the pull's own round trip), and its share of their training time.
  (*metrics)["train:gate_wait_seconds"] = totals.waited;
  (*metrics)["train:gate_wait_share"] = totals.worked > 0 ? totals.waited / totals.worked : 0;
  // Time the servers held pulls at the gate (a held pull may overlap compute).
  (*metrics)["train:pull_hold_seconds"] = totals.held;
  (*metrics)["train:parked_pulls"] = static_cast<double>(totals.held_pulls);
  (*metrics)["train:pulls"] = static_cast<double>(totals.pulls);
  for (int b = 0; b < GateStats::kBuckets; ++b) {
    (*metrics)[std::string("train:staleness_histogram_") + GateStats::BucketName(b)] =
        static_cast<double>(totals.histogram[b]);
  }
  (*metrics)["train:max_staleness"] = static_cast<double>(totals.max_staleness);
}

void PrintSummary(const GateTotals& totals, int64_t staleness) {
  std::ostringstream histogram;
  for (int b = 0; b < GateStats::kBuckets; ++b) {
    histogram << (b ? ", " : "") << GateStats::BucketName(b) << ": " << totals.histogram[b];
  }
  std::cout << "staleness gate ("
            << (staleness < 0 ? std::string("inf") : std::to_string(staleness))
            << "): workers waited " << std::fixed << std::setprecision(2) << totals.waited << " s ("
            << std::setprecision(1) << 100 * (totals.worked > 0 ? totals.waited / totals.worked : 0)
            << "% of training time; servers held pulls " << totals.held << " s), "
            << totals.held_pulls << " of " << totals.pulls << " pulls held; observed staleness {"
            << histogram.str() << "}, max " << totals.max_staleness << std::endl;
}

}  // namespace

void ReportGate(Node* node, KVWorker* client, ControlTable* control, int64_t staleness,
                double training_seconds, double pull_wait_seconds, MetricSet* metrics) {
  const int workers = node->view()->num_workers();
  AddFigures(client->gate_stats(), node->rank(), training_seconds, pull_wait_seconds, control);
  node->Barrier(kWorkerGroup, kBarrierTimeoutS, "gate report");
  if (node->rank() != 0) return;
  const GateTotals totals = ReadTotals(workers, control);
  AddMetrics(totals, staleness, metrics);
  PrintSummary(totals, staleness);
}

}  // namespace keel
