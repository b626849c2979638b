// The checkpoint format and store: snapshot files, manifests, LATEST,
// pruning, verification.
#include "io/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include "base/checksum.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

ServerSnapshot SampleSnapshot(int rank) {
  ServerSnapshot snapshot;
  snapshot.server_rank = rank;
  snapshot.spans = {{100, 200}, {1000, ~uint64_t{0}}};
  SnapshotTable weights;
  weights.table = 0;
  weights.weight_width = 2;
  weights.row_width = 5;
  weights.keys = {101, 150, 199, 5000};
  for (size_t i = 0; i < weights.keys.size() * 5; ++i) weights.rows.push_back(0.5f * i - 3);
  SnapshotTable bias;
  bias.table = 1;
  bias.weight_width = 1;
  bias.row_width = 1;
  bias.keys = {~uint64_t{0}};
  bias.rows = {0.25f};
  snapshot.tables = {weights, bias};
  return snapshot;
}

// `bytes` followed by their checksum, as a snapshot file ends.
std::string WithChecksum(std::string bytes) {
  const uint64_t sum = testing::Fnv1a64(bytes);
  return bytes.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
}

TEST(Fnv1a64, MatchesThePublishedTestVectors) {
  EXPECT_EQ(testing::Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(testing::Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(testing::Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(SnapshotFile, RoundTripsEveryTableAndSpan) {
  uint64_t checksum = 0;
  const std::string bytes = EncodeSnapshot(SampleSnapshot(3), &checksum);
  const ServerSnapshot read = DecodeSnapshot(bytes, "s.snap");
  EXPECT_EQ(read.server_rank, 3);
  EXPECT_EQ(read.spans, SampleSnapshot(3).spans);
  ASSERT_EQ(read.tables.size(), 2u);
  EXPECT_EQ(read.tables[0].keys, SampleSnapshot(3).tables[0].keys);
  EXPECT_EQ(read.tables[0].rows, SampleSnapshot(3).tables[0].rows);
  EXPECT_EQ(read.tables[1].rows, std::vector<float>{0.25f});
  // The checksum covers every byte before it, and ends the file.
  EXPECT_EQ(checksum, testing::Fnv1a64(bytes.substr(0, bytes.size() - 8)));
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, sizeof(stored));
  EXPECT_EQ(stored, checksum);
}

TEST(SnapshotFile, WrittenInPiecesAreTheEncodedBytesWithoutCopyingTheRows) {
  ServerSnapshot snapshot = SampleSnapshot(2);
  // Enough rows that the arrays are larger than the writer's buffer.
  SnapshotTable& weights = snapshot.tables[0];
  weights.keys.clear();
  weights.rows.clear();
  for (uint64_t key = 0; key < 100000; ++key) {
    weights.keys.push_back(3 * key + 1);
    for (int c = 0; c < 5; ++c) weights.rows.push_back(static_cast<float>(key) + 0.1f * c);
  }
  uint64_t encoded_sum = 0;
  const std::string encoded = EncodeSnapshot(snapshot, &encoded_sum);
  std::string written;
  size_t largest_copied_piece = 0;
  bool rows_passed_as_they_are = false;
  const uint64_t sum = WriteSnapshot(snapshot, [&](std::string_view piece) {
    if (piece.data() == reinterpret_cast<const char*>(weights.rows.data())) {
      rows_passed_as_they_are = true;
    } else if (piece.data() != reinterpret_cast<const char*>(weights.keys.data())) {
      largest_copied_piece = std::max(largest_copied_piece, piece.size());
    }
    written.append(piece);
  });
  EXPECT_EQ(written, encoded);
  EXPECT_EQ(sum, encoded_sum);
  EXPECT_TRUE(rows_passed_as_they_are);
  EXPECT_LE(largest_copied_piece, size_t{1} << 20);
  EXPECT_EQ(DecodeSnapshot(written, "s.snap").tables[0].keys, weights.keys);
}

TEST(SnapshotFile, SortingInPlaceMovesEachRowAndClockWithItsKey) {
  ServerSnapshot snapshot;
  SnapshotTable table;
  table.row_width = 3;
  table.weight_width = 1;
  std::mt19937_64 random(5);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t key = random();
    table.keys.push_back(key);
    table.pushed_at.push_back(key / 7);
    for (int c = 0; c < 3; ++c) table.rows.push_back(static_cast<float>(key % 1000003) + c);
  }
  snapshot.tables = {table};
  SortSnapshotTables(&snapshot);
  const SnapshotTable& sorted = snapshot.tables[0];
  std::vector<uint64_t> expected = table.keys;
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(sorted.keys, expected);
  for (size_t i = 0; i < sorted.keys.size(); ++i) {
    const uint64_t key = sorted.keys[i];
    ASSERT_EQ(sorted.pushed_at[i], key / 7) << "row " << i;
    for (int c = 0; c < 3; ++c) {
      ASSERT_EQ(sorted.rows[i * 3 + c], static_cast<float>(key % 1000003) + c) << "row " << i;
    }
  }
}

TEST(SnapshotFile, AFlippedByteFailsTheChecksumNamingTheFile) {
  std::string bytes = EncodeSnapshot(SampleSnapshot(0), nullptr);
  bytes[bytes.size() / 2] ^= 0x10;
  const std::string error = ErrorOf([&] { DecodeSnapshot(bytes, "ckpt/server-0.snap"); });
  EXPECT_TRUE(Contains(error, "ckpt/server-0.snap")) << error;
  EXPECT_TRUE(Contains(error, "checksum mismatch")) << error;
}

TEST(SnapshotFile, TruncatedAndForeignFilesAreRefused) {
  const std::string bytes = EncodeSnapshot(SampleSnapshot(0), nullptr);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeSnapshot(bytes.substr(0, 10), "f"); }), "too short"));
  // A truncated file whose checksum still matches its (shorter) bytes.
  const std::string cut = WithChecksum(bytes.substr(0, 60));
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeSnapshot(cut, "f"); }), "f: truncated at byte"));
  const std::string foreign = WithChecksum("NOTASNAPSHOT-FILE");
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeSnapshot(foreign, "f"); }), "bad magic"));
}

