// CheckpointCoordinator: the scheduler's part in checkpoints.
//
// Workers stop at the same checkpoint point (every `every`-th minibatch of an
// epoch, the start of every epoch after the first, and the end of the job) and
// report their cursors; a worker whose share of the epoch ends before the
// point reports that instead and counts as being there. Once every live worker
// is accounted for, every server is told to copy its rows (SNAPSHOT); once all
// have, the workers go on, while the servers write in the background and
// report their files. The coordinator then writes the manifest and LATEST
// (on its own thread: storage can be slow) and prunes old checkpoints. The
// final checkpoint's workers are answered only once it is committed, so a
// finished job has its checkpoint.
//
// Preemption (Preempt): workers stop after the minibatch they have in flight,
// each at its own minibatch, and the next checkpoint (the preemption
// checkpoint) takes every live worker where it stopped, or where its share of
// the epoch ended. Its workers are answered only once it is committed: the
// job ends after it.
//
// All methods but the constructor, Start and Stop are called with the
// scheduler's lock held; the commit thread calls back `committed` without any
// lock of the coordinator's held.
#ifndef KEEL_SCHEDULER_CHECKPOINT_COORDINATOR_H_
#define KEEL_SCHEDULER_CHECKPOINT_COORDINATOR_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "checkpoint.pb.h"
#include "io/checkpoint.h"
#include "io/timeline_writer.h"
#include "keel.pb.h"
#include "kv/message.h"

namespace keel {

struct CheckpointOptions {
  std::string uri;     // where checkpoints go; "" disables them
  int every = 0;       // minibatches per worker between checkpoints in an epoch (0: epochs only)
  int keep = 0;        // committed checkpoints to keep (0: all)
  std::string resume;  // --resume: "latest", a checkpoint's URI or a store's URI; "" none
  // Delta checkpoints: after a full checkpoint, servers write only the rows
  // changed since the previous one, and a full one every `full_every`.
  bool delta = false;
  int full_every = 10;
  // This scheduler takes over a running job from one that died (its nodes
  // run on): the checkpoints already in `uri` are the job's own. Without it,
  // a job that does not resume from `uri` refuses a store holding committed
  // checkpoints: they are an earlier job's.
  bool takes_over = false;
};

// What checkpoints did so far, for metrics.
struct CheckpointStats {
  uint64_t committed = 0;
  uint64_t abandoned = 0;
  // The newest commit: seconds from the start of its copy to its commit, the
  // bytes of its files, and when it was committed (MonotonicSeconds; 0: none).
  double last_seconds = 0;
  uint64_t last_bytes = 0;
  double last_committed_at = 0;
};

class CheckpointCoordinator {
 public:
  // Sends a control message to a node (the scheduler stamps it).
  using Send = std::function<void(int node_id, Message& message)>;
  // Called from the commit thread after a commit finished (error "" on success).
  using Committed = std::function<void(const std::string& id, const std::string& error)>;

  // Resolves and verifies the checkpoint to resume from, if any: throws Error
  // naming the file and the failed check (and the previous good checkpoint).
  // Throws Error too if `options.uri` holds committed checkpoints that are not
  // this job's: it neither resumes from that store nor takes over a running
  // job (CheckpointOptions::takes_over). Their names would mix with this
  // job's: --keep_checkpoints would prune this job's as the oldest, and LATEST
  // and a replaced server's restore would name the earlier job's.
  CheckpointCoordinator(CheckpointOptions options, Send send, Committed committed);
  ~CheckpointCoordinator();

  bool enabled() const { return !options_.uri.empty(); }
  // The manifest of the checkpoint the job resumes from (empty: none).
  const proto::CheckpointManifest& resumed() const { return resumed_; }
  // Checkpoint settings and the resume point, for every view.
  void FillView(proto::ClusterView* view) const;

  // A worker's CHECKPOINT message (`node` its id, `rank` its rank).
  void OnWorker(int node, int rank, const proto::Meta& meta, const std::set<int>& workers,
                const std::set<int>& servers, int num_servers);
  // A server's SNAPSHOT reply (copied) or report (written).
  void OnServer(int node, const proto::Meta& meta);
  // Membership changed: a worker that left no longer holds a checkpoint back.
  void OnMembership(const std::set<int>& workers, const std::set<int>& servers, int num_servers);
  // The commit thread finished `id` (called by the scheduler under its lock).
  void FinishCommit(const std::string& id, const std::string& error);
  // The newest committed checkpoint ("" if none) and, in `uri`, its store.
  std::string LatestCommitted(std::string* uri) const {
    *uri = options_.uri;
    return enabled() ? last_committed_ : "";
  }
  const CheckpointStats& stats() const { return stats_; }

  // Starts the preemption: the next checkpoint (not the job's final one) is
  // the preemption checkpoint, taken where each worker stopped. Idempotent.
  void Preempt() { preempting_ = true; }
  // The preemption checkpoint was committed (true, `*id` its id) or
  // abandoned (true, `*id` "" and `*error` why); false while neither.
  bool PreemptionOver(std::string* id, std::string* error) const;
  // Checkpoints copied but not yet committed or abandoned.
  bool busy() const { return !writing_.empty(); }
  // Each commit (or abandoned checkpoint) is recorded in `timeline` as a
  // "checkpoint" line: when its copy began, how long until the commit, its
  // files and bytes. It must outlive the coordinator.
  void set_timeline(TimelineWriter* timeline) { timeline_ = timeline; }

