// Keel's own files crafted to do harm: snapshots, manifests, LATEST and model
// artifacts whose sizes, counts and widths lie (with valid checksums), each
// refused with an error naming the file, the field and the place, before
// anything is allocated for the lie.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "base/files.h"
#include "io/checkpoint.h"
#include "io/storage.h"
#include "test_util.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

// A file built field by field, in the machine's byte order as Keel writes.
class FileBuilder {
 public:
  template <typename T>
  FileBuilder& Put(T value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(value));
    return *this;
  }
  FileBuilder& Text(const std::string& text) {
    bytes_ += text;
    return *this;
  }
  // The bytes so far followed by their checksum, as every Keel file ends.
  std::string WithChecksum() const {
    const uint64_t sum = testing::Fnv1a64(bytes_);
    return bytes_ + std::string(reinterpret_cast<const char*>(&sum), sizeof(sum));
  }
  size_t size() const { return bytes_.size(); }

 private:
  std::string bytes_;
};

// A snapshot's fixed start: magic, version 1, server rank 0, no spans.
FileBuilder SnapshotStart() {
  FileBuilder file;
  file.Text("KEELSNAP").Put<uint32_t>(1).Put<int32_t>(0).Put<uint32_t>(0);
  return file;
}

// A table header: id, weight width, row width, row count.
FileBuilder& PutTable(FileBuilder& file, uint32_t id, uint32_t weight_width, uint32_t row_width,
                      uint64_t rows) {
  return file.Put(id).Put(weight_width).Put(row_width).Put(rows);
}

TEST(HostileSnapshot, ClaimingTwoToTheFortyRowsIsRefusedNamingTheFieldAndItsOffset) {
  FileBuilder file = SnapshotStart();
  file.Put<uint32_t>(1);  // one table
  PutTable(file, 0, 1, 1, uint64_t{1} << 40);
  const std::string error =
      ErrorOf([&] { DecodeSnapshot(file.WithChecksum(), "s/server-0.snap"); });
  // The row count sits after magic 8, version 4, rank 4, spans 4, tables 4,
  // and the table's id and two widths (12).
  EXPECT_TRUE(Contains(error, "s/server-0.snap: truncated at byte 36: row count 1099511627776"))
      << error;
}

TEST(HostileSnapshot, AHugeWeightWidthIsRefusedEvenWithoutRows) {
  FileBuilder file = SnapshotStart();
  file.Put<uint32_t>(1);
  PutTable(file, 0, UINT32_MAX, UINT32_MAX, 0);
  const std::string error = ErrorOf([&] { DecodeSnapshot(file.WithChecksum(), "f"); });
  EXPECT_TRUE(Contains(error, "f: at byte 28, weight width 4294967295 is outside")) << error;
}

TEST(HostileSnapshot, ASpanOrTableCountBeyondTheFileIsRefusedBeforeAllocating) {
  FileBuilder spans;
  spans.Text("KEELSNAP").Put<uint32_t>(1).Put<int32_t>(0).Put<uint32_t>(UINT32_MAX);
  const std::string span_error = ErrorOf([&] { DecodeSnapshot(spans.WithChecksum(), "f"); });
  EXPECT_TRUE(Contains(span_error, "f: truncated at byte 16: span count 4294967295")) << span_error;

  FileBuilder tables = SnapshotStart();
  tables.Put<uint32_t>(UINT32_MAX);
  const std::string table_error = ErrorOf([&] { DecodeSnapshot(tables.WithChecksum(), "f"); });
  EXPECT_TRUE(Contains(table_error, "f: truncated at byte 20: table count 4294967295"))
      << table_error;
}

TEST(HostileSnapshot, AnEmptyKeySpanAndANegativeRankAreRefused) {
  FileBuilder span;
  span.Text("KEELSNAP").Put<uint32_t>(1).Put<int32_t>(0).Put<uint32_t>(1);
  span.Put<uint64_t>(9).Put<uint64_t>(3).Put<uint32_t>(0);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeSnapshot(span.WithChecksum(), "f"); }),
                       "f: at byte 20, key span [9, 3] is empty"));
  FileBuilder rank;
  rank.Text("KEELSNAP").Put<uint32_t>(1).Put<int32_t>(-4).Put<uint32_t>(0).Put<uint32_t>(0);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeSnapshot(rank.WithChecksum(), "f"); }),
                       "f: at byte 12, server rank -4 is outside"));
}