TEST(SnapshotFile, RoundTripsADeltaWithRemovedKeysAndAdmissionCounters) {
  ServerSnapshot delta = SampleSnapshot(1);
  delta.delta = true;
  delta.tables[0].deleted = {7, 102, 4000};
  RangeSketch sketch;
  sketch.first = 100;
  sketch.last = 200;
  sketch.depth = 2;
  sketch.width = 3;
  sketch.counters = {1, 2, 3, 65535, 0, 9};
  delta.tables[1].sketches = {sketch, sketch};
  delta.tables[1].sketches[1].first = 1000;
  delta.tables[1].sketches[1].last = 2000;
  delta.tables[0].clocks = {RangeClock{100, 200, 77}};
  delta.tables[0].pushed_at = {70, 71, 77, 12};  // one a row
  const ServerSnapshot read = DecodeSnapshot(EncodeSnapshot(delta, nullptr), "d.snap");
  EXPECT_TRUE(read.delta);
  EXPECT_EQ(read.tables[0].deleted, delta.tables[0].deleted);
  EXPECT_TRUE(read.tables[1].deleted.empty());
  ASSERT_EQ(read.tables[1].sketches.size(), 2u);
  EXPECT_EQ(read.tables[1].sketches[0].counters, sketch.counters);
  EXPECT_EQ(read.tables[1].sketches[0].width, 3u);
  EXPECT_EQ(read.tables[1].sketches[1].first, 1000u);
  EXPECT_EQ(read.tables[1].sketches[1].last, 2000u);
  EXPECT_TRUE(read.tables[0].sketches.empty());
  ASSERT_EQ(read.tables[0].clocks.size(), 1u);
  EXPECT_EQ(read.tables[0].clocks[0].clock, 77u);
  EXPECT_EQ(read.tables[0].pushed_at, delta.tables[0].pushed_at);
  EXPECT_TRUE(read.tables[1].pushed_at.empty());
  // Last push clocks for some rows only are refused.
  ServerSnapshot partial = delta;
  partial.tables[0].pushed_at.pop_back();
  const std::string some = ErrorOf([&] { DecodeSnapshot(EncodeSnapshot(partial, nullptr), "d"); });
  EXPECT_TRUE(Contains(some, "3 last push clocks for 4 rows")) << some;
  EXPECT_FALSE(DecodeSnapshot(EncodeSnapshot(SampleSnapshot(1), nullptr), "f").delta);
  // Removed keys out of order are refused like rows out of order.
  delta.tables[0].deleted = {9, 8};
  const std::string error = ErrorOf([&] { DecodeSnapshot(EncodeSnapshot(delta, nullptr), "d"); });
  EXPECT_TRUE(Contains(error, "table 0 removed keys are not sorted at row 1")) << error;
  // Counters claimed past the bytes left.
  delta.tables[0].deleted.clear();
  delta.tables[1].sketches[0].width = 1 << 20;
  const std::string claim = ErrorOf([&] { DecodeSnapshot(EncodeSnapshot(delta, nullptr), "d"); });
  EXPECT_TRUE(Contains(claim, "admission counters, more than the")) << claim;
}

