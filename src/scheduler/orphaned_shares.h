// OrphanedShares: the workers' shares of each epoch, and what becomes of the
// share of a worker that left.
//
// Each worker reads its own share of every epoch and reports its progress
// (cursor) with its heartbeats; at the end of its share it sends ORPHANS and
// waits. A worker that leaves makes its rank vacant: a replacement registering
// with that rank within the replacement timeout resumes where the last report
// left off. Once the timeout passes, the rest of the vacant rank's share of an
// epoch is handed out to the workers waiting at the end of theirs, a part each
// ("orphaned"). When every rank's share of an epoch is done, the waiting
// workers are answered with the number of examples the epoch read.
//
// Not synchronized: the scheduler calls it under its lock.
#ifndef KEEL_SCHEDULER_ORPHANED_SHARES_H_
#define KEEL_SCHEDULER_ORPHANED_SHARES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "checkpoint.pb.h"
#include "keel.pb.h"
#include "kv/message.h"

namespace keel {

class OrphanedShares {
 public:
  // A rank whose worker left: where it was, when (MonotonicSeconds) and why.
  struct Vacancy {
    proto::WorkerCursor cursor;
    double since = 0;
    std::string reason;
  };
  // Sends an answer to a node (the scheduler stamps it).
  using Send = std::function<void(int node_id, Message& message)>;

  // `num_workers` ranks; a vacant rank waits `replace_timeout_s` for a
  // replacement before its share is handed out.
  OrphanedShares(int num_workers, double replace_timeout_s, Send send);

  // The job resumes from `manifest`. If it was taken inside an epoch by
  // another number of workers, the rest of that epoch is their shares, from
  // their cursors (the new ranks have none in it): each is handed out whole to
  // a worker waiting at the end of that epoch (as `rank` of `shards`).
  void Inherit(const proto::CheckpointManifest& manifest);

  // A progress report (with a heartbeat) from the worker of `rank`. An
  // end-of-share report is newer than any heartbeat of its epoch.
  void OnProgress(int rank, const proto::WorkerCursor& cursor);

  // An ORPHANS request from worker node `node` of `rank`: either the end of
  // its own share, or the end of a part of an orphaned share it was handed
  // (`meta.orphan_done()`). It waits for the answer; a part that was never
  // handed out is logged and ignored.
  void OnRequest(int node, int rank, const proto::Meta& meta);

  // Worker node `node` of `rank` left for `reason`: the rank is vacant, from
  // where its last report left off (a later epoch's share: not started), and
  // the node's waits end. With no report of the rank (a scheduler started
  // again after it left), the rank resumes at the start of the latest epoch
  // another worker reported, or as done with that epoch once it is known
  // ended (its share was read before the end was announced).
  void WorkerLeft(int node, int rank, const std::string& reason);

  // A worker of an earlier run of a restarted scheduler says the scheduler
  // announced the end of `epoch` (every rank's share read): requests for it
  // and earlier epochs are answered at once.
  void EpochEnded(int epoch);

  // The vacancy of `rank`; null if it has none.
  const Vacancy* FindVacancy(int rank) const;
  // A replacement took `rank`: it is no longer vacant.
  void Fill(int rank) { vacant_.erase(rank); }

  // Answers the requests whose wait has ended with time (a replacement
  // timeout passed).
  void AnswerExpired();

  // Whether some vacant rank may still get its replacement at `now`.
  bool AwaitingReplacement(double now) const;
  const std::map<int, Vacancy>& vacancies() const { return vacant_; }

 private:
  // Per epoch: shares done, orphaned shares handed out (share -> parts, parts
  // finished), ORPHANS requests waiting (node -> sequence), and the shares of
  // another number of workers inherited from a checkpoint and not handed out
  // yet. A share is its rank, or -1 - rank for an inherited one (ShareOf).
  struct EpochWork {
    std::set<int> done;
    std::map<int, std::pair<int, std::set<int>>> orphans;
    std::map<int, uint64_t> waiting;
    std::map<int, proto::WorkerCursor> inherited;
    // Examples read: of each rank's own share (its latest report), and of
    // each handed-over part (rank, part).
    std::map<int, uint64_t> examples;
    std::map<std::pair<int, int>, uint64_t> part_examples;
  };

  // Records the end of a handed-out part; false (logged) if it was not handed out.
  bool FinishPart(int node, const proto::Meta& meta, EpochWork* work);
  // Records the end of `rank`'s own share.
  void FinishShare(int rank, const proto::WorkerCursor& cursor, EpochWork* work);
  // Answers the requests waiting for `epoch`: when every rank's share is
  // done, or with parts of a share whose worker left long enough ago.
  void TryAnswer(int epoch);
  // Hands the rest of vacant `rank`'s share of `epoch` to the waiting workers.
  void HandOut(int epoch, int rank, Vacancy* vacancy, EpochWork* work);
  // Hands each inherited share of `epoch` not handed out yet to a waiting
  // worker, whole; false if none was left to hand out.
  bool HandOutInherited(int epoch, EpochWork* work);
  // Tells the waiting workers the epoch is over and how many examples it read.
  void AnswerEpochDone(EpochWork* work);

  const int num_workers_;
  const double replace_timeout_s_;
  Send send_;
  std::map<int, proto::WorkerCursor> progress_;  // workers' last reports, by rank
  std::map<int, Vacancy> vacant_;                // by rank
  std::map<int, EpochWork> epochs_;
  int ended_ = 0;  // epochs up to this one are known to have ended (EpochEnded)
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_ORPHANED_SHARES_H_