TEST(HostileSnapshot, ATableListedTwiceIsRefused) {
  FileBuilder file = SnapshotStart();
  file.Put<uint32_t>(2);
  PutTable(file, 3, 1, 1, 0);
  PutTable(file, 3, 1, 1, 0);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeSnapshot(file.WithChecksum(), "f"); }),
                       "table 3 follows table 3"));
}

// A checkpoint folder written by hand: one snapshot file and a manifest that
// lists it with the size and checksum given.
class HostileCheckpoint : public testing::TempFolderTest {
 protected:
  static constexpr char kId[] = "ckpt-000001-000000000";

  void WriteCheckpoint(const std::string& snapshot, uint64_t listed_bytes,
                       const std::string& name = "server-0.snap") {
    MakeDirectories(folder_ + "/" + kId);
    testing::WriteFile(folder_ + "/" + kId + "/" + name, snapshot);
    WriteManifest(name, listed_bytes);
  }
  void WriteManifest(const std::string& name, uint64_t listed_bytes) {
    MakeDirectories(folder_ + "/" + kId);
    testing::WriteFile(folder_ + "/" + kId + "/manifest.json",
                       std::string("{\"format_version\": 1, \"id\": \"") + kId +
                           "\", \"epoch\": 1, \"files\": [{\"name\": \"" + name +
                           "\", \"bytes\": \"" + std::to_string(listed_bytes) +
                           "\", \"checksum\": \"0000000000000000\"}]}");
    testing::WriteFile(folder_ + "/LATEST", std::string(kId) + "\n");
  }
  std::string VerifyError() {
    return ErrorOf([&] { CheckpointStore(folder_).Verify(kId); });
  }
};

// Was a segfault: the checksum was taken over size - 8 bytes, which wrapped
// around for a file shorter than its checksum.
TEST_F(HostileCheckpoint, AThreeByteSnapshotIsRefusedNamingTheManifestField) {
  WriteCheckpoint("abc", 3);
  const std::string error = VerifyError();
  EXPECT_TRUE(Contains(error, kId + std::string("/manifest.json: files[0].bytes 3 is too small")))
      << error;
}

TEST_F(HostileCheckpoint, ASnapshotLargerThanTheManifestSaysIsRefusedWithoutReadingItWhole) {
  const std::string snapshot = SnapshotStart().Put<uint32_t>(0).WithChecksum();
  WriteCheckpoint(snapshot, snapshot.size());
  const std::string path = folder_ + "/" + kId + "/server-0.snap";
  const uint64_t huge = uint64_t{8} << 30;  // sparse: takes no room on disk
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(huge)), 0);
  const std::string error = VerifyError();
  EXPECT_TRUE(
      Contains(error, path + ": size check failed (8589934592 bytes, the manifest says 32)"))
      << error;
}

TEST_F(HostileCheckpoint, ATruncatedSnapshotIsRefusedNamingBothSizes) {
  const std::string snapshot = SnapshotStart().Put<uint32_t>(0).WithChecksum();
  WriteCheckpoint(snapshot.substr(0, 20), snapshot.size());
  const std::string error = VerifyError();
  EXPECT_TRUE(Contains(error, "server-0.snap: size check failed (20 bytes, the manifest says 32)"))
      << error;
}

TEST_F(HostileCheckpoint, AManifestNamingAFileOutsideTheCheckpointIsRefused) {
  WriteManifest("../../elsewhere", 36);
  const std::string error = ErrorOf([&] { CheckpointStore(folder_).ReadManifest(kId); });
  EXPECT_TRUE(Contains(error, "files[0].name '../../elsewhere' is not a snapshot file's name"))
      << error;
}

TEST_F(HostileCheckpoint, AHugeLatestFileIsRefusedNamingItsSize) {
  testing::WriteFile(folder_ + "/LATEST", std::string(1 << 20, 'x'));
  const std::string error = ErrorOf([&] { CheckpointStore(folder_).Latest(); });
  EXPECT_TRUE(
      Contains(error, "LATEST: size check failed (1048576 bytes; a LATEST file is at most 4096)"))
      << error;
}

TEST_F(HostileCheckpoint, GetAtMostReadsNoMoreThanAllowedAndNamesTheRealSize) {
  const std::string path = WriteFile("big", "");
  ASSERT_EQ(truncate(path.c_str(), off_t{1} << 33), 0);
  const std::unique_ptr<Storage> storage = OpenFileStorage(folder_);
  const std::string error = ErrorOf([&] { GetAtMost(*storage, "big", 100, "a test file"); });
  EXPECT_TRUE(
      Contains(error, "big: size check failed (8589934592 bytes; a test file is at most 100)"))
      << error;
  testing::WriteFile(path, "exactly");
  EXPECT_EQ(GetAtMost(*storage, "big", 7, "a test file"), "exactly");
}