TEST(SnapshotFile, AVersionOneFileIsStillRead) {
  // Version 1: no kind, no removed keys, no counters.
  std::string bytes("KEELSNAP", 8);
  auto put = [&](auto value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  put(uint32_t{1});  // version
  put(int32_t{4});   // rank
  put(uint32_t{1});  // spans
  put(uint64_t{0});
  put(~uint64_t{0});
  put(uint32_t{1});   // tables
  put(uint32_t{2});   // id
  put(uint32_t{1});   // weight width
  put(uint32_t{2});   // row width
  put(uint64_t{1});   // rows
  put(uint64_t{77});  // key
  put(1.5f);
  put(0.25f);
  const ServerSnapshot read = DecodeSnapshot(WithChecksum(bytes), "v1.snap");
  EXPECT_FALSE(read.delta);
  EXPECT_EQ(read.server_rank, 4);
  ASSERT_EQ(read.tables.size(), 1u);
  EXPECT_EQ(read.tables[0].keys, std::vector<uint64_t>{77});
  EXPECT_EQ(read.tables[0].rows, (std::vector<float>{1.5f, 0.25f}));
}

TEST(CheckpointId, SortsInTrainingOrder) {
  EXPECT_EQ(CheckpointId(2, 120), "ckpt-000002-000000120");
  EXPECT_LT(CheckpointId(2, 999), CheckpointId(3, 0));
  EXPECT_LT(CheckpointId(3, 5), CheckpointId(3, 40));
}

TEST(ResumeSpec, NamesTheStoreAndTheCheckpoint) {
  EXPECT_EQ(SplitResumeSpec("latest", "s3://b/p"),
            std::make_pair(std::string("s3://b/p"), std::string("latest")));
  EXPECT_EQ(SplitResumeSpec("file:///x/ckpt-000002-000000000/", ""),
            std::make_pair(std::string("file:///x"), std::string("ckpt-000002-000000000")));
  EXPECT_EQ(SplitResumeSpec("s3://b/p", ""),
            std::make_pair(std::string("s3://b/p"), std::string("latest")));
  EXPECT_TRUE(Contains(ErrorOf([] { SplitResumeSpec("latest", ""); }), "--checkpoint_uri"));
}

class CheckpointStoreTest : public testing::TempFolderTest {
 protected:
  // Writes a checkpoint with two servers' files; commits it unless told not to.
  proto::CheckpointManifest Write(CheckpointStore* store, int epoch, uint64_t batch,
                                  bool commit = true, const std::string& delta_of = "",
                                  int depth = 0) {
    proto::CheckpointManifest manifest;
    manifest.set_format_version(1);
    manifest.set_id(CheckpointId(epoch, batch));
    manifest.set_delta_of(delta_of);
    manifest.set_delta_depth(depth);
    manifest.set_epoch(epoch);
    manifest.set_batch(batch);
    manifest.set_num_servers(2);
    for (int rank = 0; rank < 2; ++rank) {
      uint64_t checksum = 0;
      const std::string bytes = EncodeSnapshot(SampleSnapshot(rank), &checksum);
      store->PutFile(manifest.id(), SnapshotFileName(rank), bytes);
      proto::CheckpointFile* file = manifest.add_files();
      file->set_name(SnapshotFileName(rank));
      file->set_server_rank(rank);
      file->set_bytes(bytes.size());
      file->set_checksum(ChecksumHex(checksum));
      file->set_delta(!delta_of.empty());
    }
    if (commit) store->Commit(manifest);
    return manifest;
  }
  void FlipByte(const std::string& path, size_t offset) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(static_cast<std::streamoff>(offset));
    char byte = 0;
    file.read(&byte, 1);
    byte ^= 0x01;
    file.seekp(static_cast<std::streamoff>(offset));
    file.write(&byte, 1);
  }
};

