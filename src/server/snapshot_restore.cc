#include "server/snapshot_restore.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/time.h"
#include "base/utf8.h"
#include "server/held_copy.h"
#include "server/replacement.h"

namespace keel {

SnapshotRestore::SnapshotRestore(ServerState* state)
    : state_(*state),
      node_(state->node),
      writer_(std::make_unique<SnapshotWriter>(
          [this](const std::string& checkpoint, const proto::CheckpointFile& file,
                 const std::string& error) { ReportSnapshot(checkpoint, file, error); })) {}

void SnapshotRestore::ReportSnapshot(const std::string& checkpoint,
                                     const proto::CheckpointFile& file, const std::string& error) {
  Message report;
  report.meta.set_command(proto::SNAPSHOT);
  report.meta.set_checkpoint(checkpoint);
  *report.meta.mutable_file() = file;
  report.meta.set_error(ValidUtf8(error));
  try {
    node_->SendToScheduler(report);
  } catch (const std::exception& e) {
    LOG(WARNING) << "checkpoint " << checkpoint << ": could not report: " << e.what();
  }
}

void SnapshotRestore::RestoreOnce(const proto::ClusterView& view) {
  std::string replace_uri;
  const std::string replace_from = Replacement(*node_).restore_checkpoint(&replace_uri);
  if (restored_ || (view.resume_checkpoint().empty() && replace_from.empty())) return;
  restored_ = true;
  // A resumed job (every replica loads its ranges), or a server replacing
  // one that left (the ranges it is the only holder of).
  std::set<size_t> targets;
  for (const auto& [range, shard] : state_.shards) {
    if (shard.ready) targets.insert(range);
  }
  try {
    if (!replace_from.empty()) {
      Restore(replace_uri, replace_from, targets);
      // The copy this server kept when it was removed: its ranges reflect
      // the pushes they did then (what the scheduler compares).
      const proto::Meta& registered = node_->register_fields();
      const proto::HeldCopy& held = registered.held_copy();
      if (registered.has_held_copy() && held.uri() == replace_uri &&
          held.checkpoint() == replace_from) {
        for (const proto::RangePushes& entry : held.ranges()) {
          if (targets.count(entry.range())) state_.range_pushes.Set(entry.range(), entry.pushes());
        }
        RestoreHeldApplied(held, targets, &state_);
      }
    } else {
      Restore(view.resume_uri(), view.resume_checkpoint(), targets);
      // The rows are the checkpoint's exactly: the first checkpoint may be a
      // delta of it.
      for (size_t range : targets) {
        Shard& shard = state_.shards[range];
        shard.tracked = DeltaToken(view.resume_uri(), view.resume_checkpoint());
        for (auto& [id, table] : shard.tables) {
          table.copied_stamp = table.rows->stamp();
          table.rows->AdvanceStamp();
        }
      }
    }
  } catch (const std::exception& e) {
    LOG(ERROR) << "cannot resume: " << e.what();
    state_.Fail(std::string("cannot resume: ") + e.what());
  }
}

void SnapshotRestore::OnSnapshot(const proto::Meta& meta) {
  const double begin = MonotonicSeconds();
  uint64_t rows = 0;
  ServerSnapshot snapshot = CopyForSnapshot(meta, &rows);
  LOG(INFO) << "checkpoint " << meta.checkpoint() << ": copied " << rows
            << (snapshot.delta ? " changed rows (a delta of " + meta.delta_base() + ")" : " rows")
            << " in " << MonotonicSeconds() - begin << " s";
  Message reply;
  reply.meta.set_command(proto::SNAPSHOT);
  reply.meta.set_response(true);
  reply.meta.set_sequence(meta.sequence());
  reply.meta.set_checkpoint(meta.checkpoint());
  node_->SendToScheduler(reply);
  writer_->Write(meta.checkpoint_uri(), meta.checkpoint(), std::move(snapshot));
}

ServerSnapshot SnapshotRestore::CopyForSnapshot(const proto::Meta& meta, uint64_t* rows) {
  ServerSnapshot snapshot;
  snapshot.server_rank = node_->rank();
  // Each range is written once, by its primary.
  auto ranges = node_->ranges();
  auto primary = [&](size_t range) { return ranges && ranges->server(range) == node_->rank(); };
  const std::string base =
      meta.delta_base().empty() ? "" : DeltaToken(meta.checkpoint_uri(), meta.delta_base());
  // A delta only if every range written was tracked since the base.
  snapshot.delta = state_.track_changes && !base.empty();
  for (const auto& [range, shard] : state_.shards) {
    if (primary(range) && shard.tracked != base) snapshot.delta = false;
  }
  std::map<uint32_t, SnapshotTable> copies;
  const std::string token = DeltaToken(meta.checkpoint_uri(), meta.checkpoint());
  for (auto& [range, shard] : state_.shards) {
    if (!primary(range)) {
      shard.tracked.clear();  // a replica's rows may lag or lead the primary's copy
      continue;
    }
    snapshot.spans.emplace_back(ranges->begin(range), ranges->last(range));
    for (auto& [id, table] : shard.tables) {
      SnapshotTable& copy = copies[id];
      copy.table = id;
      const size_t before = copy.keys.size();
      AppendRows(table, &copy, snapshot.delta, ranges->begin(range), ranges->last(range));
      *rows += copy.keys.size() - before;
      if (state_.track_changes) {
        table.copied_stamp = table.rows->stamp();
        table.rows->AdvanceStamp();
        table.removed.clear();
      }
    }
    shard.tracked = state_.track_changes ? token : "";
  }
  for (auto& [id, copy] : copies) snapshot.tables.push_back(std::move(copy));
  return snapshot;
}

uint64_t SnapshotRestore::Restore(const std::string& uri, const std::string& id,
                                  const std::set<size_t>& targets) {
  const double begin = MonotonicSeconds();
  CheckpointStore store(uri);
  const std::vector<proto::CheckpointManifest> chain = store.Chain(id);
  auto ranges = node_->ranges();
  if (!ranges) throw MakeError("no cluster view to restore key ranges for");
  auto overlaps = [&](Key first, Key last) {
    for (size_t range : targets) {
      if (first <= ranges->last(range) && ranges->begin(range) <= last) return true;
    }
    return false;
  };
  uint64_t loaded = 0;
  int files = 0;
  for (size_t link = 0; link < chain.size(); ++link) {
    const proto::CheckpointManifest& manifest = chain[link];
    // Each checkpoint's files carry the whole admission state: the last
    // link's replaces the earlier ones'.
    std::set<std::pair<size_t, uint32_t>> sketches;
    for (const proto::CheckpointFile& file : manifest.files()) {
      bool relevant = file.spans().empty();
      for (const proto::KeySpan& span : file.spans()) {
        relevant |= overlaps(span.first(), span.last());
      }
      if (!relevant) continue;
      ++files;
      const std::string where = store.storage()->UriOf(manifest.id() + "/" + file.name());
      // Read a piece at a time: the file is as large as the rows it holds.
      const SnapshotFileReader snapshot = store.OpenSnapshotFile(manifest.id(), file);
      if (snapshot.outline().delta != file.delta()) {
        throw MakeError(where, ": the file is ", snapshot.outline().delta ? "a delta" : "full",
                        ", its manifest says ", file.delta() ? "a delta" : "full");
      }
      loaded += RestoreSnapshot(snapshot, where, targets, *ranges, /*fresh=*/link == 0, &sketches);
    }
  }
  RestoreClocks();
  LOG(INFO) << "resumed from checkpoint " << id
            << (chain.size() > 1
                    ? " (a full checkpoint and " + std::to_string(chain.size() - 1) + " delta(s))"
                    : "")
            << ": loaded " << loaded << " rows of " << files << " snapshot file(s) in "
            << MonotonicSeconds() - begin << " s";
  return loaded;
}

void SnapshotRestore::RestoreClocks() {
  // The rows' stamps hold their last push's clock (CopyRowsIn): the stamps
  // of the clocks a sweep may ask for are made the clocks themselves, and the
  // table's stamp counter its clock, so the next sweep removes what the
  // uninterrupted job's would have.
  for (const auto& [range, id] : std::exchange(clocks_restored_, {})) {
    ServerTable& table = state_.shards[range].tables.at(id);
    if (table.evict_after == 0) continue;
    table.clock_stamps.clear();
    const uint64_t from = table.clock > table.evict_after ? table.clock - table.evict_after : 1;
    for (uint64_t clock = from; clock <= table.clock; ++clock) {
      table.clock_stamps[clock] = static_cast<uint32_t>(clock);
    }
    table.rows->SetStampCounter(static_cast<uint32_t>(table.clock));
  }
}

void SnapshotRestore::RestoreCounters(const SnapshotTable& saved, const std::string& where,
                                      size_t range, Key first, Key last, ServerTable* table,
                                      std::set<std::pair<size_t, uint32_t>>* sketches) {
  for (const RangeSketch& set : saved.sketches) {
    if (set.last < first || last < set.first) continue;
    if (set.width != table->admit_sketch_width) {
      LOG(WARNING) << where << ": table " << saved.table << "'s admission counters are "
                   << set.width << " wide, this job's " << table->admit_sketch_width
                   << " (--admit_sketch_mib changed): admission counts start again";
      continue;
    }
    AdmissionSketch sketch(set.depth, set.width, set.counters);
    if (sketches->insert({range, saved.table}).second || !table->admission) {
      table->admission = std::make_unique<AdmissionSketch>(std::move(sketch));
    } else {
      table->admission->Merge(sketch);
    }
  }
}

uint64_t SnapshotRestore::RestoreSnapshot(const SnapshotFileReader& file, const std::string& where,
                                          const std::set<size_t>& targets, const RangeMap& ranges,
                                          bool fresh,
                                          std::set<std::pair<size_t, uint32_t>>* sketches) {
  const ServerSnapshot& snapshot = file.outline();
  // A full file replaces the rows of its spans: rows there that it lacks
  // were removed before it was written.
  if (!snapshot.delta && !fresh) {
    for (size_t range : targets) {
      for (auto& [id, table] : state_.shards[range].tables) {
        std::vector<Key> doomed;
        table.rows->ForEach([&](Key key, const float*) {
          for (const auto& [first, last] : snapshot.spans) {
            if (first <= key && key <= last) {
              doomed.push_back(key);
              return;
            }
          }
        });
        for (Key key : doomed) table.rows->Erase(key);
      }
    }
  }
  uint64_t loaded = 0;
  for (size_t t = 0; t < snapshot.tables.size(); ++t) {
    const SnapshotTable& saved = snapshot.tables[t];
    for (size_t range : targets) {
      ServerTable& table =
          state_.TableFor(state_.shards[range], range, saved.table, saved.weight_width);
      if (static_cast<uint32_t>(table.rows->row_width()) != saved.row_width) {
        throw MakeError(where, ": table ", saved.table, " rows have ", saved.row_width,
                        " floats (weights and optimizer state); this job's optimizer ",
                        table.optimizer->name(), " needs ", table.rows->row_width(),
                        " (resume with the optimizer the checkpoint was written with)");
      }
      const Key first = ranges.begin(range), last = ranges.last(range);
      for (auto it = std::lower_bound(saved.deleted.begin(), saved.deleted.end(), first);
           it != saved.deleted.end() && *it <= last; ++it) {
        table.rows->Erase(*it);
      }
    }
    // The rows, a chunk at a time, each into the target range it falls in.
    file.ForEachChunk(t, [&](const SnapshotTable& chunk) {
      if (chunk.keys.empty()) return;
      for (size_t range : targets) {
        const Key first = ranges.begin(range), last = ranges.last(range);
        if (last < chunk.keys.front() || chunk.keys.back() < first) continue;
        ServerTable& table = state_.shards[range].tables.at(saved.table);
        loaded += CopyRowsIn(chunk, first, last, table.rows.get());
      }
    });
    for (size_t range : targets) {
      ServerTable& table = state_.shards[range].tables.at(saved.table);
      const Key first = ranges.begin(range), last = ranges.last(range);
      if (table.admit_after > 1) {
        RestoreCounters(saved, where, range, first, last, &table, sketches);
      }
      for (const RangeClock& clock : saved.clocks) {
        if (clock.first <= last && first <= clock.last) {
          table.clock = std::max(table.clock, clock.clock);
          table.push_clock = 0;
          clocks_restored_.insert({range, saved.table});
        }
      }
    }
  }
  return loaded;
}

}  // namespace keel