// weights.bin's header: magic, version, job, predictor type, classes, factors,
// use_bias, weight width, bias width, feature count.
struct ModelHeader {
  uint32_t job = 0, predictor = 0, classes = 2, factors = 8, use_bias = 1, width = 1, bias = 1;
  uint64_t count = 0;
  FileBuilder Build() const {
    FileBuilder file;
    file.Text("KEELMDL1").Put<uint32_t>(1).Put(job).Put(predictor).Put(classes).Put(factors);
    file.Put(use_bias).Put(width).Put(bias).Put(count);
    return file;
  }
};

class HostileModel : public testing::TempFolderTest {
 protected:
  HostileModel() : TempFolderTest("model") {}
  // weights.bin of `header`, `rows` rows of `header.width` zero weights, the
  // bias, and a valid checksum; no model.json.
  std::string ReadError(const ModelHeader& header, uint64_t rows = 0) {
    FileBuilder file = header.Build();
    for (uint64_t i = 0; i < rows; ++i) {
      file.Put<uint64_t>(i);
      for (uint32_t w = 0; w < header.width; ++w) file.Put<float>(0);
    }
    for (uint32_t b = 0; b < header.bias; ++b) file.Put<float>(0);
    WriteFile("weights.bin", file.WithChecksum());
    return ErrorOf([&] { ModelArtifact::Read(folder_); });
  }
  std::string path() const { return folder_ + "/weights.bin"; }
};

// Was: read, then `keel predict` aborted allocating 2^31 classes per example.
TEST_F(HostileModel, AHugeClassCountIsRefusedNamingTheField) {
  ModelHeader header;
  header.predictor = 2;  // multiclass_classifier
  header.classes = header.width = INT32_MAX;
  header.bias = 0;
  const std::string error = ReadError(header);
  EXPECT_TRUE(
      Contains(error, path() + ": at byte 20, num_classes 2147483647 is outside 3..1000000"))
      << error;
}

TEST_F(HostileModel, AFactorCountThatWrapsToANegativeWidthIsRefused) {
  ModelHeader header;
  header.job = 1;  // factorization_machines
  header.factors = UINT32_MAX;
  header.width = 0;  // 1 + (int)UINT32_MAX
  const std::string error = ReadError(header);
  EXPECT_TRUE(Contains(error, path() + ": at byte 24, num_factors 4294967295 is outside 1..4096"))
      << error;
}

// Was: read, and scoring read the bias past its end.
TEST_F(HostileModel, ABiasNarrowerThanTheModelsIsRefused) {
  ModelHeader header;
  header.bias = 0;
  const std::string error = ReadError(header);
  EXPECT_TRUE(Contains(error, path() + ": at byte 36, the bias width 0 is not the 1")) << error;
}

TEST_F(HostileModel, ClaimingTwoToTheFortyFeaturesIsRefusedBeforeReadingOn) {
  ModelHeader header;
  header.count = uint64_t{1} << 40;
  const std::string error = ReadError(header, 2);
  EXPECT_TRUE(Contains(error, path() + ": at byte 40, the feature count 1099511627776")) << error;
}

TEST_F(HostileModel, AFileLongerThanItsHeaderSaysIsRefused) {
  ModelHeader header;
  header.count = 1;
  const std::string error = ReadError(header, 3);
  EXPECT_TRUE(Contains(error, path() + ": size check failed (96 bytes; the model file")) << error;
}

TEST_F(HostileModel, ParseModelArtifactDecodesWhatWriteWrote) {
  ModelArtifact model;
  model.features = {4, 9};
  model.weights = {0.5f, -2};
  model.bias = {1};
  model.Write(folder_);
  const std::string bytes = testing::ReadFileOrEmpty(path());
  EXPECT_EQ(ModelFileBytes(bytes.substr(0, kModelHeaderBytes), "w"), bytes.size());
  const ModelArtifact back = ParseModelArtifact(bytes, "w");
  EXPECT_EQ(back.features, model.features);
  EXPECT_EQ(back.weights, model.weights);
  EXPECT_EQ(back.bias, model.bias);
}

}  // namespace
}  // namespace keel