TEST_F(CheckpointStoreTest, CommitWritesTheManifestAndMovesLatestForwardOnly) {
  CheckpointStore store("file://" + folder_);
  EXPECT_EQ(store.Latest(), "");
  Write(&store, 1, 10);
  EXPECT_EQ(store.Latest(), "ckpt-000001-000000010");
  Write(&store, 2, 0);
  // A late commit of an older checkpoint leaves LATEST where it is.
  Write(&store, 1, 20);
  EXPECT_EQ(store.Latest(), "ckpt-000002-000000000");
  EXPECT_EQ(store.Committed(),
            (std::vector<std::string>{"ckpt-000001-000000010", "ckpt-000001-000000020",
                                      "ckpt-000002-000000000"}));
  EXPECT_EQ(store.ReadManifest("ckpt-000001-000000020").batch(), 20u);
}

TEST_F(CheckpointStoreTest, AFolderWithoutAManifestIsNotACheckpoint) {
  CheckpointStore store(folder_);
  Write(&store, 1, 10);
  Write(&store, 1, 20, /*commit=*/false);
  EXPECT_EQ(store.Committed(), std::vector<std::string>{"ckpt-000001-000000010"});
  EXPECT_EQ(store.Incomplete(), std::vector<std::string>{"ckpt-000001-000000020"});
  const std::string error = ErrorOf([&] { store.Verify("ckpt-000001-000000020"); });
  EXPECT_TRUE(Contains(error, "no manifest.json")) << error;
  EXPECT_TRUE(Contains(error, "the previous good checkpoint is ckpt-000001-000000010")) << error;
}

TEST_F(CheckpointStoreTest, VerifyNamesTheCorruptedFileAndThePreviousGoodCheckpoint) {
  CheckpointStore store(folder_);
  Write(&store, 1, 10);
  Write(&store, 1, 20);
  EXPECT_NO_THROW(store.Verify("ckpt-000001-000000020"));
  FlipByte(folder_ + "/ckpt-000001-000000020/server-1.snap", 40);
  const std::string error = ErrorOf([&] { store.Verify("ckpt-000001-000000020"); });
  EXPECT_TRUE(Contains(error, "ckpt-000001-000000020/server-1.snap")) << error;
  EXPECT_TRUE(Contains(error, "checksum check failed")) << error;
  EXPECT_TRUE(Contains(error, "the previous good checkpoint is ckpt-000001-000000010")) << error;
}

