#include "io/checkpoint.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "base/binary.h"
#include "base/checksum.h"
#include "base/piece_writer.h"
#include "base/error.h"

namespace keel {
namespace {

constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'S', 'N', 'A', 'P'};
// Version 2 added the delta flag, removed keys and admission counters; 1 is
// still read.
constexpr uint32_t kSnapshotVersion = 2;
constexpr uint32_t kOldestSnapshotVersion = 1;
// Admission counters one key range's set may have (2^28: 512 MiB).
constexpr uint64_t kMaxSketchCounters = uint64_t{1} << 28;
constexpr char kManifest[] = "manifest.json";
constexpr char kLatest[] = "LATEST";
constexpr char kPrefix[] = "ckpt-";
// The smallest file that can be a snapshot: magic, version, rank, span count,
// table count, checksum. (A shorter one is told apart only by its magic.)
constexpr size_t kMinSnapshotBytes = sizeof(kMagic) + 4 * sizeof(uint32_t) + sizeof(uint64_t);

bool IsCheckpointId(const std::string& name) {
  return name.rfind(kPrefix, 0) == 0 && name.find('/') == std::string::npos;
}

// A table's fixed part: id, weight width, row width, row count.
constexpr size_t kTableHeaderBytes = 3 * sizeof(uint32_t) + sizeof(uint64_t);
// The widest row a table may have, in floats (a request's largest row).
constexpr uint32_t kMaxRowWidth = 64u << 20;
// Small files of the store: a manifest lists one file per server.
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxLatestBytes = 4096;

// The bytes the checksum covers, once the file is long enough to have one and
// its last 8 bytes match them.
std::string_view SnapshotBody(std::string_view bytes, const std::string& where) {
  if (bytes.size() < sizeof(kMagic) + sizeof(uint64_t)) {
    throw MakeError(where, ": ", bytes.size(), " bytes is too short for a snapshot file (at least ",
                    kMinSnapshotBytes, ")");
  }
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof(stored));
  const uint64_t actual = Checksum64::Of(bytes.data(), body);
  if (stored != actual) {
    throw MakeError(where, ": checksum mismatch (the file says ", ChecksumHex(stored),
                    ", its bytes give ", ChecksumHex(actual), ")");
  }
  return bytes.substr(0, body);
}

// Magic, version, kind, server rank and key spans; returns the version.
uint32_t ReadSnapshotHeader(ByteReader* in, ServerSnapshot* snapshot) {
  char magic[sizeof(kMagic)];
  in->Bytes(magic, sizeof(magic), "magic");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    throw MakeError(in->where(), ": not a Keel snapshot file (bad magic)");
  }
  const size_t version_at = in->offset();
  const auto version = in->Get<uint32_t>("version");
  if (version < kOldestSnapshotVersion || version > kSnapshotVersion) {
    throw in->ErrorAt(version_at, "snapshot format version ", version, ", this build reads ",
                      kOldestSnapshotVersion, " to ", kSnapshotVersion);
  }
  if (version >= 2) snapshot->delta = in->GetBounded<uint32_t>("kind (0 full, 1 delta)", 0, 1) == 1;
  snapshot->server_rank = in->GetBounded<int32_t>("server rank", 0, INT32_MAX);
  const auto spans = in->GetCount<uint32_t>("span count", 2 * sizeof(uint64_t), UINT32_MAX);
  snapshot->spans.reserve(spans);
  for (uint32_t s = 0; s < spans; ++s) {
    const size_t at = in->offset();
    const auto first = in->Get<uint64_t>("span");
    const auto last = in->Get<uint64_t>("span");
    if (first > last) throw in->ErrorAt(at, "key span [", first, ", ", last, "] is empty");
    snapshot->spans.emplace_back(first, last);
  }
  return version;
}

// Keys strictly ascending, or an Error naming the table and the row.
void CheckAscending(const std::vector<uint64_t>& keys, const ByteReader& in, uint32_t table,
                    const char* what) {
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) {
      throw MakeError(in.where(), ": table ", table, " ", what, " are not sorted at row ", i);
    }
  }
}

// Where a table's arrays lie in its file, when they are left there.
struct TableArrays {
  uint64_t rows = 0;
  size_t keys_at = 0, rows_at = 0, pushed_at_at = 0;
};

