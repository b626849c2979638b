// Shard: a server's replica of one key range, and the row copies taken of it.
//
// A shard holds the range's tables (rows and the optimizer that updates
// them), the push sequences applied to it by each worker (so a push is
// applied once however often it arrives), and where this server stands in the
// range's replica chain. The copy functions serve checkpoints (SNAPSHOT,
// resume) and REPLICA_SYNC. Not synchronized: a server touches its shards on
// its receive thread only.
#ifndef KEEL_SERVER_SHARD_H_
#define KEEL_SERVER_SHARD_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "kv/admission_sketch.h"
#include "kv/keys.h"
#include "kv/message.h"
#include "kv/optimizer.h"
#include "kv/parameter_table.h"
#include "server/dedupe_window.h"
#include "server/push_staleness.h"

namespace keel {

// One table of a shard: its rows and the optimizer that applies pushes to them.
struct ServerTable {
  std::unique_ptr<ParameterTable> rows;
  std::unique_ptr<Optimizer> optimizer;
  // One more optimizer, made from the same options, per apply thread past
  // the first (ApplyThreads; empty with one apply thread).
  std::vector<std::unique_ptr<Optimizer>> apply_optimizers;
  // Pushes applied to it here (PushStaleness's version).
  uint64_t version = 0;
  // Steps scaled by the pushes' staleness (OptimizerOptions::staleness_aware).
  bool staleness_aware = false;
  // Delta checkpoints: rows->stamp() when the shard's tracked copy was taken
  // (rows stamped after it changed since), and the keys whose rows were
  // removed since.
  uint32_t copied_stamp = 0;
  std::vector<Key> removed;
  // Key admission (TableSpec::admit_after): the pushes of keys without rows
  // counted; nullptr when every key is admitted at once.
  std::unique_ptr<AdmissionSketch> admission;  // made at the first push decided here
  uint32_t admit_after = 0;
  uint32_t admit_sketch_width = 0;
  // Eviction (TableSpec::evict_after): the table's clock (how often a push
  // came with a clock above every one before: `push_clock`), and the rows'
  // stamp when each recent clock began.
  uint32_t evict_after = 0;
  int64_t push_clock = 0;
  uint64_t clock = 0;
  std::map<uint64_t, uint32_t> clock_stamps;
};

// This server's replica of one key range.
struct Shard {
  std::map<uint32_t, ServerTable> tables;
  // Pushes applied, by the worker that sent them (node id).
  std::unordered_map<int, DedupeWindow> applied;
  // The table versions pulls read, for the staleness of the pushes after them.
  PushStaleness reads;
  // False until the range's rows came from the predecessor in its chain;
  // pushes passed down meanwhile wait in `held`.
  bool ready = true;
  std::vector<Message> held;
  int asked = -1;               // node id the range was last asked of
  uint64_t asked_sequence = 0;  // ... and the request's sequence, which its answer echoes
  // The copy being received: pages taken so far and their rows.
  uint32_t copy_pages = 0;
  uint64_t copy_rows = 0;
  // Replicas behind this one that asked for the range before this server
  // had it itself: node id and request sequence, answered once it has.
  std::vector<std::pair<int, uint64_t>> askers;
  bool primary = false;
  // Live resharding: this server copies the range before it joins the
  // range's chain (the view lists it as pre-copying; it takes no pushes
  // then), in rounds: the whole range, then the rows changed during the
  // round before, until they stop shrinking; `precopied` after the last.
  // `copied_from`: the node whose rows (and stamps) this copy is of, so that
  // the hand-over asks it only for what changed since.
  bool precopy = false;
  bool precopied = false;
  int copied_from = -1;
  int precopy_rounds = 0;
  uint64_t precopy_last_rows = 0;
  // The first round's next slice, and the rows the round has brought so far.
  bool slicing = false;  // the request out asks for a slice
  uint32_t precopy_slice = 0;
  int asked_slice_source = -1;
  uint64_t precopy_round_rows = 0;
  // As the source of such copies: per node that pre-copied the range from
  // here, each table's stamp when it was taken (rows stamped after it changed
  // since), for the delta that hands the range over; and each table's
  // generation at a sliced round's first slice (a table rebuilt since, its
  // rows moved, is sent whole).
  std::map<int, std::map<uint32_t, uint32_t>> precopies;
  std::map<int, std::map<uint32_t, uint64_t>> precopy_generations;
  // Delta checkpoints: the checkpoint (DeltaToken) this shard's rows were
  // last copied for as the range's primary, its tables' stamps advanced
  // then; "" when a delta could miss a change (the rows came from a copy or a
  // load since, or this server was a replica then).
  std::string tracked;
  // When this server became the range's primary after the start (a
  // promotion, or a replacement): the first push it then serves is logged
  // with the time since, which measures recovery. 0: not waiting for one.
  double primary_since = 0;
};

// The slices a pre-copy's whole round comes in (ShardCopy.slices).
constexpr uint32_t kPrecopySlices = 16;

// Names checkpoint `id` of store `uri` for Shard::tracked.
inline std::string DeltaToken(const std::string& uri, const std::string& id) {
  return uri + "\n" + id;
}

// Appends `table`'s rows (weights and optimizer state), in table order, to
// `copy`, sets its widths, and adds its admission counters to copy's.
// `changed_only`: only the rows changed since table.copied_stamp, and the
// keys removed since.
// The admission counters, if any, are those of key range [first, last].
void AppendRows(const ServerTable& table, SnapshotTable* copy, bool changed_only = false,
                Key first = 0, Key last = ~Key{0});

// Key admission: the indices of `keys` to apply to `table` (those with rows,
// and those whose push, counted now in table.admission, is their
// admit_after-th or later) into `kept`. Returns how many of them were
// admitted now (had no row).
uint64_t AdmitKeys(const Key* keys, size_t count, const ServerTable& table,
                   std::vector<size_t>* kept);

// `table`'s rows as table `id`, sorted by key: those in slots
// [slot_begin, slot_end) (ForEachInSlots), or if `since` is not 0 those
// stamped after it (ForEachChangedSince).
SnapshotTable SortedCopy(uint32_t id, const ServerTable& table, uint32_t since = 0,
                         size_t slot_begin = 0, size_t slot_end = ~size_t{0});

// Copies the rows of `saved` whose keys lie in [first, last] into `rows`
// (inserting them), whole: weights and optimizer state; with eviction's last
// push clocks, each row's stamp is set to its clock. `saved` must be sorted
// by key and have `rows`'s row width. Returns the number of rows copied.
uint64_t CopyRowsIn(const SnapshotTable& saved, Key first, Key last, ParameterTable* rows);

// Whether `shard`, this server's replica of key range `range`, keeps the
// at-most-once records (Shard::applied) of workers that left `view`: while it
// waits for its copy or holds pushes, or while another replica of the range
// waits for its copy. A departed worker's pushes may then still be held on
// their way down the chain, and serving them after the copy must find them
// recorded (in the copy), or they would be applied a second time.
bool KeepsDepartedRecords(const proto::ClusterView& view, size_t range, const Shard& shard);

// How long a server keeps a departed worker's push records after it first
// sees a view without the worker (KVServer::ForgetDeparted): far above the
// time a push already passed down a chain takes to arrive, even behind a
// receive thread busy with a checkpoint's copy (25 s measured at 3.5x10^7
// rows). Memory: at most a window (4,096 sequences) a departed worker a
// range, for that long.
constexpr double kDepartedRecordsGraceS = 120;

}  // namespace keel

#endif  // KEEL_SERVER_SHARD_H_