TEST_F(CheckpointStoreTest, VerifyNamesAMissingOrResizedFile) {
  CheckpointStore store(folder_);
  Write(&store, 1, 10);
  std::remove((folder_ + "/ckpt-000001-000000010/server-0.snap").c_str());
  std::string error = ErrorOf([&] { store.Verify("ckpt-000001-000000010"); });
  EXPECT_TRUE(Contains(error, "server-0.snap: missing")) << error;
  EXPECT_TRUE(Contains(error, "no older checkpoint")) << error;
  Write(&store, 1, 20);
  std::ofstream(folder_ + "/ckpt-000001-000000020/server-1.snap", std::ios::app) << "x";
  error = ErrorOf([&] { store.Verify("ckpt-000001-000000020"); });
  EXPECT_TRUE(Contains(error, "server-1.snap: size check failed")) << error;
}

TEST_F(CheckpointStoreTest, PruneKeepsTheNewestAndDropsOlderIncompleteOnes) {
  CheckpointStore store(folder_);
  Write(&store, 1, 10);
  Write(&store, 1, 15, /*commit=*/false);
  Write(&store, 1, 20);
  Write(&store, 1, 30);
  Write(&store, 1, 40, /*commit=*/false);  // newer than every committed one: being written
  const std::vector<std::string> deleted = store.Prune(2);
  EXPECT_EQ(deleted, (std::vector<std::string>{"ckpt-000001-000000010", "ckpt-000001-000000015"}));
  EXPECT_EQ(store.Committed(),
            (std::vector<std::string>{"ckpt-000001-000000020", "ckpt-000001-000000030"}));
  EXPECT_EQ(store.Incomplete(), std::vector<std::string>{"ckpt-000001-000000040"});
  EXPECT_TRUE(store.Prune(0).empty());
  // A deleted checkpoint leaves no folder behind.
  for (const char* gone : {"ckpt-000001-000000010", "ckpt-000001-000000015"}) {
    EXPECT_FALSE(access((folder_ + "/" + gone).c_str(), F_OK) == 0) << gone;
  }
  EXPECT_TRUE(access((folder_ + "/ckpt-000001-000000020").c_str(), F_OK) == 0);
}

TEST_F(CheckpointStoreTest, ADeltaChainIsReadVerifiedAndKeptWhole) {
  CheckpointStore store(folder_);
  const std::string full = CheckpointId(1, 10), d1 = CheckpointId(1, 20), d2 = CheckpointId(1, 30),
                    full2 = CheckpointId(1, 40), d3 = CheckpointId(1, 50);
  Write(&store, 1, 10);
  Write(&store, 1, 20, true, full, 1);
  Write(&store, 1, 30, true, d1, 2);
  Write(&store, 1, 40);
  Write(&store, 1, 50, true, full2, 1);
  std::vector<std::string> chain;
  for (const auto& link : store.Chain(d2)) chain.push_back(link.id());
  EXPECT_EQ(chain, (std::vector<std::string>{full, d1, d2}));
  EXPECT_EQ(store.Chain(full).size(), 1u);
  EXPECT_NO_THROW(store.Verify(d2));
  // Keeping the newest two keeps d3's base only (full2 is one of them).
  EXPECT_EQ(store.Prune(2), (std::vector<std::string>{full, d1, d2}));
  // Keeping d3 alone keeps its base.
  Write(&store, 1, 60, true, d3, 2);
  EXPECT_TRUE(store.Prune(1).empty());
  EXPECT_EQ(store.Committed().size(), 3u);
  // A damaged base fails the verification of every delta on it, naming the base's file.
  FlipByte(folder_ + "/" + full2 + "/server-0.snap", 40);
  const std::string error = ErrorOf([&] { store.Verify(CheckpointId(1, 60)); });
  EXPECT_TRUE(Contains(error, full2 + "/server-0.snap: checksum check failed")) << error;
  // A missing base is named.
  std::remove((folder_ + "/" + full2 + "/manifest.json").c_str());
  const std::string missing = ErrorOf([&] { store.Chain(d3); });
  EXPECT_TRUE(Contains(missing, d3 + " is a delta of " + full2 + ", which cannot be read"))
      << missing;
}

