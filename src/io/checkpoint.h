// Checkpoints: the snapshot file format and the checkpoint folder layout.
//
// A checkpoint is a folder `<root>/ckpt-<epoch>-<batch>/` in some Storage: one
// snapshot file per server (`server-<rank>.snap`: every row of every table the
// server held, weights and optimizer state, sorted by key, with a checksum in
// its last 8 bytes), then `manifest.json`, written last. A folder without a
// manifest is not a checkpoint. `<root>/LATEST` names the newest committed
// checkpoint. Checkpoint `ckpt-E-B` resumes training at epoch E after B
// minibatches per worker (B = 0: between epochs).
//
// Delta checkpoints: a checkpoint whose manifest names `delta_of` holds, in
// its files marked `delta`, only the rows changed since that checkpoint and
// the keys whose rows were removed (a file not marked delta replaces the rows
// of its key spans whole). Its state is that of its chain: the full checkpoint
// at the chain's root, then each delta in order (Chain). A checkpoint is
// deleted only once no kept checkpoint's chain needs it (Prune).
#ifndef KEEL_IO_CHECKPOINT_H_
#define KEEL_IO_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint.pb.h"
#include "io/storage.h"

namespace keel {

// "ckpt-000002-000000120": sorts in training order.
std::string CheckpointId(int epoch, uint64_t batch);
std::string SnapshotFileName(int server_rank);

// Key admission's counters of one key range [first, last]: depth x width.
struct RangeSketch {
  uint64_t first = 0, last = 0;
  uint32_t depth = 0, width = 0;
  std::vector<uint16_t> counters;
};

// Eviction's clock of one key range [first, last]: the table's clock there.
struct RangeClock {
  uint64_t first = 0, last = 0;
  uint64_t clock = 0;
};

// The rows of one table, sorted by key: keys.size() x row_width floats.
struct SnapshotTable {
  uint32_t table = 0;
  uint32_t weight_width = 0;
  uint32_t row_width = 0;  // weights, then the optimizer's state
  std::vector<uint64_t> keys;
  std::vector<float> rows;
  // A delta's keys whose rows were removed since its base, sorted (none in a
  // full snapshot).
  std::vector<uint64_t> deleted;
  // Key admission's counters, one set per key range (none: empty).
  std::vector<RangeSketch> sketches;
  // Eviction (none: empty): each range's table clock, and each row's clock
  // of its last push there (keys.size() of them).
  std::vector<RangeClock> clocks;
  std::vector<uint64_t> pushed_at;
};

struct ServerSnapshot {
  int server_rank = 0;
  // The rows changed since the checkpoint the manifest's delta_of names, not
  // all rows of the spans.
  bool delta = false;
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // [first, last] key ranges held
  std::vector<SnapshotTable> tables;
};

// Writes the snapshot file's bytes to `sink` in order, in pieces of at most
// about 1 MiB besides the tables' key and row arrays, which go out as they are
// (nothing is copied whole); returns the checksum, also its last 8 bytes.
// Every table's keys must be sorted.
uint64_t WriteSnapshot(const ServerSnapshot& snapshot, const Storage::PieceSink& sink);
// The file's bytes whole (WriteSnapshot gathered); its checksum is in its
// last 8 bytes and in `*checksum`.
std::string EncodeSnapshot(const ServerSnapshot& snapshot, uint64_t* checksum);
// Sorts each table's rows by key in place: 4 bytes a row besides the rows
// (8 past 2^32 rows), where a sorted copy would take as much as the rows.
void SortSnapshotTables(ServerSnapshot* snapshot);
// Decodes a whole snapshot file from memory (what a fuzz target calls).
// Checks the length and checksum first, then the magic and version, and every
// count and width against sane bounds and the bytes left before allocating
// for it; spans non-empty, tables ascending, keys strictly ascending. Throws
// Error naming `where`, the field and its byte offset.
ServerSnapshot DecodeSnapshot(std::string_view bytes, const std::string& where);

// A snapshot file read from storage a piece at a time, never whole, with
// DecodeSnapshot's checks: what a restore and a verification read, so that a
// server's memory holds its table and not also the file and its decoding.
// `storage` must outlive it. Not synchronized.
class SnapshotFileReader {
 public:
  // Streams the file's `size` bytes once to check its checksum (against
  // `expected`, in hex, too, unless empty: a manifest's), then reads its
  // header and each table's fixed part, removed keys, counters and clocks.
  // Throws Error naming `where`, the field and its byte offset.
  SnapshotFileReader(Storage* storage, std::string key, uint64_t size, std::string where,
                     const std::string& expected = "");

