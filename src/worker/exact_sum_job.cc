#include "worker/exact_sum_job.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "worker/barriers.h"
#include "worker/progress_reports.h"
#include "worker/training_cursor.h"

namespace keel {
namespace {

constexpr char kLedgerFolder[] = "exact_sum_ledgers";
constexpr char kReportFile[] = "exact_sum.json";
// Violations printed on the terminal (all are counted, the first 100 are in the JSON).
constexpr size_t kPrintedViolations = 10;

// A push on its way: its arrays stay alive until it is acknowledged.
struct PendingPush {
  PushId push;
  SharedArray<const Key> keys;
  SharedArray<const float> gradients;
  KVWorker::Handle handle = 0;
};

PendingPush SendPush(KVWorker* client, const ExactSumWorkload& workload, const PushId& push) {
  PendingPush pending;
  pending.push = push;
  std::vector<Key> keys = MixedKeySet(ExactSumFeatures(workload, push));
  std::vector<float> gradients;
  gradients.reserve(keys.size());
  for (Key key : keys) gradients.push_back(ExactSumGradient(push, UnmixKey(key)));
  pending.keys = SharedArray<const Key>(std::move(keys));
  pending.gradients = SharedArray<const float>(std::move(gradients));
  pending.handle = client->Push(pending.keys, pending.gradients, 1, kExactSumTable);
  return pending;
}

// One worker process's side of the job.
class ExactSumWorker {
 public:
  ExactSumWorker(Node* node, SchedulerLink* scheduler, KVWorker* client,
                 const ExactSumOptions& options)
      : node_(node), scheduler_(scheduler), client_(client), options_(options) {}

  void Run(std::ostream* out);

 private:
  std::string LedgerFolder() const { return options_.model_dir + "/" + kLedgerFolder; }
  // Worker 0 of a fresh job clears a previous run's ledgers; then every
  // worker opens its own.
  void OpenLedger();
  void PushEpoch(int epoch, const proto::WorkerCursor& start);
  // Pushes the minibatches of `first`'s rank and epoch from `first` on,
  // every `step`-th, `inflight` at a time; calls `acknowledged` for each, in
  // order.
  void PushMinibatches(PushId first, int step,
                       const std::function<void(const PushId&)>& acknowledged);
  // At the end of this worker's share of `epoch`: pushes the parts of
  // departed workers' shares the scheduler hands over, until every rank's
  // share is done.
  void PushOrphanedShares(int epoch, int batches);
  // Worker 0: dumps the table and compares it with the ledgers.
  void Check(std::ostream* out);

  Node* node_;
  SchedulerLink* scheduler_;
  KVWorker* client_;
  const ExactSumOptions& options_;
  // Worker 0: minibatches pushed in the epochs decided so far, and when this
  // process started, for its progress reports.
  uint64_t total_minibatches_ = 0;
  const double started_ = MonotonicSeconds();
  std::unique_ptr<LedgerWriter> ledger_;
};

void ExactSumWorker::Run(std::ostream* out) {
  CheckExactSumWorkload(options_.workload, node_->view()->num_workers());
  // The scheduler's progress records (and with them a fault schedule's
  // `start+` times) count the job's minibatches as its examples.
  scheduler_->SetProgressReport(
      ShareReport(options_.workload.epochs, static_cast<uint64_t>(options_.workload.minibatches)));
  OpenLedger();
  proto::WorkerCursor start;
  if (scheduler_->has_takeover()) {
    start = scheduler_->takeover();
    LOG(WARNING) << "worker " << node_->rank() << " takes over its rank at epoch " << start.epoch()
                 << " minibatch " << start.batches()
                 << " (pushes its previous worker made after that are made again)";
  }
  for (int epoch = std::max(1, start.epoch()); epoch <= options_.workload.epochs; ++epoch) {
    PushEpoch(epoch, start);
  }
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "exact_sum pushed");
  if (node_->rank() == 0) Check(out);
}

void ExactSumWorker::OpenLedger() {
  MakeDirectories(LedgerFolder());
  if (node_->rank() == 0 && !scheduler_->has_takeover()) RemoveLedgers(LedgerFolder());
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "exact_sum start");
  ledger_ = std::make_unique<LedgerWriter>(LedgerPath(LedgerFolder(), node_->id()));
}

void ExactSumWorker::PushEpoch(int epoch, const proto::WorkerCursor& start) {
  const int minibatches = options_.workload.minibatches;
  int batches = 0;
  if (start.epoch() == epoch) {
    batches = start.epoch_done() ? minibatches : static_cast<int>(start.batches());
  }
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "exact_sum epoch " + std::to_string(epoch));
  const double begin = MonotonicSeconds();
  scheduler_->SetProgress(CursorAt(epoch, batches, batches, {}), 0);
  PushMinibatches({node_->rank(), epoch, batches}, 1, [&](const PushId& push) {
    batches = push.minibatch + 1;
    scheduler_->SetProgress(CursorAt(epoch, batches, batches, {}), MonotonicSeconds() - begin);
  });
  PushOrphanedShares(epoch, batches);
}