TEST_F(CheckpointStoreTest, AManifestWhoseDeltaLinksDoNotFitIsRefused) {
  CheckpointStore store(folder_);
  proto::CheckpointManifest manifest = Write(&store, 1, 10, /*commit=*/false);
  manifest.set_delta_of(CheckpointId(1, 20));  // not older
  manifest.set_delta_depth(1);
  EXPECT_TRUE(Contains(ErrorOf([&] { ManifestFromJson(ManifestToJson(manifest), "m"); }),
                       "is not a checkpoint id older than"));
  manifest.set_delta_of(CheckpointId(1, 5));
  manifest.set_delta_depth(0);
  EXPECT_TRUE(Contains(ErrorOf([&] { ManifestFromJson(ManifestToJson(manifest), "m"); }),
                       "delta_depth 0 does not fit"));
  manifest.set_delta_of("");
  manifest.mutable_files(0)->set_delta(true);
  EXPECT_TRUE(Contains(ErrorOf([&] { ManifestFromJson(ManifestToJson(manifest), "m"); }),
                       "is a delta, but the manifest names no delta_of"));
}

// A storage that passes every call to a folder's and keeps the largest read.
class ReadCountingStorage : public Storage {
 public:
  explicit ReadCountingStorage(const std::string& folder) : inner_(OpenStorage(folder)) {}
  void Put(const std::string& key, std::string_view data) override { inner_->Put(key, data); }
  std::string Get(const std::string& key) override {
    ++whole_reads;
    return inner_->Get(key);
  }
  std::string GetRange(const std::string& key, uint64_t offset, uint64_t length) override {
    std::string bytes = inner_->GetRange(key, offset, length);
    largest_read = std::max<uint64_t>(largest_read, bytes.size());
    return bytes;
  }
  std::vector<ObjectInfo> List(const std::string& prefix) override { return inner_->List(prefix); }
  void Delete(const std::string& key) override { inner_->Delete(key); }
  std::string UriOf(const std::string& key) const override { return inner_->UriOf(key); }

  int whole_reads = 0;
  uint64_t largest_read = 0;

 private:
  std::unique_ptr<Storage> inner_;
};

// A snapshot of `rows` rows of 3 floats in table 0, and the bias table.
ServerSnapshot LargeSnapshot(uint64_t rows) {
  ServerSnapshot snapshot = SampleSnapshot(0);
  SnapshotTable& weights = snapshot.tables[0];
  weights.row_width = 3;
  weights.weight_width = 1;
  weights.keys.clear();
  weights.rows.clear();
  weights.deleted = {7, 9};
  for (uint64_t key = 0; key < rows; ++key) {
    weights.keys.push_back(5 * key + 2);
    for (int c = 0; c < 3; ++c) weights.rows.push_back(static_cast<float>(key) + 0.25f * c);
  }
  return snapshot;
}

TEST_F(CheckpointStoreTest, ASnapshotFileIsReadInPiecesNeverWhole) {
  ReadCountingStorage storage(folder_);
  const ServerSnapshot snapshot = LargeSnapshot(1000000);  // 20 MB
  uint64_t checksum = 0;
  const std::string bytes = EncodeSnapshot(snapshot, &checksum);
  storage.Put("s.snap", bytes);
  const SnapshotFileReader reader(&storage, "s.snap", bytes.size(), "s.snap",
                                  ChecksumHex(checksum));
  EXPECT_EQ(reader.outline().spans, snapshot.spans);
  ASSERT_EQ(reader.outline().tables.size(), 2u);
  EXPECT_EQ(reader.outline().tables[0].deleted, snapshot.tables[0].deleted);
  EXPECT_TRUE(reader.outline().tables[0].keys.empty());
  EXPECT_EQ(reader.rows(0), 1000000u);
  SnapshotTable read;
  int chunks = 0;
  reader.ForEachChunk(
      0,
      [&](const SnapshotTable& chunk) {
        ++chunks;
        EXPECT_EQ(chunk.row_width, 3u);
        read.keys.insert(read.keys.end(), chunk.keys.begin(), chunk.keys.end());
        read.rows.insert(read.rows.end(), chunk.rows.begin(), chunk.rows.end());
      },
      300000);
  EXPECT_EQ(chunks, 4);
  EXPECT_EQ(read.keys, snapshot.tables[0].keys);
  EXPECT_EQ(read.rows, snapshot.tables[0].rows);
  EXPECT_EQ(storage.whole_reads, 0);
  // The checksum's pieces (8 MiB) are the largest reads: never the 20 MB.
  EXPECT_LE(storage.largest_read, uint64_t{8} << 20);
}