  // The file without its tables' keys, rows and last push clocks.
  const ServerSnapshot& outline() const { return outline_; }
  uint64_t checksum() const { return checksum_; }
  uint64_t rows(size_t table) const { return arrays_.at(table).rows; }
  // Calls `take` with table `table`'s rows in key order, `chunk_rows` at a
  // time: a SnapshotTable of the table's id and widths holding that chunk's
  // keys, rows and last push clocks only. Throws Error naming the row if the
  // keys are not strictly ascending, or if the storage fails.
  void ForEachChunk(size_t table, const std::function<void(const SnapshotTable&)>& take,
                    size_t chunk_rows = size_t{1} << 20) const;

 private:
  struct Arrays {
    uint64_t rows = 0;
    uint64_t keys_at = 0, rows_at = 0, pushed_at_at = 0;  // 0: no clocks
  };
  std::string Fetch(uint64_t offset, uint64_t length) const;

  Storage* storage_;
  std::string key_, where_;
  uint64_t checksum_ = 0;
  ServerSnapshot outline_;
  std::vector<Arrays> arrays_;
};

// The checkpoints under one storage root.
class CheckpointStore {
 public:
  // Throws Error for a bad URI.
  explicit CheckpointStore(const std::string& uri);

  const std::string& uri() const { return uri_; }
  Storage* storage() { return storage_.get(); }

  // Committed checkpoints (those with a manifest), oldest first.
  std::vector<std::string> Committed();
  // Folders without a manifest (abandoned or still being written).
  std::vector<std::string> Incomplete();
  // The id LATEST names; "" when there is none.
  std::string Latest();

  // Throws NotFoundError (no manifest: not a checkpoint) or Error (unreadable,
  // larger than a manifest can be, or not valid: ManifestFromJson).
  proto::CheckpointManifest ReadManifest(const std::string& id);
  // The bytes of a snapshot file `file` of the manifest of `id` lists, once
  // their size is the manifest's: a file of another size is refused, naming it
  // and both sizes, without being read whole. Throws Error.
  std::string ReadSnapshotFile(const std::string& id, const proto::CheckpointFile& file);
  // The same file read a piece at a time (SnapshotFileReader), once its size
  // is the manifest's.
  SnapshotFileReader OpenSnapshotFile(const std::string& id, const proto::CheckpointFile& file);
  void PutFile(const std::string& id, const std::string& name, std::string_view bytes);
  // PutFile of the bytes `produce` hands its sink piece by piece
  // (Storage::PutPieces); returns their count.
  uint64_t PutFilePieces(const std::string& id, const std::string& name,
                         const std::function<void(const Storage::PieceSink&)>& produce);

  // Writes the manifest, then points LATEST at it unless LATEST already names
  // a newer checkpoint.
  void Commit(const proto::CheckpointManifest& manifest);
  // Deletes all but the newest `keep` committed checkpoints and the
  // checkpoints their chains need, and incomplete folders older than the
  // newest committed one. keep <= 0: deletes nothing. Returns the ids deleted.
  std::vector<std::string> Prune(int keep);

  // The manifests `id`'s state is made of, oldest first: the full checkpoint
  // its chain starts at, then each delta up to `id` itself (just `id` for a
  // full one). Throws Error naming the missing or malformed link.
  std::vector<proto::CheckpointManifest> Chain(const std::string& id);

  // Reads the manifest and every file it lists, checking sizes and checksums,
  // for `id` and every checkpoint of its chain. Throws Error naming the
  // checkpoint, the file and the failed check, and the newest older
  // checkpoint that verifies, if any. Returns `id`'s manifest.
  proto::CheckpointManifest Verify(const std::string& id);

  // "ckpt-..." or "" from a --resume value relative to this store: "latest"
  // or "" -> LATEST, an id -> itself. Throws Error if there is none.
  std::string Resolve(const std::string& spec);

 private:
  // Verify of one checkpoint's own files, without looking for an alternative.
  proto::CheckpointManifest VerifyOnly(const std::string& id);
  // VerifyOnly of every checkpoint of `id`'s chain; `id`'s manifest.
  proto::CheckpointManifest VerifyChain(const std::string& id);
  std::string Key(const std::string& id, const std::string& name) const;

  std::string uri_;
  std::unique_ptr<Storage> storage_;
};

// Splits a --resume value into the store's URI and a spec for Resolve:
// "latest" (with `checkpoint_uri` as the store), a checkpoint's own URI
// (".../ckpt-E-B": its parent is the store), or a store's URI (its LATEST).
std::pair<std::string, std::string> SplitResumeSpec(const std::string& resume,
                                                    const std::string& checkpoint_uri);

// The manifest as JSON (what manifest.json holds) and back. ManifestFromJson
// decodes a whole manifest from memory (what a fuzz target calls): it checks
// the format version and each listed file (a plain name, listed once, a size
// a snapshot can have, non-empty key spans) and throws Error naming `where`
// and the field.
std::string ManifestToJson(const proto::CheckpointManifest& manifest);
proto::CheckpointManifest ManifestFromJson(const std::string& json, const std::string& where);

}  // namespace keel

#endif  // KEEL_IO_CHECKPOINT_H_
