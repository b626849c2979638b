// The keel binary on crafted files: `keel checkpoint verify`, `keel scheduler
// --resume` and `keel predict` refuse a snapshot or model whose sizes lie with
// an error naming the file and exit 1, instead of crashing, and `keel predict`
// scores a model as wide as training allows in bounded memory. Each runs under
// an address-space limit (ulimit -v; 2 GB unless the test says), so that
// reading a huge file whole is a failure the test sees rather than a load on
// the machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "base/files.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

template <typename T>
std::string Field(T value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(value));
}

std::string WithChecksum(const std::string& bytes) {
  return bytes + Field(testing::Fnv1a64(bytes));
}

// A valid snapshot of no spans and no tables: magic, version 1, rank 0, zero
// spans, zero tables, checksum.
std::string EmptySnapshot() {
  return WithChecksum("KEELSNAP" + Field<uint32_t>(1) + Field<int32_t>(0) + Field<uint32_t>(0) +
                      Field<uint32_t>(0));
}

class HostileFilesProcess : public testing::TempFolderTest {
 protected:
  HostileFilesProcess() : TempFolderTest("hostile") {}
  static constexpr char kId[] = "ckpt-000001-000000000";

  // A checkpoint whose manifest lists server-0.snap with `listed_bytes` bytes
  // and the checksum of `snapshot`'s first bytes (what a manifest records).
  void WriteCheckpoint(const std::string& snapshot, uint64_t listed_bytes) {
    const std::string folder = folder_ + "/ckpt/" + kId;
    MakeDirectories(folder);
    testing::WriteFile(folder + "/server-0.snap", snapshot);
    testing::WriteFile(folder + "/manifest.json",
                       std::string("{\"format_version\": 1, \"id\": \"") + kId +
                           "\", \"epoch\": 1, \"num_servers\": 1, \"num_workers\": 1, "
                           "\"files\": [{\"name\": \"server-0.snap\", \"server_rank\": 0, "
                           "\"bytes\": \"" +
                           std::to_string(listed_bytes) + "\", \"checksum\": \"0\"}]}");
    testing::WriteFile(folder_ + "/ckpt/LATEST", std::string(kId) + "\n");
  }
  std::string SnapshotPath() const { return folder_ + "/ckpt/" + kId + "/server-0.snap"; }
  std::string CheckpointUri() const { return "file://" + folder_ + "/ckpt/" + kId; }

  // `argv` run by the shell under an address-space limit of `kilobytes`
  // (2 GB unless given), killed after `timeout_s`.
  // `limit`: ulimit's -v (address space) or -d (data: the heap and anonymous
  // mappings, not shared libraries such as CUDA's, which map gigabytes of
  // address space when the build has them).
  static testing::Exit RunLimited(const std::vector<std::string>& argv, int kilobytes = 2000000,
                                  double timeout_s = 60, const std::string& limit = "-v") {
    std::string command = "ulimit " + limit + " " + std::to_string(kilobytes) + "; exec";
    for (const std::string& arg : argv) command += " '" + arg + "'";
    return testing::Shell(command, timeout_s);
  }
  testing::Exit Verify() {
    return RunLimited({KeelBinary(), "checkpoint", "verify", CheckpointUri()});
  }
  testing::Exit Resume() {
    return RunLimited({KeelBinary(), "scheduler", "--port=" + std::to_string(testing::UnusedPort()),
                       "--num_servers=1", "--num_workers=1", "--resume=" + CheckpointUri()});
  }
};

// Was a segfault (exit 139) in both: an unsigned underflow on a file shorter
// than its own checksum.
TEST_F(HostileFilesProcess, AThreeByteSnapshotIsRefusedByVerifyAndByResume) {
  WriteCheckpoint("abc", 3);
  for (const testing::Exit& exit : {Verify(), Resume()}) {
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 1) << exit.output;
    EXPECT_TRUE(Contains(exit.output, "manifest.json: files[0].bytes 3 is too small"))
        << exit.output;
  }
}

// Was an abort (bad_alloc): the whole 8 GB was read before its size was checked.
TEST_F(HostileFilesProcess, AnEightGigabyteSnapshotIsRefusedWithoutReadingIt) {
  const std::string snapshot = EmptySnapshot();
  WriteCheckpoint(snapshot, snapshot.size());
  ASSERT_EQ(truncate(SnapshotPath().c_str(), off_t{8} << 30), 0);  // sparse
  for (const testing::Exit& exit : {Verify(), Resume()}) {
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 1) << exit.output;
    EXPECT_TRUE(Contains(exit.output, SnapshotPath() + ": size check failed (8589934592 bytes,"))
        << exit.output;
  }
}

TEST_F(HostileFilesProcess, ATruncatedSnapshotIsRefusedNamingBothSizes) {
  const std::string snapshot = EmptySnapshot();
  WriteCheckpoint(snapshot.substr(0, 17), snapshot.size());
  for (const testing::Exit& exit : {Verify(), Resume()}) {
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 1) << exit.output;
    EXPECT_TRUE(Contains(exit.output, "size check failed (17 bytes, the manifest says 32)"))
        << exit.output;
  }
}

