// The exact_sum job's arithmetic: the gradients its workers push (a known
// function of who pushes what), the sums the servers must hold given the
// workers' ledgers, and the comparison of a table dump against them.
//
// The table sums: SGD at rate 1 with no decay, no staleness scaling and zero
// initial rows, so a key's weight is minus the sum of every gradient applied
// to it. Gradients are small positive integers and the sums stay below 2^24,
// so every partial sum is exact in float whatever the order of the pushes,
// and the comparison is for equality.
//
// What the servers must hold for a key, from the ledgers of every worker
// process (exact_sum_ledger.h):
// - every acknowledged push exactly once per acknowledgement (a push a
//   replacement made again after its rank's previous worker had it
//   acknowledged is a second push and counts twice: the replacement resumes
//   from its rank's last progress report, at most one heartbeat behind);
// - a push sent but never acknowledged (its worker was killed, or left the
//   view, before the answer came) zero times or once: each server applies
//   its part whole or not at all, independently of the others.
// So each key has a least and a most sum; they are equal unless a worker died
// with pushes in flight. Below the least is a lost update; above the most a
// doubled one. A key below its least in a range the scheduler announced lost
// (every replica left; KeyRange.lost) is an announced loss, not a violation:
// only loss nobody announced, and doubled updates anywhere, are violations.
#ifndef KEEL_WORKER_EXACT_SUM_CHECK_H_
#define KEEL_WORKER_EXACT_SUM_CHECK_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kv/keys.h"
#include "worker/exact_sum_ledger.h"

namespace keel {

// The table the job pushes to, one float per key.
constexpr uint32_t kExactSumTable = 0;

// Each worker's share: `minibatches` pushes per epoch for `epochs` epochs,
// over the keys MixKey(f) for features f in [0, features), which the mix
// spreads over every key range.
struct ExactSumWorkload {
  uint64_t features = 4096;
  // Features [0, shared_features) are in every push of every worker, so
  // concurrent updates of one row collide on the servers.
  uint64_t shared_features = 64;
  int epochs = 1;
  int minibatches = 20;
};

// The largest gradient ExactSumGradient gives.
constexpr uint64_t kMaxExactSumGradient = 8;

// Throws Error naming the flags (--epochs, --exact_sum_minibatches,
// --exact_sum_keys) unless the workload is well formed, and the sums of
// `workers` workers, each push made as many as 4 times (replacements), stay
// exact in float (below 2^24).
void CheckExactSumWorkload(const ExactSumWorkload& workload, int workers);

// The features of push `push`, ascending: the shared ones, and a third of the
// others, a different third from one minibatch to the next.
std::vector<uint64_t> ExactSumFeatures(const ExactSumWorkload& workload, const PushId& push);

// The gradient push `push` carries for `feature`: an integer in
// [1, kMaxExactSumGradient].
float ExactSumGradient(const PushId& push, uint64_t feature);

// The least and most sum each feature of the workload must hold.
class ExpectedSums {
 public:
  explicit ExpectedSums(const ExactSumWorkload& workload);

  // A push acknowledged once: in both the least and the most sum.
  void AddAcknowledged(const PushId& push);
  // A push sent but never acknowledged: in the most sum only.
  void AddUnacknowledged(const PushId& push);
  // Every push of every ledger: each acknowledgement once, and each push a
  // process sent without seeing its acknowledgement as unacknowledged.
  void AddLedgers(const std::vector<ProcessLedger>& ledgers);

  uint64_t features() const { return least_.size(); }
  uint64_t least(uint64_t feature) const { return least_[feature]; }
  uint64_t most(uint64_t feature) const { return most_[feature]; }

  // Pushes counted, over every ledger.
  uint64_t acknowledged() const { return acknowledged_; }
  uint64_t unacknowledged() const { return unacknowledged_; }
  // Acknowledgements of a push acknowledged before (by another process).
  uint64_t repeated() const { return repeated_; }

 private:
  void Add(const PushId& push, bool certain);

  ExactSumWorkload workload_;
  std::vector<uint64_t> least_;
  std::vector<uint64_t> most_;
  std::set<PushId> seen_;  // acknowledged pushes, for `repeated`
  uint64_t acknowledged_ = 0;
  uint64_t unacknowledged_ = 0;
  uint64_t repeated_ = 0;
};

// A key whose dumped sum is outside what the ledgers allow.
struct SumViolation {
  enum Kind { kLost, kDoubled };
  Kind kind = kLost;
  Key key = 0;
  uint64_t feature = 0;  // UnmixKey(key)
  size_t range = 0;      // index in the view's ranges
  double sum = 0;        // minus the dumped weight (0 for a key without a row)
  uint64_t least = 0;
  uint64_t most = 0;
};

// One key range's part of the check.
struct RangeCheck {
  Key begin = 0;
  Key last = 0;  // inclusive
  int primary = 0;
  uint64_t keys_checked = 0;
  uint64_t lost = 0;
  uint64_t doubled = 0;
  bool announced_lost = false;  // the scheduler declared the range lost
  // The updates its keys must hold at least (the sum of their lower bounds),
  // and those the keys with lost updates lack: how much of the range a loss
  // took.
  double expected = 0;
  double missing = 0;
};

struct ExactSumReport {
  uint64_t keys_checked = 0;
  uint64_t lost = 0;            // keys with lost updates outside announced ranges
  uint64_t announced_lost = 0;  // keys with lost updates in announced ranges
  uint64_t doubled = 0;
  uint64_t pushes_acknowledged = 0;
  uint64_t pushes_unacknowledged = 0;
  uint64_t pushes_repeated = 0;
  std::vector<RangeCheck> ranges;        // one per key range of the view
  std::vector<SumViolation> violations;  // every one, by key
  bool ok() const { return lost == 0 && doubled == 0; }
};

// Checks a dump of the table (`keys` sorted, one weight per key) against
// `expected`: every feature of the workload (a key without a row sums to 0)
// and every dumped key outside it (which must sum to 0). `ranges`: the view's
// key ranges, to place each key; `announced`: the indices of those the
// scheduler declared lost.
ExactSumReport CompareSums(const ExpectedSums& expected, const std::vector<Key>& keys,
                           const std::vector<float>& weights, const RangeMap& ranges,
                           const std::set<size_t>& announced = {});

// "key 0x9e37...15 (feature 17) in range 1 [0x8000000000000000, 0xffffffffffffffff] on server 1:
// sum 12, expected 24: lost updates".
std::string DescribeViolation(const SumViolation& violation, const ExactSumReport& report);

// The report as a JSON object (exact_sum.json): the counts, each range's, and
// the first `max_listed` violations.
std::string ExactSumJson(const ExactSumReport& report, size_t max_listed = 100);

}  // namespace keel

#endif  // KEEL_WORKER_EXACT_SUM_CHECK_H_