void ExactSumWorker::PushMinibatches(PushId first, int step,
                                     const std::function<void(const PushId&)>& acknowledged) {
  std::deque<PendingPush> window;
  auto settle = [&] {
    client_->Wait(window.front().handle);
    ledger_->Acknowledged(window.front().push);
    acknowledged(window.front().push);
    window.pop_front();
  };
  const size_t inflight = static_cast<size_t>(std::max(1, options_.inflight));
  for (PushId push = first; push.minibatch < options_.workload.minibatches;
       push.minibatch += step) {
    ledger_->Sent(push);  // before it can reach a server
    window.push_back(SendPush(client_, options_.workload, push));
    if (window.size() >= inflight) settle();
    if (options_.push_interval_s > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(options_.push_interval_s));
    }
  }
  while (!window.empty()) settle();
}

void ExactSumWorker::PushOrphanedShares(int epoch, int batches) {
  const proto::WorkerCursor share = CursorAt(epoch, batches, batches, {});
  proto::WorkerCursor work, finished;
  int part = 0, parts = 0;
  bool have_finished = false;
  uint64_t epoch_minibatches = 0;
  while (scheduler_->TakeOrphanWork(share, have_finished ? &finished : nullptr, part, parts, &work,
                                    &part, &parts, &epoch_minibatches, kBarrierTimeoutS)) {
    LOG(WARNING) << "worker " << node_->rank() << " epoch " << epoch << ": pushes part " << part
                 << " of " << parts << " of worker " << work.rank() << "'s share from minibatch "
                 << work.batches() << " (that worker left)";
    uint64_t pushed = 0;
    const PushId first{work.rank(), epoch, static_cast<int>(work.batches()) + part};
    PushMinibatches(first, parts, [&](const PushId&) { ++pushed; });
    // The first part also counts what the departed worker pushed before it left.
    if (part == 0) pushed += work.examples();
    finished = work;
    finished.set_examples(pushed);
    have_finished = true;
  }
  if (node_->rank() == 0) {
    LOG(INFO) << "exact_sum epoch " << epoch << ": " << epoch_minibatches
              << " minibatches pushed across the workers";
    total_minibatches_ += epoch_minibatches;
    scheduler_->ReportProgress(EpochReport(options_.workload.epochs, epoch, epoch_minibatches,
                                           total_minibatches_, MonotonicSeconds() - started_, {},
                                           /*stop=*/false));
  }
}

void ExactSumWorker::Check(std::ostream* out) {
  std::vector<Key> keys;
  std::vector<float> weights;
  client_->Dump(kExactSumTable, 1, &keys, &weights);
  ExpectedSums expected(options_.workload);
  expected.AddLedgers(ReadLedgers(LedgerFolder()));
  std::set<size_t> announced;
  const auto view = node_->view();
  for (int r = 0; r < view->ranges_size(); ++r) {
    if (view->ranges(r).lost()) announced.insert(static_cast<size_t>(r));
  }
  const ExactSumReport report = CompareSums(expected, keys, weights, *node_->ranges(), announced);
  const std::string path = options_.model_dir + "/" + kReportFile;
  WriteFileAtomically(path, ExactSumJson(report) + "\n");
  *out << "exact_sum: " << report.keys_checked << " keys checked in " << report.ranges.size()
       << " key range(s), " << report.violations.size() << " violation(s) (" << report.lost
       << " lost, " << report.doubled << " doubled); pushes: " << report.pushes_acknowledged
       << " acknowledged, " << report.pushes_unacknowledged << " never acknowledged, "
       << report.pushes_repeated << " made again by a replacement" << std::endl;
  if (!announced.empty()) {
    *out << "exact_sum: " << report.announced_lost
         << " key(s) lost updates in the key range(s) the scheduler announced lost" << std::endl;
  }
  for (size_t r = 0; r < report.ranges.size(); ++r) {
    const RangeCheck& range = report.ranges[r];
    *out << "exact_sum: range " << r << " (server " << range.primary << "): " << range.keys_checked
         << " keys, " << range.lost << " lost, " << range.doubled << " doubled"
         << (range.announced_lost ? " (announced lost)" : "") << std::endl;
  }
  for (size_t i = 0; i < report.violations.size() && i < kPrintedViolations; ++i) {
    *out << "exact_sum: " << DescribeViolation(report.violations[i], report) << std::endl;
  }
  *out << "exact_sum: report in " << path << std::endl;
  if (!report.ok()) {
    throw MakeError("exact_sum: ", report.violations.size(), " key(s) with wrong sums (",
                    report.lost, " lost, ", report.doubled, " doubled), the first ",
                    DescribeViolation(report.violations[0], report), "; see ", path);
  }
}

}  // namespace

std::map<uint32_t, TableSpec> ExactSumTables() {
  TableSpec sums;
  sums.width = 1;
  sums.optimizer.name = "sgd";
  sums.optimizer.learning_rate = 1.0f;  // a push of g subtracts g: the table sums
  return {{kExactSumTable, std::move(sums)}};
}

void RunExactSum(Node* node, SchedulerLink* scheduler, KVWorker* client,
                 const ExactSumOptions& options, std::ostream* out) {
  ExactSumWorker(node, scheduler, client, options).Run(out);
}

}  // namespace keel
