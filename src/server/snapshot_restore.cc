// KVServer's checkpoints: copying its rows at a SNAPSHOT (written by
// SnapshotWriter) and loading them back when a job resumes or a server
// replaces one that left.
#include <glog/logging.h>

#include <map>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "server/kv_server.h"

namespace keel {

void KVServer::OnSnapshot(const proto::Meta& meta) {
  const double begin = MonotonicSeconds();
  uint64_t rows = 0;
  ServerSnapshot snapshot = CopyForSnapshot(&rows);
  LOG(INFO) << "checkpoint " << meta.checkpoint() << ": copied " << rows << " rows in "
            << MonotonicSeconds() - begin << " s";
  Message reply;
  reply.meta.set_command(proto::SNAPSHOT);
  reply.meta.set_response(true);
  reply.meta.set_sequence(meta.sequence());
  reply.meta.set_checkpoint(meta.checkpoint());
  node_->SendToScheduler(reply);
  writer_->Write(meta.checkpoint_uri(), meta.checkpoint(), std::move(snapshot));
}

ServerSnapshot KVServer::CopyForSnapshot(uint64_t* rows) const {
  ServerSnapshot snapshot;
  snapshot.server_rank = node_->rank();
  // Each range is written once, by its primary.
  auto ranges = node_->ranges();
  std::map<uint32_t, SnapshotTable> copies;
  for (const auto& [range, shard] : shards_) {
    if (!ranges || ranges->server(range) != node_->rank()) continue;
    snapshot.spans.emplace_back(ranges->begin(range), ranges->last(range));
    for (const auto& [id, table] : shard.tables) {
      SnapshotTable& copy = copies[id];
      copy.table = id;
      AppendRows(table, &copy);
      *rows += table.rows->size();
    }
  }
  for (auto& [id, copy] : copies) snapshot.tables.push_back(std::move(copy));
  return snapshot;
}

void KVServer::Restore(const std::string& uri, const std::string& id,
                       const std::set<size_t>& targets) {
  const double begin = MonotonicSeconds();
  CheckpointStore store(uri);
  const proto::CheckpointManifest manifest = store.ReadManifest(id);
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
  for (const proto::CheckpointFile& file : manifest.files()) {
    bool relevant = file.spans().empty();
    for (const proto::KeySpan& span : file.spans()) relevant |= overlaps(span.first(), span.last());
    if (!relevant) continue;
    ++files;
    const std::string where = store.storage()->UriOf(id + "/" + file.name());
    const ServerSnapshot snapshot = DecodeSnapshot(store.ReadSnapshotFile(id, file), where);
    loaded += RestoreSnapshot(snapshot, where, targets, *ranges);
  }
  LOG(INFO) << "resumed from checkpoint " << id << ": loaded " << loaded << " rows of " << files
            << " snapshot file(s) in " << MonotonicSeconds() - begin << " s";
}

uint64_t KVServer::RestoreSnapshot(const ServerSnapshot& snapshot, const std::string& where,
                                   const std::set<size_t>& targets, const RangeMap& ranges) {
  uint64_t loaded = 0;
  for (const SnapshotTable& saved : snapshot.tables) {
    for (size_t range : targets) {
      ServerTable& table = TableFor(shards_[range], range, saved.table, saved.weight_width);
      if (static_cast<uint32_t>(table.rows->row_width()) != saved.row_width) {
        throw MakeError(where, ": table ", saved.table, " rows have ", saved.row_width,
                        " floats (weights and optimizer state); this job's optimizer ",
                        table.optimizer->name(), " needs ", table.rows->row_width(),
                        " (resume with the optimizer the checkpoint was written with)");
      }
      loaded += CopyRowsIn(saved, ranges.begin(range), ranges.last(range), table.rows.get());
    }
  }
  return loaded;
}

}  // namespace keel