// One table: its widths and row count checked against sane bounds and the
// bytes left before its keys and rows are allocated; keys strictly ascending.
// With `arrays`, the keys, rows and last push clocks are passed over (their
// places noted there) and not checked.
SnapshotTable ReadSnapshotTable(ByteReader* in, uint32_t version, TableArrays* arrays = nullptr) {
  SnapshotTable table;
  table.table = in->Get<uint32_t>("table id");
  table.weight_width = in->GetBounded<uint32_t>("weight width", 1, kMaxRowWidth);
  const size_t row_width_at = in->offset();
  table.row_width = in->GetBounded<uint32_t>("row width", 1, kMaxRowWidth);
  if (table.row_width < table.weight_width) {
    throw in->ErrorAt(row_width_at, "table ", table.table, " has rows of ", table.row_width,
                      " floats, fewer than its ", table.weight_width, " weights");
  }
  const size_t row_bytes = sizeof(uint64_t) + sizeof(float) * size_t{table.row_width};
  const auto rows = in->GetCount<uint64_t>("row count", row_bytes, UINT64_MAX);
  if (arrays) {
    arrays->rows = rows;
    arrays->keys_at = in->offset();
    in->Skip(rows * sizeof(uint64_t), "keys");
    arrays->rows_at = in->offset();
    in->Skip(rows * table.row_width * sizeof(float), "rows");
  } else {
    table.keys.resize(rows);
    table.rows.resize(rows * table.row_width);
    in->Bytes(table.keys.data(), rows * sizeof(uint64_t), "keys");
    in->Bytes(table.rows.data(), table.rows.size() * sizeof(float), "rows");
    CheckAscending(table.keys, *in, table.table, "keys");
  }
  if (version < 2) return table;
  const auto deleted = in->GetCount<uint64_t>("removed key count", sizeof(uint64_t), UINT64_MAX);
  table.deleted.resize(deleted);
  in->Bytes(table.deleted.data(), deleted * sizeof(uint64_t), "removed keys");
  CheckAscending(table.deleted, *in, table.table, "removed keys");
  // Each set: its key range, depth and width (24 bytes), then its counters.
  const auto sets = in->GetCount<uint32_t>("admission counter sets", 24, UINT32_MAX);
  for (uint32_t s = 0; s < sets; ++s) {
    RangeSketch sketch;
    const size_t span_at = in->offset();
    sketch.first = in->Get<uint64_t>("admission counters' first key");
    sketch.last = in->Get<uint64_t>("admission counters' last key");
    if (sketch.first > sketch.last) {
      throw in->ErrorAt(span_at, "table ", table.table,
                        " has admission counters for the empty "
                        "key span [",
                        sketch.first, ", ", sketch.last, "]");
    }
    sketch.depth = in->GetBounded<uint32_t>("admission counter rows", 1, 64);
    const size_t width_at = in->offset();
    sketch.width = in->GetBounded<uint32_t>("admission counter width", 1, UINT32_MAX);
    const uint64_t counters = uint64_t{sketch.depth} * sketch.width;
    if (counters > kMaxSketchCounters) {
      throw in->ErrorAt(width_at, "table ", table.table, " has ", sketch.depth, " x ", sketch.width,
                        " admission counters (at most ", kMaxSketchCounters, ")");
    }
    if (counters * sizeof(uint16_t) > in->remaining()) {
      throw in->ErrorAt(width_at, "table ", table.table, " claims ", counters,
                        " admission counters, more than the ", in->remaining(), " bytes left");
    }
    sketch.counters.resize(counters);
    in->Bytes(sketch.counters.data(), counters * sizeof(uint16_t), "admission counters");
    table.sketches.push_back(std::move(sketch));
  }
  const auto clocks = in->GetCount<uint32_t>("eviction clocks", 24, UINT32_MAX);
  for (uint32_t c = 0; c < clocks; ++c) {
    RangeClock clock;
    const size_t span_at = in->offset();
    clock.first = in->Get<uint64_t>("eviction clock's first key");
    clock.last = in->Get<uint64_t>("eviction clock's last key");
    if (clock.first > clock.last) {
      throw in->ErrorAt(span_at, "table ", table.table,
                        " has an eviction clock for the empty "
                        "key span [",
                        clock.first, ", ", clock.last, "]");
    }
    clock.clock = in->Get<uint64_t>("eviction clock");
    table.clocks.push_back(clock);
  }
  const size_t pushed_at = in->offset();
  const auto pushes = in->GetCount<uint64_t>("last push clocks", sizeof(uint64_t), UINT64_MAX);
  const uint64_t row_count = arrays ? arrays->rows : table.keys.size();
  if (pushes != 0 && pushes != row_count) {
    throw in->ErrorAt(pushed_at, "table ", table.table, " has ", pushes, " last push clocks for ",
                      row_count, " rows (0 or one a row)");
  }
  if (arrays) {
    arrays->pushed_at_at = pushes == 0 ? 0 : in->offset();
    in->Skip(pushes * sizeof(uint64_t), "last push clocks");
    return table;
  }
  table.pushed_at.resize(pushes);
  in->Bytes(table.pushed_at.data(), pushes * sizeof(uint64_t), "last push clocks");
  return table;
}

