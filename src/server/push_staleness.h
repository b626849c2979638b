// PushStaleness: how stale a push's gradients are, measured by the server
// from what it served itself.
//
// A table of a key range has a version: the number of pushes applied to it.
// A push's staleness is the number of pushes applied to the same table of the
// same key range between the answer to the pull that read the rows its
// gradients were computed from and this push (Zhang et al., 2016: the
// gradient's delay in updates), with this worker's own pushes among them
// counted as one at most. With one message per server per minibatch, that is
// the clocks the other workers advanced in between, plus one for this
// worker's own: its pipeline pulls a minibatch's rows before the minibatches
// ahead of it are pushed (worker/minibatch_pipeline.h), one with the default
// depth for bounded staleness, two asynchronously. The depth is the worker's
// own choice, and its own updates it has not seen are known to be its
// neighbours in the data: a step scaled down for them trained worse per epoch
// on the datagen set (docs/BENCHMARKS.md), one not scaled learned as depth 1.
//
// The pull is named by its clock: a worker stamps each pull with its clock
// and each push with the clock of the pull that read its rows (read_clock).
// At the first pull a worker stamps with a clock, the server records the
// table's version; the push looks it up. Nothing a worker sends can claim a
// staleness: an unknown read clock (never pulled, forgotten, a pull answered
// by a former primary) counts as staleness 0, and every staleness is clamped
// to [0, kMaxStaleness], so the scaled step is never larger than the
// optimizer's own.
// Not synchronized: a server uses it from its receive thread.
#ifndef KEEL_SERVER_PUSH_STALENESS_H_
#define KEEL_SERVER_PUSH_STALENESS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>

namespace keel {

class PushStaleness {
 public:
  // The largest staleness reported (a push this late is as late as any).
  static constexpr int64_t kMaxStaleness = 1 << 16;
  // Read clocks remembered per worker and table: the newest ones. A
  // worker's push reads at most its pipeline's depth + 1 clocks back
  // (--minibatches_in_flight, at most 8).
  static constexpr size_t kRemembered = 16;

  // `worker`'s pull of `table` stamped `clock` was answered at `version`.
  // Only the first pull with a clock is kept (with --clock_every above 1
  // several share one: the staleness is then an upper bound).
  void RecordPull(int worker, uint32_t table, int64_t clock, uint64_t version);
  // A push of `worker` to `table` was applied (the table's version went up).
  void RecordPush(int worker, uint32_t table);
  // The staleness of a push by `worker` to `table` that read its rows at
  // `read_clock`, applied at `version` (the table's version before it), in
  // [0, kMaxStaleness]; 0 if no pull with that clock is remembered.
  int64_t Of(int worker, uint32_t table, int64_t read_clock, uint64_t version) const;
  // `staleness` (from anywhere: a passed-down push's) in [0, kMaxStaleness].
  static int64_t Clamp(int64_t staleness);

  // Forgets every worker for which `keep` is false: a worker that left the
  // view (node ids are never reused: one that comes back is a new reader).
  template <typename Keep>
  void ForgetWorkersUnless(Keep keep) {
    for (auto it = readers_.begin(); it != readers_.end();) {
      it = keep(it->first.first) ? std::next(it) : readers_.erase(it);
    }
  }
  // How many (worker, table) pairs are remembered.
  size_t remembered() const { return readers_.size(); }

 private:
  struct Read {
    int64_t clock;
    uint64_t version;
    uint64_t own_pushes;  // the worker's pushes applied by then
  };
  struct Reader {
    std::deque<Read> reads;  // the newest pulls, oldest first
    uint64_t own_pushes = 0;
  };
  // Per (worker, table).
  std::map<std::pair<int, uint32_t>, Reader> readers_;
};

}  // namespace keel

#endif  // KEEL_SERVER_PUSH_STALENESS_H_