TEST_F(HostileFilesProcess, ASnapshotClaimingTwoToTheFortyRowsIsRefusedByVerify) {
  // One table (id 0, widths 1 and 1) claiming 2^40 rows and holding none.
  const std::string snapshot =
      WithChecksum("KEELSNAP" + Field<uint32_t>(1) + Field<int32_t>(0) + Field<uint32_t>(0) +
                   Field<uint32_t>(1) + Field<uint32_t>(0) + Field<uint32_t>(1) +
                   Field<uint32_t>(1) + Field<uint64_t>(uint64_t{1} << 40));
  WriteCheckpoint(snapshot, snapshot.size());
  // The manifest's checksum must match for Verify to reach the structure.
  const std::string manifest = folder_ + "/ckpt/" + kId + "/manifest.json";
  std::string text = testing::ReadFileOrEmpty(manifest);
  char hex[17];
  std::snprintf(
      hex, sizeof(hex), "%016llx",
      static_cast<unsigned long long>(testing::Fnv1a64(snapshot.substr(0, snapshot.size() - 8))));
  text.replace(text.find("\"checksum\": \"0\""), 15, std::string("\"checksum\": \"") + hex + "\"");
  testing::WriteFile(manifest, text);
  const testing::Exit exit = Verify();
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "server-0.snap: truncated at byte 36: row count 1099511627776"))
      << exit.output;
}

// Was an abort (length_error, bad_alloc) scoring with 2^31 - 1 classes.
TEST_F(HostileFilesProcess, PredictRefusesAModelHeaderClaimingAHugeWidth) {
  // magic, version 1, linear learner, multiclass, 2^31 - 1 classes, 8 factors,
  // bias, weight width = classes, bias width 0, no features.
  const uint32_t classes = INT32_MAX;
  const std::string weights =
      WithChecksum("KEELMDL1" + Field<uint32_t>(1) + Field<uint32_t>(0) + Field<uint32_t>(2) +
                   Field(classes) + Field<uint32_t>(8) + Field<uint32_t>(1) + Field(classes) +
                   Field<uint32_t>(0) + Field<uint64_t>(0));
  MakeDirectories(folder_ + "/model");
  testing::WriteFile(folder_ + "/model/weights.bin", weights);
  WriteFile("data.libsvm", "1 3:1 7:0.5\n0 2:1\n");
  const testing::Exit exit =
      RunLimited({KeelBinary(), "predict", "--model_dir=" + folder_ + "/model",
                  "--data=" + folder_ + "/data.libsvm", "--out=" + folder_ + "/scores"});
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, folder_ + "/model/weights.bin: at byte 20, num_classes " +
                                        std::to_string(classes) + " is outside"))
      << exit.output;
}

// Was an abort (bad_alloc, exit 134): predict scored 4096 examples at a time
// and kept every example's predictions for the metrics, 4 MB an example for a
// model of a million classes (a width training allows); under this test's
// 500 MB data limit that was "out of memory" (exit 1) at the first batch. Now a
// batch's predictions stay within a budget and the metrics are tallied as the
// batches come, so the 64 examples (256 MB of predictions) are scored.
TEST_F(HostileFilesProcess, PredictScoresAMillionClassModelWithinBoundedMemory) {
  // magic, version 1, linear learner, multiclass, 10^6 classes, 0 factors,
  // bias, weight width = bias width = classes, one feature (index 1) of zero
  // weights, a zero bias: every class is equally likely, 10^-6. The data's
  // "2:1" is that feature (libsvm indices are one-based by default).
  const uint32_t classes = 1000000;
  const std::string zeros(sizeof(float) * classes, '\0');
  const std::string weights =
      WithChecksum("KEELMDL1" + Field<uint32_t>(1) + Field<uint32_t>(0) + Field<uint32_t>(2) +
                   Field(classes) + Field<uint32_t>(0) + Field<uint32_t>(1) + Field(classes) +
                   Field(classes) + Field<uint64_t>(1) + Field<uint64_t>(1) + zeros + zeros);
  MakeDirectories(folder_ + "/model");
  testing::WriteFile(folder_ + "/model/weights.bin", weights);
  // Labels 0 and 2 in turn. Ties rank to the lower class: every example is
  // predicted class 0, so half are right, label 2 ranks third (within the
  // default top 3), and the mean gain is (1 + 1 / log2(4)) / 2.
  std::string data;
  for (int row = 0; row < 64; ++row) data += (row % 2 == 0 ? "0" : "2") + std::string(" 2:1\n");
  WriteFile("data.libsvm", data);
  // Predictions go to /dev/null (64 lines of a million scores are 400 MB of
  // text, some 6 s of formatting); the metrics show every example scored.
  const testing::Exit exit =
      RunLimited({KeelBinary(), "predict", "--model_dir=" + folder_ + "/model",
                  "--data=" + folder_ + "/data.libsvm", "--out=/dev/null"},
                 500000, 240, "-d");
  ASSERT_TRUE(exit.finished) << exit.output.substr(0, 2000);
  EXPECT_EQ(exit.code, 0) << exit.output.substr(0, 2000);
  EXPECT_TRUE(Contains(exit.output, "scored 64 examples")) << exit.output.substr(0, 2000);
  EXPECT_TRUE(Contains(exit.output, "multiclass_accuracy 0.5\n")) << exit.output.substr(0, 2000);
  EXPECT_TRUE(Contains(exit.output, "multiclass_top_k_accuracy 1\n"))
      << exit.output.substr(0, 2000);
  EXPECT_TRUE(Contains(exit.output, "dcg 0.75\n")) << exit.output.substr(0, 2000);
}

}  // namespace
}  // namespace keel