// Everything after the checksum's removal: header, then the tables in
// ascending order, then nothing. With `arrays`, each table's arrays are left
// in the file (ReadSnapshotTable).
void ReadSnapshotBody(ByteReader* in, ServerSnapshot* snapshot, std::vector<TableArrays>* arrays) {
  const uint32_t version = ReadSnapshotHeader(in, snapshot);
  const auto tables = in->GetCount<uint32_t>("table count", kTableHeaderBytes, UINT32_MAX);
  for (uint32_t t = 0; t < tables; ++t) {
    TableArrays* placed = nullptr;
    if (arrays) placed = &arrays->emplace_back();
    snapshot->tables.push_back(ReadSnapshotTable(in, version, placed));
    if (t > 0 && snapshot->tables[t].table <= snapshot->tables[t - 1].table) {
      throw MakeError(in->where(), ": table ", snapshot->tables[t].table, " follows table ",
                      snapshot->tables[t - 1].table, " (tables are in ascending order, once each)");
    }
  }
  if (in->remaining() != 0) {
    throw in->ErrorAt(in->offset(), in->remaining(), " unexpected bytes after the last table");
  }
}

// Sorts `table`'s rows by key: the order of the rows as an array of `Index`,
// then each cycle of that permutation moved in place.
template <typename Index>
void SortTableInPlace(SnapshotTable* table) {
  std::vector<uint64_t>& keys = table->keys;
  if (std::is_sorted(keys.begin(), keys.end())) return;
  const size_t width = table->row_width;
  const bool clocks = !table->pushed_at.empty();
  std::vector<Index> order(keys.size());
  std::iota(order.begin(), order.end(), Index{0});
  std::sort(order.begin(), order.end(), [&](Index a, Index b) { return keys[a] < keys[b]; });
  // Row i takes row order[i]; a row moved is marked order[i] = i.
  std::vector<float> row(width);
  float* rows = table->rows.data();
  for (size_t start = 0; start < order.size(); ++start) {
    if (order[start] == start) continue;
    const uint64_t key = keys[start];
    const uint64_t pushed_at = clocks ? table->pushed_at[start] : 0;
    std::copy_n(rows + start * width, width, row.data());
    size_t at = start;
    while (order[at] != start) {
      const size_t from = order[at];
      keys[at] = keys[from];
      std::copy_n(rows + from * width, width, rows + at * width);
      if (clocks) table->pushed_at[at] = table->pushed_at[from];
      order[at] = static_cast<Index>(at);
      at = from;
    }
    keys[at] = key;
    std::copy_n(row.data(), width, rows + at * width);
    if (clocks) table->pushed_at[at] = pushed_at;
    order[at] = static_cast<Index>(at);
  }
}

