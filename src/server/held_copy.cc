#include "server/held_copy.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "io/checkpoint.h"
#include "kv/node.h"
#include "server/shard.h"
#include "server/snapshot_writer.h"

namespace keel {
namespace {

constexpr char kDescription[] = "held_copy.pb";
constexpr char kApplied[] = "applied.pb";

}  // namespace

std::string HeldCopyFolder(int pid) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string root = tmp && *tmp ? tmp : "/tmp";
  return root + "/keel-server-copy-" + std::to_string(pid);
}

proto::HeldCopy WriteHeldCopy(const ServerState& state, int rank, const std::string& folder) {
  const double begin = MonotonicSeconds();
  std::error_code ignored;
  std::filesystem::remove_all(folder, ignored);
  MakeDirectories(folder);
  auto ranges = state.node->ranges();
  if (!ranges) throw MakeError("no cluster view: no key range to keep");
  proto::HeldCopy held;
  held.set_uri(folder);
  held.set_checkpoint(CheckpointId(0, state.view_epoch));
  held.set_node_id(state.node->id());
  held.set_view_epoch(state.view_epoch);
  ServerSnapshot snapshot;
  snapshot.server_rank = rank;
  std::map<uint32_t, SnapshotTable> copies;
  proto::HeldApplied applied;
  uint64_t rows = 0;
  for (const auto& [range, shard] : state.shards) {
    if (!shard.ready || range >= ranges->num_ranges() || !ranges->Holds(range, rank)) continue;
    snapshot.spans.emplace_back(ranges->begin(range), ranges->last(range));
    for (const auto& [id, table] : shard.tables) {
      SnapshotTable& copy = copies[id];
      copy.table = id;
      const size_t before = copy.keys.size();
      AppendRows(table, &copy, /*changed_only=*/false, ranges->begin(range), ranges->last(range));
      rows += copy.keys.size() - before;
    }
    for (const auto& [sender, window] : shard.applied) {
      proto::HeldApplied::Sender* entry = applied.add_senders();
      entry->set_range(static_cast<uint32_t>(range));
      entry->set_sender(sender);
      for (uint64_t sequence : window.sequences()) entry->add_sequences(sequence);
    }
    proto::RangePushes* entry = held.add_ranges();
    entry->set_range(static_cast<uint32_t>(range));
    entry->set_pushes(state.range_pushes.Get(range));
  }
  for (auto& [id, copy] : copies) snapshot.tables.push_back(std::move(copy));
  proto::CheckpointFile written;
  std::string error;
  {
    SnapshotWriter writer([&](const std::string&, const proto::CheckpointFile& file,
                              const std::string& why) {
      written = file;
      error = why;
    });
    writer.Write(folder, held.checkpoint(), std::move(snapshot));
  }  // the writer writes what it was given before it stops
  if (!error.empty()) throw MakeError("cannot keep a copy of the key ranges: ", error);
  proto::CheckpointManifest manifest;
  manifest.set_format_version(1);
  manifest.set_id(held.checkpoint());
  manifest.set_created(UtcTimestamp());
  manifest.set_num_servers(1);
  *manifest.add_files() = written;
  WriteFileAtomically(folder + "/" + kApplied, applied.SerializeAsString());
  CheckpointStore(folder).Commit(manifest);
  LOG(INFO) << "kept " << rows << " rows of " << held.ranges_size() << " key range(s) in "
            << folder << " in " << MonotonicSeconds() - begin << " s";
  return held;
}

void SaveHeldCopy(const proto::HeldCopy& held, const std::string& folder) {
  WriteFileAtomically(folder + "/" + kDescription, held.SerializeAsString());
}

proto::HeldCopy LoadHeldCopy(const std::string& folder) {
  const std::string path = folder + "/" + kDescription;
  proto::HeldCopy held;
  if (!held.ParseFromString(ReadFile(path))) {
    throw MakeError(path, ": not a description of a kept copy");
  }
  return held;
}

void RestoreHeldApplied(const proto::HeldCopy& held, const std::set<size_t>& ranges,
                        ServerState* state) {
  const std::string path = held.uri() + "/" + kApplied;
  proto::HeldApplied applied;
  if (!applied.ParseFromString(ReadFile(path))) {
    throw MakeError(path, ": not the at-most-once records of a kept copy");
  }
  for (const proto::HeldApplied::Sender& entry : applied.senders()) {
    if (!ranges.count(entry.range())) continue;
    DedupeWindow& window = state->shards[entry.range()].applied[entry.sender()];
    for (uint64_t sequence : entry.sequences()) window.Insert(sequence);
  }
}

}  // namespace keel
