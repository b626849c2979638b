// KVServer: a parameter server's request handling.
//
// Serves PUSH and PULL for the key ranges the view assigns to this server:
// checks each request (a malformed one is answered with an error, logged and
// counted, and the server keeps serving), applies pushes and acknowledged
// CLOCK messages at most once per (sender, sequence) and answers a repeated
// one as a success (a client resends what got no answer), and answers pulls
// with the rows' weights. Tables are created on first use; rows only by
// pushes (a pull of a key without a row answers its initial weights).
//
// Hostile or broken input (each refusal is answered with an error naming the
// reason, counted in rejected_requests and logged, rate-limited):
// - requests only from the current view's members, and only in their role:
//   PUSH, PULL, DUMP and CLOCK from workers, pushes passed down a chain from
//   the range's predecessor (servers still joining are in the view);
//   nothing before the first view;
// - keys x width bounded (kMaxRequestValues, ParseDataRequest);
// - given table declarations, only the declared tables, each at its
//   declared width (without any, tables and widths as first used);
// - push sequences within DedupeWindow's window of the sender's newest;
// - a push with a NaN or infinite value refused whole;
// - running out of memory refuses the request and leaves no half-made
//   table or row;
// - a worker's dedupe windows are dropped when it leaves the view (node ids
//   are never reused: a worker that comes back registers anew).
//
// Replication: each key range is held by a chain of servers (the view's
// RangeMap). The primary takes a push, applies it and passes it to the next
// replica, which does the same; the last one acknowledges it to the worker, so
// an acknowledged push is applied on every replica, in the same order on each.
// Every replica keeps the range's dedupe window, so a push a worker resends to
// a promoted backup (or that reaches a replica twice) is applied once. Pulls
// are answered by the primary. A server that joins a chain (a replacement)
// asks its predecessor for the range (REPLICA_SYNC) and holds the pushes
// passed to it until the copy arrives.
//
// Checkpoints: on the scheduler's SNAPSHOT the server copies every row (on its
// receive thread, so the copy is the state at that point), answers, and writes
// the copy in the background (SnapshotWriter). A view naming a checkpoint to
// resume from makes the server load the rows of its key ranges from it before
// it serves anything.
//
// Where each mechanism lives: kv_server.cc receives (dispatch, CLOCK and the
// staleness gate, views); RequestServing (request_serving.h) answers PUSH,
// PULL and DUMP and holds the pulls the gate does not admit yet;
// ChainReplication (chain_replication.h) passes pushes down and copies ranges
// (REPLICA_SYNC, wire form in shard_copy.h); SnapshotRestore
// (snapshot_restore.h) copies and loads checkpoints (written by
// SnapshotWriter); ServerState (server_state.h) is what they share; shard.h is
// a range's replica and dedupe_window.h the at-most-once bookkeeping. KVServer
// owns the three and calls them; they call back only through what it hands
// them (RequestServing's PassDown, ChainReplication's Hooks).
//
// Threading: the node's handlers run on its receive thread, the setters
// before node->Start(); the accessors (counters, table_sizes(), serving(),
// failure()) are safe from any thread.
#ifndef KEEL_SERVER_KV_SERVER_H_
#define KEEL_SERVER_KV_SERVER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/checkpoint.h"
#include "kv/message.h"
#include "kv/node.h"
#include "kv/optimizer.h"
#include "kv/request_observer.h"
#include "kv/staleness_gate.h"
#include "kv/table_spec.h"
#include "server/chain_replication.h"
#include "server/dedupe_window.h"
#include "server/request_serving.h"
#include "server/shard.h"
#include "server/server_state.h"
#include "server/shard.h"
#include "server/snapshot_restore.h"