std::string BaseName(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Every file a manifest lists is a plain name in the checkpoint's folder,
// listed once, with a size a snapshot can have and non-empty key spans.
void CheckManifestFiles(const proto::CheckpointManifest& manifest, const std::string& where) {
  std::set<std::string> names;
  for (int i = 0; i < manifest.files_size(); ++i) {
    const proto::CheckpointFile& file = manifest.files(i);
    const std::string field = "files[" + std::to_string(i) + "]";
    // A control character names no file a server writes, and a name is both a
    // storage key and a path: a NUL would cut it short where it reaches the
    // file system (another file would be read), a newline would split a listing.
    const bool control = std::any_of(file.name().begin(), file.name().end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (file.name().empty() || control || file.name().find('/') != std::string::npos ||
        file.name() == "." || file.name() == ".." || file.name() == kManifest) {
      throw MakeError(where, ": ", field, ".name '", file.name(),
                      "' is not a snapshot file's name in the checkpoint's folder");
    }
    if (!names.insert(file.name()).second) {
      throw MakeError(where, ": ", field, ".name '", file.name(), "' is listed twice");
    }
    if (file.bytes() < kMinSnapshotBytes) {
      throw MakeError(where, ": ", field, ".bytes ", file.bytes(),
                      " is too small for a snapshot file (at least ", kMinSnapshotBytes, ")");
    }
    for (const proto::KeySpan& span : file.spans()) {
      if (span.first() > span.last()) {
        throw MakeError(where, ": ", field, " has an empty key span [", span.first(), ", ",
                        span.last(), "]");
      }
    }
  }
}

// Sets every -0 among `message`'s floating-point fields (and its messages',
// maps' values included) to 0. protobuf's JSON parser reads "-0" as 0 while
// its printer writes -0 as "-0", so a manifest holding one would not be
// written again as it was read.
void ZeroNegativeZeros(google::protobuf::Message* message) {
  const google::protobuf::Reflection* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  using Field = google::protobuf::FieldDescriptor;
  for (const Field* field : fields) {
    const int count = field->is_repeated() ? reflection->FieldSize(*message, field) : 1;
    for (int i = 0; i < count; ++i) {
      const bool repeated = field->is_repeated();
      if (field->cpp_type() == Field::CPPTYPE_MESSAGE) {
        ZeroNegativeZeros(repeated ? reflection->MutableRepeatedMessage(message, field, i)
                                   : reflection->MutableMessage(message, field));
      } else if (field->cpp_type() == Field::CPPTYPE_DOUBLE) {
        const double value = repeated ? reflection->GetRepeatedDouble(*message, field, i)
                                      : reflection->GetDouble(*message, field);
        if (value != 0 || !std::signbit(value)) continue;
        repeated ? reflection->SetRepeatedDouble(message, field, i, 0.0)
                 : reflection->SetDouble(message, field, 0.0);
      } else if (field->cpp_type() == Field::CPPTYPE_FLOAT) {
        const float value = repeated ? reflection->GetRepeatedFloat(*message, field, i)
                                     : reflection->GetFloat(*message, field);
        if (value != 0 || !std::signbit(value)) continue;
        repeated ? reflection->SetRepeatedFloat(message, field, i, 0.0f)
                 : reflection->SetFloat(message, field, 0.0f);
      }
    }
  }
}

}  // namespace

std::string CheckpointId(int epoch, uint64_t batch) {
  char name[64];
  std::snprintf(name, sizeof(name), "ckpt-%06d-%09llu", epoch,
                static_cast<unsigned long long>(batch));
  return name;
}

std::string SnapshotFileName(int server_rank) {
  return "server-" + std::to_string(server_rank) + ".snap";
}

uint64_t WriteSnapshot(const ServerSnapshot& snapshot, const Storage::PieceSink& sink) {
  PieceWriter out(sink);
  out.Bytes(kMagic, sizeof(kMagic));
  out.Put(kSnapshotVersion);
  out.Put(static_cast<uint32_t>(snapshot.delta ? 1 : 0));
  out.Put(static_cast<int32_t>(snapshot.server_rank));
  out.Put(static_cast<uint32_t>(snapshot.spans.size()));
  for (const auto& [first, last] : snapshot.spans) {
    out.Put(first);
    out.Put(last);
  }
  out.Put(static_cast<uint32_t>(snapshot.tables.size()));
  for (const SnapshotTable& table : snapshot.tables) {
    out.Put(table.table);
    out.Put(table.weight_width);
    out.Put(table.row_width);
    out.Put(static_cast<uint64_t>(table.keys.size()));
    out.Bytes(table.keys.data(), table.keys.size() * sizeof(uint64_t));
    out.Bytes(table.rows.data(), table.rows.size() * sizeof(float));
    out.Put(static_cast<uint64_t>(table.deleted.size()));
    out.Bytes(table.deleted.data(), table.deleted.size() * sizeof(uint64_t));
    out.Put(static_cast<uint32_t>(table.sketches.size()));
    for (const RangeSketch& sketch : table.sketches) {
      out.Put(sketch.first);
      out.Put(sketch.last);
      out.Put(sketch.depth);
      out.Put(sketch.width);
      out.Bytes(sketch.counters.data(), sketch.counters.size() * sizeof(uint16_t));
    }
    out.Put(static_cast<uint32_t>(table.clocks.size()));
    for (const RangeClock& clock : table.clocks) {
      out.Put(clock.first);
      out.Put(clock.last);
      out.Put(clock.clock);
    }
    out.Put(static_cast<uint64_t>(table.pushed_at.size()));
    out.Bytes(table.pushed_at.data(), table.pushed_at.size() * sizeof(uint64_t));
  }
  return out.Finish();
}

std::string EncodeSnapshot(const ServerSnapshot& snapshot, uint64_t* checksum) {
  std::string bytes;
  const uint64_t sum =
      WriteSnapshot(snapshot, [&bytes](std::string_view piece) { bytes.append(piece); });
  if (checksum) *checksum = sum;
  return bytes;
}

void SortSnapshotTables(ServerSnapshot* snapshot) {
  for (SnapshotTable& table : snapshot->tables) {
    if (table.keys.size() <= UINT32_MAX) {
      SortTableInPlace<uint32_t>(&table);
    } else {
      SortTableInPlace<uint64_t>(&table);
    }
  }
}

ServerSnapshot DecodeSnapshot(std::string_view bytes, const std::string& where) {
  ByteReader in(SnapshotBody(bytes, where), where);
  ServerSnapshot snapshot;
  ReadSnapshotBody(&in, &snapshot, nullptr);
  return snapshot;
}

SnapshotFileReader::SnapshotFileReader(Storage* storage, std::string key, uint64_t size,
                                       std::string where, const std::string& expected)
    : storage_(storage), key_(std::move(key)), where_(std::move(where)) {
  if (size < sizeof(kMagic) + sizeof(uint64_t)) {
    throw MakeError(where_, ": ", size, " bytes is too short for a snapshot file (at least ",
                    kMinSnapshotBytes, ")");
  }
  const uint64_t body = size - sizeof(uint64_t);
  Checksum64 sum;
  constexpr uint64_t kPiece = uint64_t{8} << 20;
  for (uint64_t at = 0; at < body; at += kPiece) {
    const std::string piece = Fetch(at, std::min(kPiece, body - at));
    sum.Add(piece.data(), piece.size());
  }
  if (!expected.empty() && ChecksumHex(sum.value()) != expected) {
    throw MakeError(where_, ": checksum check failed (its bytes give ", ChecksumHex(sum.value()),
                    ", the manifest says ", expected, ")");
  }
  const std::string stored = Fetch(body, sizeof(uint64_t));
  std::memcpy(&checksum_, stored.data(), sizeof(checksum_));
  if (checksum_ != sum.value()) {
    throw MakeError(where_, ": checksum mismatch (the file says ", ChecksumHex(checksum_),
                    ", its bytes give ", ChecksumHex(sum.value()), ")");
  }
  ByteReader in([this](uint64_t offset, uint64_t length) { return Fetch(offset, length); }, body,
                where_);
  std::vector<TableArrays> arrays;
  ReadSnapshotBody(&in, &outline_, &arrays);
  for (const TableArrays& table : arrays) {
    arrays_.push_back(Arrays{table.rows, table.keys_at, table.rows_at, table.pushed_at_at});
  }
}

std::string SnapshotFileReader::Fetch(uint64_t offset, uint64_t length) const {
  std::string bytes = storage_->GetRange(key_, offset, length);
  if (bytes.size() != length) {
    throw MakeError(where_, ": the file ended at byte ", offset + bytes.size(), " (reading ",
                    length, " bytes from byte ", offset, ")");
  }
  return bytes;
}

void SnapshotFileReader::ForEachChunk(size_t table,
                                      const std::function<void(const SnapshotTable&)>& take,
                                      size_t chunk_rows) const {
  const SnapshotTable& outline = outline_.tables.at(table);
  const Arrays& arrays = arrays_.at(table);
  const size_t width = outline.row_width;
  SnapshotTable chunk;
  chunk.table = outline.table;
  chunk.weight_width = outline.weight_width;
  chunk.row_width = outline.row_width;
  uint64_t previous = 0;
  for (uint64_t first = 0; first < arrays.rows; first += chunk_rows) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(chunk_rows, arrays.rows - first));
    std::string bytes = Fetch(arrays.keys_at + first * sizeof(uint64_t), count * sizeof(uint64_t));
    chunk.keys.resize(count);
    std::memcpy(chunk.keys.data(), bytes.data(), bytes.size());
    bytes = Fetch(arrays.rows_at + first * width * sizeof(float), count * width * sizeof(float));
    chunk.rows.resize(count * width);
    std::memcpy(chunk.rows.data(), bytes.data(), bytes.size());
    chunk.pushed_at.clear();
    if (arrays.pushed_at_at != 0) {
      bytes = Fetch(arrays.pushed_at_at + first * sizeof(uint64_t), count * sizeof(uint64_t));
      chunk.pushed_at.resize(count);
      std::memcpy(chunk.pushed_at.data(), bytes.data(), bytes.size());
    }
    for (size_t i = 0; i < count; ++i) {
      if (first + i > 0 && chunk.keys[i] <= previous) {
        throw MakeError(where_, ": table ", outline.table, " keys are not sorted at row ",
                        first + i);
      }
      previous = chunk.keys[i];
    }
    take(chunk);
  }
}