TEST_F(CheckpointStoreTest, ASnapshotFileReadInPiecesIsCheckedAsADecodedOneIs) {
  auto storage = OpenStorage(folder_);
  ServerSnapshot snapshot = LargeSnapshot(1000);
  uint64_t checksum = 0;
  std::string bytes = EncodeSnapshot(snapshot, &checksum);
  storage->Put("s.snap", bytes);
  EXPECT_TRUE(Contains(
      ErrorOf([&] { SnapshotFileReader(storage.get(), "s.snap", bytes.size(), "s.snap", "00"); }),
      "s.snap: checksum check failed"));
  bytes[100] ^= 1;
  storage->Put("flipped.snap", bytes);
  EXPECT_TRUE(Contains(
      ErrorOf([&] { SnapshotFileReader(storage.get(), "flipped.snap", bytes.size(), "f.snap"); }),
      "f.snap: checksum mismatch"));
  EXPECT_TRUE(Contains(
      ErrorOf([&] { SnapshotFileReader(storage.get(), "s.snap", bytes.size() + 8, "s.snap"); }),
      "s.snap: the file ended at byte"));
  // Keys out of order across two chunks: the row is named.
  std::swap(snapshot.tables[0].keys[499], snapshot.tables[0].keys[500]);
  bytes = EncodeSnapshot(snapshot, &checksum);
  storage->Put("unsorted.snap", bytes);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeSnapshot(bytes, "u.snap"); }), "not sorted at row 500"));
  const SnapshotFileReader reader(storage.get(), "unsorted.snap", bytes.size(), "u.snap");
  EXPECT_TRUE(Contains(ErrorOf([&] {
                         reader.ForEachChunk(
                             0, [](const SnapshotTable&) {}, 500);
                       }),
                       "u.snap: table 0 keys are not sorted at row 500"));
}

TEST_F(CheckpointStoreTest, ResolveFindsLatestOrSaysThereIsNone) {
  CheckpointStore store(folder_);
  EXPECT_TRUE(Contains(ErrorOf([&] { store.Resolve("latest"); }), "no checkpoint to resume"));
  Write(&store, 3, 0);
  EXPECT_EQ(store.Resolve("latest"), "ckpt-000003-000000000");
  EXPECT_EQ(store.Resolve("ckpt-000001-000000001"), "ckpt-000001-000000001");
  EXPECT_TRUE(Contains(ErrorOf([&] { store.Resolve("elsewhere"); }), "not a checkpoint id"));
}

TEST(Manifest, RoundTripsThroughJsonAndRefusesGarbage) {
  proto::CheckpointManifest manifest;
  manifest.set_format_version(1);
  manifest.set_id("ckpt-000001-000000002");
  manifest.set_batch(2);
  (*manifest.mutable_trainer()->mutable_metrics())["validation:roc_auc_score"] = 0.75;
  const proto::CheckpointManifest read = ManifestFromJson(ManifestToJson(manifest), "m");
  EXPECT_EQ(read.id(), manifest.id());
  EXPECT_EQ(read.trainer().metrics().at("validation:roc_auc_score"), 0.75);
  EXPECT_TRUE(Contains(ErrorOf([] { ManifestFromJson("{not json", "x/manifest.json"); }),
                       "x/manifest.json: not a valid manifest"));
  EXPECT_TRUE(Contains(ErrorOf([] { ManifestFromJson("{\"format_version\": 7}", "m"); }),
                       "format version 7"));
}

}  // namespace
}  // namespace keel