 private:
  // Throws the Error the constructor's comment describes if the store holds
  // committed checkpoints.
  void RefuseEarlierJobs();

  struct Ready {
    proto::WorkerCursor cursor;
    uint64_t sequence = 0;
    bool final = false;
  };
  struct Writing {
    proto::CheckpointManifest manifest;
    std::set<int> servers_left;
    std::map<int, uint64_t> final_waiters;  // node -> request sequence
    std::string error;
    double started = 0;
    // The checkpoint the servers were asked to write changes since ("": all
    // rows); a server that cannot writes all of its own.
    std::string delta_base;
    int planned_depth = 0;
    bool complete = false;  // every file written
    bool queued = false;    // handed to the commit thread
    // Checkpoints commit in the order they were taken (CommitInOrder).
  };
  // The checkpoint the next one may be a delta of ("": it is full; with
  // `committed_only`, unless it is committed), and the depth it would then
  // have.
  std::string DeltaBase(bool committed_only, int* depth) const;
  // Queues for their commit, in order, the checkpoints whose files are all
  // written, up to the first that is not (or a delta whose base is not
  // committed yet); abandons a delta whose base was abandoned.
  void CommitInOrder();
  // Starts the next checkpoint once every live worker is at the point of the
  // first one ready: the servers are told to copy their rows.
  void TryStart(const std::set<int>& workers, const std::set<int>& servers, int num_servers);
  // Answers, without a checkpoint, each worker waiting at a periodic point
  // that another of `workers` has gone past: a worker that rejoined after the
  // others went on without it reaches points they will not come back to.
  void AnswerPassedPoints(const std::set<int>& workers);
  // Whether worker `node`, by what it reported last, is past `point`.
  bool Past(int node, const proto::WorkerCursor& point) const;
  // Whether each of `workers` is ready at `point`, or (not for the final
  // checkpoint) finished its share of that epoch before it.
  bool AllAt(const Ready& point, const std::set<int>& workers) const;
  // Preemption: whether each of `workers` stopped in `point`'s epoch (at any
  // minibatch) or finished its share of it.
  bool AllStoppedIn(const Ready& point, const std::set<int>& workers) const;
  // The checkpoint's minibatch: `first`'s, or for the preemption checkpoint
  // the furthest any ready worker went.
  uint64_t PointBatch(const Ready& first, bool preemption) const;
  void FillManifest(const std::string& id, const Ready& point, uint64_t batch,
                    const std::set<int>& workers, int num_servers,
                    proto::CheckpointManifest* manifest) const;
  // The ready workers wait: for the copy, or (final, or `preemption`) for
  // the commit.
  void TakeWaiters(Writing* writing, bool preemption);
  // Every server copied its rows: the workers waiting for the copy go on.
  void ReleaseCopyWaiters();
  // `preemption`: the answer is the preemption checkpoint's (the worker
  // stops training).
  void Answer(int node, uint64_t sequence, const std::string& error, bool preemption = false);
  void CommitLoop();

  CheckpointOptions options_;
  Send send_;
  Committed committed_;
  std::unique_ptr<CheckpointStore> store_;
  std::string resume_uri_, resume_id_;
  proto::CheckpointManifest resumed_;
  std::string last_committed_;  // newest committed (or resumed-from) id
  // Deltas since its full checkpoint, of each checkpoint committed (or
  // resumed from) by this job: a delta may build on these only.
  std::map<std::string, int> depths_;
  // The newest checkpoint whose copy began in this job (or the one resumed
  // from): the servers' rows are tracked since its copy.
  std::string last_started_;
  // The final checkpoint, ready while earlier ones were still being written
  // (with deltas on): the membership to start it with once they are done.
  struct HeldFinal {
    std::set<int> workers, servers;
    int num_servers = 0;
  };
  std::optional<HeldFinal> final_held_;
  CheckpointStats stats_;

  std::map<int, Ready> ready_;                   // workers stopped at a point
  std::map<int, proto::WorkerCursor> finished_;  // workers past their share of an epoch
  proto::TrainerState trainer_;                  // from the leading worker's last report
  // The checkpoint whose rows are being copied.
  std::string copying_;
  std::set<int> copies_left_;
  std::map<int, uint64_t> copy_waiters_;  // node -> request sequence
  std::map<std::string, Writing> writing_;
  // Preemption: started; the preemption checkpoint's id once it began; its
  // end (committed, or abandoned with `preempt_error_`).
  bool preempting_ = false;
  std::string preempt_id_;
  bool preempt_over_ = false;
  std::string preempt_error_;

  // The commit thread's queue.
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<proto::CheckpointManifest> queue_;
  bool stopping_ = false;
  std::thread commit_thread_;
  TimelineWriter* timeline_ = nullptr;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_CHECKPOINT_COORDINATOR_H_