std::string ManifestToJson(const proto::CheckpointManifest& manifest) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(manifest, &json, options);
  if (!status.ok()) throw MakeError("cannot encode a manifest: ", status.ToString());
  return json;
}

proto::CheckpointManifest ManifestFromJson(const std::string& json, const std::string& where) {
  proto::CheckpointManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // written by a newer build
  auto status = google::protobuf::util::JsonStringToMessage(json, &manifest, options);
  if (!status.ok()) throw MakeError(where, ": not a valid manifest: ", status.ToString());
  // What this build does not know goes, and -0 is 0: the manifest read is then
  // the one it writes again (protobuf's parser keeps some unknown members, such
  // as one named "", as unknown fields, which ManifestToJson does not write).
  manifest.DiscardUnknownFields();
  ZeroNegativeZeros(&manifest);
  if (manifest.format_version() != 1) {
    throw MakeError(where, ": manifest format version ", manifest.format_version(),
                    ", this build reads 1");
  }
  CheckManifestFiles(manifest, where);
  if (!manifest.delta_of().empty() &&
      (!IsCheckpointId(manifest.delta_of()) || manifest.delta_of() >= manifest.id())) {
    throw MakeError(where, ": delta_of '", manifest.delta_of(),
                    "' is not a checkpoint id older than ", manifest.id());
  }
  if (manifest.delta_depth() < 0 || manifest.delta_depth() > 1000000 ||
      (manifest.delta_depth() > 0) != !manifest.delta_of().empty()) {
    throw MakeError(where, ": delta_depth ", manifest.delta_depth(), " does not fit delta_of '",
                    manifest.delta_of(), "'");
  }
  for (const proto::CheckpointFile& file : manifest.files()) {
    if (file.delta() && manifest.delta_of().empty()) {
      throw MakeError(where, ": file ", file.name(), " is a delta, but the manifest names no ",
                      "delta_of");
    }
  }
  return manifest;
}

