// SchedulerLink: a worker's exchanges with the scheduler, over its Node's
// control requests (kv/node.h).
//
// What the worker tells the scheduler: where it is in its shard (every
// heartbeat carries it, so a replacement can take over from there), the
// job's progress as its display shows it, the end of its share of each epoch
// and the end of its job. What it asks: at the end of its share of an epoch,
// for parts of departed workers' shares until every rank's share is done; at
// a checkpoint point, for the checkpoint. What the scheduler told it when it
// registered: where a worker that took over a departed worker's rank goes on.
// A restarted scheduler learns from it, when the node registers again, its
// cursor, the latest epoch whose end it heard of, its latest epoch-done
// report and the latest of what its PROGRESS messages said.
//
// One per worker node, for as long as the node runs: it adds its fields to
// the node's heartbeats and re-registrations until it is destroyed. All
// methods are safe to call from any thread.
#ifndef KEEL_WORKER_SCHEDULER_LINK_H_
#define KEEL_WORKER_SCHEDULER_LINK_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "keel.pb.h"
#include "kv/node.h"

namespace keel {

// The scheduler could not take a checkpoint (a server left before writing
// its snapshot, storage failed): that checkpoint is lost, the cluster is not.
class CheckpointFailed : public Error {
 public:
  using Error::Error;
};

class SchedulerLink {
 public:
  // `node` must outlive the link.
  explicit SchedulerLink(Node& node);
  ~SchedulerLink();
  SchedulerLink(const SchedulerLink&) = delete;
  SchedulerLink& operator=(const SchedulerLink&) = delete;

  Node& node() const { return node_; }

  // Where the worker is in its shard; sent with every heartbeat, so a
  // replacement can take over from there. `reading_seconds`: since this
  // process began reading the cursor's epoch (0: not known), for the job's
  // rate.
  void SetProgress(const proto::WorkerCursor& cursor, double reading_seconds);
  // What its heartbeats carry for the job's progress display beside the
  // cursor (the job's epochs, the examples of its share).
  void SetProgressReport(const proto::ProgressReport& report);
  // Sends a PROGRESS message to the scheduler now (no answer awaited). One
  // that goes while the scheduler restarts is lost there; the restarted
  // scheduler is sent the latest of each field of every report (the job's
  // epochs, the share, the latest decided epoch, the outcome) once this node
  // has registered with it again.
  void ReportProgress(const proto::ProgressReport& report);

  // Set when this node took over a rank whose previous worker left: where
  // that worker's last progress report left off.
  bool has_takeover() const;
  proto::WorkerCursor takeover() const;

  // At the end of its share of `epoch` (`share`: its cursor there) and of
  // each orphaned part it was handed (`finished`, with the examples of that
  // part): blocks until every rank's share of the epoch is done (returns
  // false and sets `*epoch_examples`, the examples all workers read) or the
  // scheduler hands over part of a share whose worker left (returns true and
  // fills `work`, `part`, `parts`).
  bool TakeOrphanWork(const proto::WorkerCursor& share, const proto::WorkerCursor* finished,
                      int finished_part, int finished_parts, proto::WorkerCursor* work, int* part,
                      int* parts, uint64_t* epoch_examples, double timeout_s);
  // Reports the end of its share of an epoch (no answer awaited).
  void ReportEpochDone(const proto::WorkerCursor& cursor);

  // Stops at a checkpoint point. Sends `cursor` (and, from the leading
  // worker, `trainer`) to the scheduler and blocks until it answers: once the
  // servers have copied their rows (`final`: once the checkpoint is
  // committed). Throws CheckpointFailed with the scheduler's reason if the
  // checkpoint failed (the job itself may go on), Error after `timeout_s`.
  // With `preempt`: the preemption checkpoint; the answer comes once it is
  // committed. Throws Error too if the scheduler ends the job meanwhile.
  void Checkpoint(const proto::WorkerCursor& cursor, const proto::TrainerState* trainer, bool final,
                  double timeout_s, bool preempt = false);
  // The checkpoint it last stopped at was the preemption checkpoint
  // (committed): it trains no further.
  bool preempt_checkpointed() const { return preempt_checkpointed_.load(); }

  // Tells the scheduler the job finished (`error` empty on success).
  void ReportDone(const std::string& error);

 private:
  // What the node's heartbeats carry: the cursor and the progress report.
  void FillHeartbeat(proto::Meta* beat) const;
  // What a restarted scheduler learns from the node's REGISTER: the cursor
  // (where a departed worker's replacement resumes comes from the others) and
  // the latest epoch whose end the scheduler announced.
  void FillRejoin(proto::Meta* request) const;
  // Sent again to a restarted scheduler once registered with it: where this
  // worker's share ended (the others' checkpoints must not wait for it there)
  // and the latest progress it reported (its figures, its display).
  std::vector<proto::Meta> ResendAfterRejoin() const;

  Node& node_;
  mutable std::mutex mutex_;
  proto::WorkerCursor progress_;
  double progress_reading_seconds_ = 0;
  bool has_progress_ = false;
  proto::ProgressReport progress_report_;
  bool has_progress_report_ = false;
  // The latest epoch whose end the scheduler announced (ORPHANS answered with
  // no work).
  int epoch_ended_ = 0;
  // The latest report of this worker's share of an epoch done.
  proto::Meta epoch_done_report_;
  // The latest of each field its PROGRESS messages carried.
  proto::ProgressReport progress_reported_;
  bool has_progress_reported_ = false;
  std::atomic<bool> preempt_checkpointed_{false};
};

}  // namespace keel

#endif  // KEEL_WORKER_SCHEDULER_LINK_H_
