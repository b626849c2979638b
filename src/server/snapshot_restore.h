// SnapshotRestore: a server's checkpoints: copying its rows at the
// scheduler's SNAPSHOT (written in the background by SnapshotWriter, and
// reported to the scheduler) and loading them back, once, when a job resumes
// or a server replaces one that left.
//
// On a SNAPSHOT the rows of the ranges this server is primary of are copied
// (only those changed since the delta base, if every such range was tracked
// since it), the scheduler is answered, and the copy is written. A view naming
// a checkpoint to resume from (or a registration naming one for a
// replacement) loads the rows of this server's ready ranges from it, its
// chain's full checkpoint and then each delta; a load that fails makes the
// server fail (ServerState::Fail) rather than serve a partial state.
//
// Threading: OnSnapshot and RestoreOnce run on the node's receive thread
// (they touch the shards). The writer's reports go to the scheduler from the
// writer thread.
#ifndef KEEL_SERVER_SNAPSHOT_RESTORE_H_
#define KEEL_SERVER_SNAPSHOT_RESTORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "io/checkpoint.h"
#include "kv/message.h"
#include "server/server_state.h"
#include "server/snapshot_writer.h"

namespace keel {

class SnapshotRestore {
 public:
  // Starts the writer thread. `state` must outlive this.
  explicit SnapshotRestore(ServerState* state);
  SnapshotRestore(const SnapshotRestore&) = delete;
  SnapshotRestore& operator=(const SnapshotRestore&) = delete;

  // The scheduler's SNAPSHOT: copies, answers, and queues the copy's writing.
  void OnSnapshot(const proto::Meta& meta);
  // Loads the checkpoint the view (or the registration, for a replacement)
  // names, once, into the shards this server has.
  void RestoreOnce(const proto::ClusterView& view);
  // Writes and reports the snapshots already copied, then stops the writer;
  // call before the node stops. No SNAPSHOT may come after.
  void FinishWriting() { writer_.reset(); }

 private:
  // Tells the scheduler that a snapshot was written (or why not).
  void ReportSnapshot(const std::string& checkpoint, const proto::CheckpointFile& file,
                      const std::string& error);
  // Copies the rows of the ranges this server is primary of for the
  // checkpoint `meta` names (adding their count to `rows`): only those
  // changed since meta.delta_base if every such range was tracked since it
  // (Shard::tracked), else all. Then they are tracked from this copy on.
  ServerSnapshot CopyForSnapshot(const proto::Meta& meta, uint64_t* rows);
  // Loads the rows of the ranges in `ranges` from checkpoint `id` in `uri`:
  // its chain's full checkpoint, then each delta. Returns the rows loaded.
  uint64_t Restore(const std::string& uri, const std::string& id, const std::set<size_t>& ranges);
  // Eviction after a restore: the tables whose clocks came back take their
  // rows' last push clocks as stamps (see snapshot_restore.cc).
  void RestoreClocks();
  // Admission counters: the first set of a checkpoint that covers a target
  // range replaces its table's, later ones add theirs (`sketches` lists the
  // (range, table) pairs taken in this checkpoint).
  void RestoreCounters(const SnapshotTable& saved, const std::string& where, size_t range,
                       Key first, Key last, ServerTable* table,
                       std::set<std::pair<size_t, uint32_t>>* sketches);
  // Applies to `targets` what `file` (at `where`) holds: its removed keys
  // and rows (read a chunk at a time), and for a full one the removal first
  // of every row of its spans (unless `fresh`: the tables are empty).
  // Returns the rows loaded.
  uint64_t RestoreSnapshot(const SnapshotFileReader& file, const std::string& where,
                           const std::set<size_t>& targets, const RangeMap& ranges, bool fresh,
                           std::set<std::pair<size_t, uint32_t>>* sketches);

  ServerState& state_;
  Node* const node_;
  bool restored_ = false;
  // (range, table) whose eviction clocks a restore took, for RestoreClocks.
  std::set<std::pair<size_t, uint32_t>> clocks_restored_;
  std::unique_ptr<SnapshotWriter> writer_;
};

}  // namespace keel

#endif  // KEEL_SERVER_SNAPSHOT_RESTORE_H_