namespace keel {

class KVServer {
 public:
  // Registers as `node`'s data handler: call before node->Start(). Tables in
  // `tables` get their spec; if `tables` is not empty, requests for any other
  // table, or at another width than a spec's (unless it is 0), are refused.
  // With no specs at all (benchmarks, tests), any table is created on first
  // use with `default_optimizer` and zero rows. Throws Error if an
  // optimizer's options are invalid.
  // `staleness`: pulls are answered only when every live worker's clock is at
  // least the pull's clock minus it (StalenessGate; kAsynchronous: never held).
  // A held pull is acknowledged at once as held (Meta.held), so its worker
  // does not take the wait for a loss; a copy of it that arrives while it is
  // held is acknowledged again and not held twice.
  KVServer(Node* node, const OptimizerOptions& default_optimizer,
           std::map<uint32_t, TableSpec> tables = {},
           int64_t staleness = StalenessGate::kAsynchronous);
  // Stops the node first, so no request arrives for a destroyed server.
  ~KVServer();
  KVServer(const KVServer&) = delete;
  KVServer& operator=(const KVServer&) = delete;

  // Requests refused since start (malformed, from a non-member, out of
  // bounds, non-finite, out of memory).
  uint64_t rejected_requests() const { return state_.counters.rejected.load(); }
  // Pushes and CLOCK messages not applied again because their
  // (sender, sequence) was already applied; each was still acknowledged.
  uint64_t duplicate_pushes() const { return state_.counters.duplicates.load(); }
  uint64_t served_requests() const { return state_.counters.served.load(); }
  // Pushes refused whole for a non-finite value (also in rejected_requests).
  uint64_t non_finite_pushes() const { return state_.counters.non_finite.load(); }
  // Requests refused for a sequence outside the window around the sender's
  // last applied one (also in rejected_requests).
  uint64_t out_of_window_sequences() const { return state_.counters.out_of_window.load(); }
  // Key admission and eviction, decided here as a range's primary: keys given
  // a row after their admit_after-th push, key pushes dropped before that,
  // and rows evicted.
  uint64_t admitted_keys() const { return state_.counters.admitted_keys.load(); }
  uint64_t unadmitted_key_pushes() const { return state_.counters.unadmitted_pushes.load(); }
  uint64_t evicted_rows() const { return state_.counters.evicted_rows.load(); }
  // Key caching (KeyListCache): lists kept, requests served from a kept
  // list, and requests naming a list not held here (answered unknown).
  uint64_t key_lists_kept() const { return state_.counters.key_lists_kept.load(); }
  uint64_t key_list_hits() const { return state_.counters.key_list_hits.load(); }
  // Pushes and pulls served through a kept list's slots (no key probed).
  uint64_t key_list_slot_hits() const { return state_.counters.key_list_slot_hits.load(); }
  uint64_t unknown_key_lists() const { return state_.counters.unknown_key_lists.load(); }
  // Senders whose applied sequences this server remembers, summed over its
  // shards and CLOCKs (a departed worker's are dropped).
  size_t remembered_senders() const { return state_.counters.remembered_senders.load(); }
  // Workers whose pulls this server remembers for the staleness of their
  // pushes (PushStaleness), per shard and table (a departed worker's are
  // dropped).
  size_t remembered_readers() const { return state_.counters.remembered_readers.load(); }

  // Pulls that had to wait at the staleness gate since start.
  uint64_t parked_pulls() const { return state_.counters.parked_total.load(); }
  // Why the server cannot serve (a checkpoint that failed to load); "" if it can.
  std::string failure() const { return state_.failure(); }

  // Rows and bytes of one table, summed over this server's replicas.
  struct TableSize {
    uint32_t table = 0;
    uint64_t rows = 0;
    uint64_t bytes = 0;
  };
  // Every table's size, by table id, as of the last push (taken on the
  // receive thread after each, and after each view).
  std::vector<TableSize> table_sizes() const;
  // Whether this server has had a view and every key range it holds has its
  // rows (copied from its chain, or loaded from a checkpoint), and no load
  // failed: it serves its ranges.
  bool serving() const { return serving_.load() && failure().empty(); }
  // Key ranges of which this server holds a replica still waiting for its
  // rows, and pushes held for them.
  size_t ranges_waiting() const { return ranges_waiting_.load(); }
  size_t held_pushes() const { return held_pushes_.load(); }

  // Writes the key ranges this server holds whole to a checkpoint in
  // `folder` (server/held_copy.h) and returns what its next REGISTER brings.
  // Only once the node has stopped (nothing else touches the shards).
  proto::HeldCopy KeepCopy(const std::string& folder) const;