CheckpointStore::CheckpointStore(const std::string& uri) : uri_(uri), storage_(OpenStorage(uri)) {}

std::string CheckpointStore::Key(const std::string& id, const std::string& name) const {
  return id + "/" + name;
}

std::vector<std::string> CheckpointStore::Committed() {
  std::vector<std::string> ids;
  for (const ObjectInfo& object : storage_->List(kPrefix)) {
    const size_t slash = object.key.find('/');
    if (slash == std::string::npos) continue;
    if (object.key.substr(slash + 1) == kManifest) ids.push_back(object.key.substr(0, slash));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::string> CheckpointStore::Incomplete() {
  std::set<std::string> folders;
  for (const ObjectInfo& object : storage_->List(kPrefix)) {
    const size_t slash = object.key.find('/');
    if (slash != std::string::npos) folders.insert(object.key.substr(0, slash));
  }
  for (const std::string& id : Committed()) folders.erase(id);
  return {folders.begin(), folders.end()};
}

std::string CheckpointStore::Latest() {
  try {
    std::string id = GetAtMost(*storage_, kLatest, kMaxLatestBytes, "a LATEST file");
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    if (!IsCheckpointId(id)) {
      throw MakeError(storage_->UriOf(kLatest), ": '", id, "' is not a checkpoint id");
    }
    return id;
  } catch (const NotFoundError&) {
    return "";
  }
}

proto::CheckpointManifest CheckpointStore::ReadManifest(const std::string& id) {
  const std::string key = Key(id, kManifest);
  std::string json;
  try {
    json = GetAtMost(*storage_, key, kMaxManifestBytes, "a checkpoint manifest");
  } catch (const NotFoundError&) {
    throw NotFoundError(storage_->UriOf(id) + " is not a checkpoint: it has no " + kManifest +
                        " (it was never committed)");
  }
  proto::CheckpointManifest manifest = ManifestFromJson(json, storage_->UriOf(key));
  if (manifest.id() != id) {
    throw MakeError(storage_->UriOf(key), ": the manifest is for ", manifest.id());
  }
  return manifest;
}

void CheckpointStore::PutFile(const std::string& id, const std::string& name,
                              std::string_view bytes) {
  storage_->Put(Key(id, name), bytes);
}

uint64_t CheckpointStore::PutFilePieces(
    const std::string& id, const std::string& name,
    const std::function<void(const Storage::PieceSink&)>& produce) {
  uint64_t bytes = 0;
  storage_->PutPieces(Key(id, name), [&](const Storage::PieceSink& sink) {
    produce([&](std::string_view piece) {
      bytes += piece.size();
      sink(piece);
    });
  });
  return bytes;
}

void CheckpointStore::Commit(const proto::CheckpointManifest& manifest) {
  storage_->Put(Key(manifest.id(), kManifest), ManifestToJson(manifest));
  const std::string latest = Latest();
  if (latest.empty() || latest < manifest.id()) storage_->Put(kLatest, manifest.id() + "\n");
}

std::vector<proto::CheckpointManifest> CheckpointStore::Chain(const std::string& id) {
  std::vector<proto::CheckpointManifest> chain;
  chain.push_back(ReadManifest(id));
  while (!chain.back().delta_of().empty()) {
    const std::string base = chain.back().delta_of();
    // ManifestFromJson checked delta_of < id: the walk ends.
    try {
      chain.push_back(ReadManifest(base));
    } catch (const Error& e) {
      throw MakeError("checkpoint ", chain.back().id(), " is a delta of ", base,
                      ", which cannot be read: ", e.what());
    }
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

std::vector<std::string> CheckpointStore::Prune(int keep) {
  std::vector<std::string> deleted;
  if (keep <= 0) return deleted;
  const std::vector<std::string> committed = Committed();
  if (committed.empty()) return deleted;
  std::set<std::string> doomed;
  for (size_t i = 0; i + static_cast<size_t>(keep) < committed.size(); ++i) {
    doomed.insert(committed[i]);
  }
  // A kept checkpoint's chain is kept whole. A chain that cannot be read
  // keeps everything older: nothing is deleted that might be needed.
  for (size_t i = committed.size() - std::min(committed.size(), static_cast<size_t>(keep));
       i < committed.size(); ++i) {
    std::string id = committed[i];
    while (true) {
      proto::CheckpointManifest manifest;
      try {
        manifest = ReadManifest(id);
      } catch (const Error&) {
        for (const std::string& older : committed) {
          if (older < id) doomed.erase(older);
        }
        break;
      }
      if (manifest.delta_of().empty()) break;
      id = manifest.delta_of();
      doomed.erase(id);
    }
  }
  for (const std::string& id : Incomplete()) {
    if (id < committed.back()) doomed.insert(id);
  }
  for (const std::string& id : doomed) {
    // The manifest goes first: a half-deleted checkpoint is then not one.
    std::vector<ObjectInfo> objects = storage_->List(id + "/");
    std::stable_partition(objects.begin(), objects.end(), [](const ObjectInfo& object) {
      return BaseName(object.key) == kManifest;
    });
    for (const ObjectInfo& object : objects) storage_->Delete(object.key);
    deleted.push_back(id);
  }
  return deleted;
}

std::string CheckpointStore::ReadSnapshotFile(const std::string& id,
                                              const proto::CheckpointFile& file) {
  const std::string key = Key(id, file.name());
  std::string bytes;
  try {
    bytes = GetAtMost(*storage_, key, file.bytes(), "the snapshot file its manifest lists");
  } catch (const NotFoundError&) {
    throw MakeError(storage_->UriOf(key), ": missing (the manifest lists it)");
  }
  if (bytes.size() != file.bytes()) {
    throw MakeError(storage_->UriOf(key), ": size check failed (", bytes.size(),
                    " bytes, the manifest says ", file.bytes(), ")");
  }
  return bytes;
}

SnapshotFileReader CheckpointStore::OpenSnapshotFile(const std::string& id,
                                                     const proto::CheckpointFile& file) {
  const std::string key = Key(id, file.name());
  uint64_t size = 0;
  bool found = false;
  for (const ObjectInfo& object : storage_->List(key)) {
    if (object.key == key) {
      size = object.size;
      found = true;
    }
  }
  if (!found) throw MakeError(storage_->UriOf(key), ": missing (the manifest lists it)");
  if (size != file.bytes()) {
    throw MakeError(storage_->UriOf(key), ": size check failed (", size,
                    " bytes, the manifest says ", file.bytes(), ")");
  }
  return SnapshotFileReader(storage_.get(), key, size, storage_->UriOf(key), file.checksum());
}

proto::CheckpointManifest CheckpointStore::VerifyOnly(const std::string& id) {
  proto::CheckpointManifest manifest = ReadManifest(id);
  for (const proto::CheckpointFile& file : manifest.files()) {
    // Its size, checksums and structure, a piece at a time.
    const SnapshotFileReader reader = OpenSnapshotFile(id, file);
    for (size_t table = 0; table < reader.outline().tables.size(); ++table) {
      reader.ForEachChunk(table, [](const SnapshotTable&) {});  // keys ascending
    }
  }
  return manifest;
}

proto::CheckpointManifest CheckpointStore::VerifyChain(const std::string& id) {
  proto::CheckpointManifest last;
  for (const proto::CheckpointManifest& link : Chain(id)) last = VerifyOnly(link.id());
  return last;
}

proto::CheckpointManifest CheckpointStore::Verify(const std::string& id) {
  try {
    return VerifyChain(id);
  } catch (const Error& failure) {
    std::string alternative;
    for (const std::string& older : Committed()) {
      if (older >= id) break;
      try {
        VerifyChain(older);
        alternative = older;
      } catch (const Error&) {
      }
    }
    std::string message = std::string("checkpoint ") + id + " is not usable: " + failure.what();
    message += alternative.empty() ? "; no older checkpoint in " + uri_ + " verifies"
                                   : "; the previous good checkpoint is " + alternative +
                                         " (--resume=" + storage_->UriOf(alternative) + ")";
    throw Error(message);
  }
}

std::string CheckpointStore::Resolve(const std::string& spec) {
  if (spec.empty() || spec == "latest") {
    const std::string latest = Latest();
    if (latest.empty()) throw MakeError("no checkpoint to resume from in ", uri_, " (no LATEST)");
    return latest;
  }
  if (!IsCheckpointId(spec)) throw MakeError("'", spec, "' is not a checkpoint id (ckpt-E-B)");
  return spec;
}

std::pair<std::string, std::string> SplitResumeSpec(const std::string& resume,
                                                    const std::string& checkpoint_uri) {
  if (resume == "latest") {
    if (checkpoint_uri.empty()) throw MakeError("--resume=latest needs --checkpoint_uri");
    return {checkpoint_uri, "latest"};
  }
  std::string uri = resume;
  while (uri.size() > 1 && uri.back() == '/') uri.pop_back();
  const std::string base = BaseName(uri);
  if (IsCheckpointId(base)) {
    return {uri.substr(0, uri.size() - base.size() - 1), base};
  }
  return {uri, "latest"};
}

}  // namespace keel
