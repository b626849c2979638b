#include "scheduler/orphaned_shares.h"

#include <glog/logging.h>

#include <algorithm>

#include "base/time.h"
#include "scheduler/control_message.h"

namespace keel {
namespace {

// The share a cursor names: its rank, or -1 - rank for the share of a worker
// of another number of workers (inherited from a checkpoint).
int ShareOf(const proto::WorkerCursor& cursor) {
  return cursor.shards() > 0 ? -1 - cursor.rank() : cursor.rank();
}

}  // namespace

OrphanedShares::OrphanedShares(int num_workers, double replace_timeout_s, Send send)
    : num_workers_(num_workers), replace_timeout_s_(replace_timeout_s), send_(std::move(send)) {}

void OrphanedShares::Inherit(const proto::CheckpointManifest& manifest) {
  if (manifest.batch() == 0 || manifest.num_workers() == num_workers_) return;
  const int epoch = manifest.epoch();
  EpochWork& work = epochs_[epoch];
  for (int rank = 0; rank < manifest.num_workers(); ++rank) {
    proto::WorkerCursor from;
    from.set_epoch(epoch);
    for (const proto::WorkerCursor& saved : manifest.workers()) {
      if (saved.rank() == rank && saved.epoch() == epoch) from = saved;
    }
    from.set_rank(rank);
    from.set_shards(manifest.num_workers());
    if (from.epoch_done()) {
      work.done.insert(ShareOf(from));
      work.examples[ShareOf(from)] = from.examples();
    } else {
      work.inherited[ShareOf(from)] = from;
    }
  }
  LOG(INFO) << "epoch " << epoch << " was begun by " << manifest.num_workers()
            << " worker(s) and goes on with " << num_workers_ << ": the rest of "
            << work.inherited.size() << " of their shares is handed out, a whole share each, to "
            << "the workers as they ask";
}

void OrphanedShares::OnProgress(int rank, const proto::WorkerCursor& cursor) {
  proto::WorkerCursor& progress = progress_[rank];
  if (cursor.epoch() > progress.epoch() || !progress.epoch_done()) progress = cursor;
}

void OrphanedShares::OnRequest(int node, int rank, const proto::Meta& meta) {
  const int epoch = meta.cursor().epoch();
  EpochWork& work = epochs_[epoch];
  if (meta.orphan_done()) {
    if (!FinishPart(node, meta, &work)) return;
  } else {
    FinishShare(rank, meta.cursor(), &work);
  }
  work.waiting[node] = meta.sequence();
  TryAnswer(epoch);
}

bool OrphanedShares::FinishPart(int node, const proto::Meta& meta, EpochWork* work) {
  const proto::WorkerCursor& cursor = meta.cursor();
  const int share = ShareOf(cursor);
  auto handed = work->orphans.find(share);
  if (handed == work->orphans.end() || meta.orphan_part() < 0 ||
      meta.orphan_part() >= handed->second.first) {
    LOG(WARNING) << "ignored ORPHANS from node " << node << ": epoch " << cursor.epoch()
                 << " has no part " << meta.orphan_part() << " of worker " << cursor.rank()
                 << "'s share handed out";
    return false;
  }
  auto& [parts, finished] = handed->second;
  finished.insert(meta.orphan_part());
  work->part_examples[{share, meta.orphan_part()}] = cursor.examples();
  if (static_cast<int>(finished.size()) >= parts) {
    work->done.insert(share);
    LOG(INFO) << "epoch " << cursor.epoch() << ": the rest of worker " << cursor.rank()
              << "'s share has been read by " << parts << " other worker(s)";
  }
  return true;
}

void OrphanedShares::FinishShare(int rank, const proto::WorkerCursor& cursor, EpochWork* work) {
  work->done.insert(rank);
  work->examples[rank] = cursor.examples();
  proto::WorkerCursor& progress = progress_[rank];
  progress = cursor;
  progress.set_rank(rank);
  progress.set_epoch_done(true);
}

void OrphanedShares::WorkerLeft(int node, int rank, const std::string& reason) {
  Vacancy& vacancy = vacant_[rank];
  vacancy.since = MonotonicSeconds();
  vacancy.reason = reason;
  auto progress = progress_.find(rank);
  if (progress != progress_.end()) {
    vacancy.cursor = progress->second;
  } else {
    // A worker cannot be an epoch ahead of the others: an epoch starts once
    // every share of the one before is read.
    int latest = 0;
    for (const auto& [other, cursor] : progress_) latest = std::max(latest, cursor.epoch());
    vacancy.cursor.set_epoch(latest);
    vacancy.cursor.set_epoch_done(latest > 0 && latest <= ended_);
  }
  for (const auto& [epoch, work] : epochs_) {
    // Its share of a later epoch than its last report: not started.
    if (epoch > vacancy.cursor.epoch() && !work.done.count(rank)) {
      vacancy.cursor = proto::WorkerCursor();
      vacancy.cursor.set_epoch(epoch);
    }
  }
  LOG(WARNING) << "worker " << rank << " waits " << replace_timeout_s_
               << " s for a replacement (--rank " << rank << "); it was at epoch "
               << vacancy.cursor.epoch() << ", minibatch " << vacancy.cursor.batches();
  for (auto& [epoch, work] : epochs_) work.waiting.erase(node);
}

const OrphanedShares::Vacancy* OrphanedShares::FindVacancy(int rank) const {
  auto vacancy = vacant_.find(rank);
  return vacancy != vacant_.end() ? &vacancy->second : nullptr;
}

void OrphanedShares::EpochEnded(int epoch) {
  if (epoch <= ended_) return;
  ended_ = epoch;
  for (auto& [each, work] : epochs_) {
    if (each <= ended_ && !work.waiting.empty()) AnswerEpochDone(&work);
  }
}

void OrphanedShares::AnswerExpired() {
  for (auto& [epoch, work] : epochs_) {
    if (!work.waiting.empty()) TryAnswer(epoch);
  }
}

bool OrphanedShares::AwaitingReplacement(double now) const {
  for (const auto& [rank, vacancy] : vacant_) {
    if (now - vacancy.since < replace_timeout_s_) return true;
  }
  return false;
}

void OrphanedShares::TryAnswer(int epoch) {
  EpochWork& work = epochs_[epoch];
  if (work.waiting.empty()) return;
  if (epoch <= ended_) {
    // Ended under an earlier run of the scheduler: nobody else comes back to it.
    AnswerEpochDone(&work);
    return;
  }
  if (HandOutInherited(epoch, &work)) return;
  bool all_done = true;
  for (const auto& [share, parts] : work.orphans) {
    if (share < 0 && !work.done.count(share)) all_done = false;  // an inherited share
  }
  const double now = MonotonicSeconds();
  for (int rank = 0; rank < num_workers_; ++rank) {
    if (work.done.count(rank)) continue;
    all_done = false;
    auto vacancy = vacant_.find(rank);
    if (vacancy == vacant_.end() || work.orphans.count(rank) ||
        now - vacancy->second.since < replace_timeout_s_) {
      continue;  // working, being read by others, or waiting for a replacement
    }
    HandOut(epoch, rank, &vacancy->second, &work);
    return;
  }
  if (all_done) AnswerEpochDone(&work);
}

void OrphanedShares::HandOut(int epoch, int rank, Vacancy* vacancy, EpochWork* work) {
  proto::WorkerCursor from = vacancy->cursor;
  if (from.epoch() != epoch) {
    from = proto::WorkerCursor();
    from.set_epoch(epoch);
  }
  from.set_rank(rank);
  const int parts = static_cast<int>(work->waiting.size());
  work->orphans[rank] = {parts, {}};
  LOG(WARNING) << "epoch " << epoch << ": worker " << rank << " was not replaced within "
               << replace_timeout_s_ << " s; " << parts
               << " worker(s) read the rest of its share from minibatch " << from.batches();
  int part = 0;
  for (const auto& [node, sequence] : work->waiting) {
    Message reply = ControlMessage(proto::ORPHANS);
    reply.meta.set_sequence(sequence);
    *reply.meta.mutable_cursor() = from;
    reply.meta.set_orphan_part(part++);
    reply.meta.set_orphan_parts(parts);
    send_(node, reply);
  }
  work->waiting.clear();
  // A replacement that comes later finds this epoch's share taken.
  vacancy->cursor = from;
  vacancy->cursor.set_epoch_done(true);
}

bool OrphanedShares::HandOutInherited(int epoch, EpochWork* work) {
  if (work->inherited.empty()) return false;
  for (auto waiting = work->waiting.begin();
       waiting != work->waiting.end() && !work->inherited.empty();) {
    const auto [share, from] = *work->inherited.begin();
    work->inherited.erase(work->inherited.begin());
    work->orphans[share] = {1, {}};
    LOG(INFO) << "epoch " << epoch << ": node " << waiting->first << " reads the rest of worker "
              << from.rank() << " of " << from.shards() << "'s share from minibatch "
              << from.batches();
    Message reply = ControlMessage(proto::ORPHANS);
    reply.meta.set_sequence(waiting->second);
    *reply.meta.mutable_cursor() = from;
    reply.meta.set_orphan_part(0);
    reply.meta.set_orphan_parts(1);
    send_(waiting->first, reply);
    waiting = work->waiting.erase(waiting);
  }
  return true;
}

void OrphanedShares::AnswerEpochDone(EpochWork* work) {
  uint64_t examples = 0;
  for (const auto& [rank, count] : work->examples) {
    // A share handed over in parts is counted by its parts.
    if (!work->orphans.count(rank)) examples += count;
  }
  for (const auto& [part, count] : work->part_examples) examples += count;
  for (const auto& [node, sequence] : work->waiting) {
    Message reply = ControlMessage(proto::ORPHANS);
    reply.meta.set_sequence(sequence);
    reply.meta.set_epoch_examples(examples);
    send_(node, reply);
  }
  work->waiting.clear();
}

}  // namespace keel