  // The most bytes of rows one DUMP answer or one REPLICA_SYNC page carries
  // (kPageBytes unless set; tests set less to see many pages). Set before
  // node->Start().
  void SetPageBytes(size_t bytes) { state_.page_bytes = std::max<size_t>(1, bytes); }
  // How long a departed worker's push records are kept (kDepartedRecordsGraceS;
  // tests shorten it). Call before the node starts.
  void SetDepartedRecordsGrace(double seconds) { departed_grace_s_ = seconds; }
  // The bounds of the key lists kept for the workers (checked: throws Error
  // naming a zero bound). Call before node->Start().
  void SetKeyCacheBounds(const KeyCacheBounds& bounds) {
    bounds.Check();
    state_.key_lists.set_bounds(bounds);
  }

  // Steps a push's rows on `threads` threads (--server_apply_threads): the
  // receive thread and threads - 1 more, each a contiguous part of the
  // push's rows, the receive thread waiting for all before it goes on, so
  // pushes are applied in the order they are today. Throws Error unless
  // 1 <= threads <= kMaxApplyThreads. Call before node->Start().
  static constexpr int kMaxApplyThreads = 64;
  void SetApplyThreads(int threads);

  // Hears of every PUSH and PULL this server answered, for metrics (on the
  // receive thread). Set before node->Start().
  void SetRequestObserver(RequestObserver observer) { requests_->SetObserver(std::move(observer)); }

 private:
  // Receiving (kv_server.cc): what the node's handlers call, on its receive
  // thread.
  void Handle(Message&& message);
  void OnClock(const Message& message);
  void OnView(const proto::ClusterView& view);
  // Records the view's members; returns its workers' node ids.
  std::set<int> UpdateMembers(const proto::ClusterView& view);
  // Drops the CLOCK records, the pulls' versions and the pre-copies of
  // senders no longer in the view, and notes when a worker with push records
  // left (departed_at_): those go in ForgetExpiredDepartures.
  void ForgetDeparted();
  // Drops the push records of workers gone longer than departed_grace_s_,
  // in each range that the view (`given`, the one OnView handles; nullptr:
  // the node's latest, read only when it looks) does not need them in
  // (KeepsDepartedRecords). Called on every view and, at most about once a
  // second, between them (cheap while none is waiting).
  void ForgetExpiredDepartures(const proto::ClusterView* given = nullptr);
  // Updates remembered_senders() and remembered_readers().
  void CountRememberedSenders();
  // Takes table_sizes() and the replicas' readiness (serving(),
  // ranges_waiting(), held_pushes()) for other threads.
  void PublishSizes();

  // The shards, members and counters the collaborators share.
  ServerState state_;
  Node* const node_;
  // Touched only on the receive thread.
  std::unordered_map<int, DedupeWindow> clocks_applied_;  // CLOCKs, by sender
  // Workers gone from the view whose push records (Shard::applied) are still
  // kept, with when this server first saw a view without them
  // (MonotonicSeconds). A primary passes a repeated push down its chain
  // again (its worker had no acknowledgement); if that copy reaches a backup
  // after the worker left, the backup must still find it recorded, or it
  // applies it a second time. Such a copy is on its way when the worker
  // leaves, so the records are kept for a grace period after, not for ever.
  std::map<int, double> departed_at_;
  double departed_grace_s_ = kDepartedRecordsGraceS;
  double next_departure_check_ = 0;  // ForgetExpiredDepartures' next look
  StalenessGate gate_;
  std::unique_ptr<SnapshotRestore> snapshots_;
  std::unique_ptr<ChainReplication> chain_;
  std::unique_ptr<RequestServing> requests_;
  // What PublishSizes takes, for other threads.
  mutable std::mutex sizes_mutex_;
  std::vector<TableSize> sizes_;
  std::atomic<bool> serving_{false};
  std::atomic<size_t> ranges_waiting_{0};
  std::atomic<size_t> held_pushes_{0};
};

}  // namespace keel

#endif  // KEEL_SERVER_KV_SERVER_H_
