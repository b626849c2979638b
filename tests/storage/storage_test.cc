// Storage: one specification run against both backends (a folder, and a real
// S3-protocol server on loopback), then what only S3 has: signatures,
// retries, multipart upload.
#include "io/storage.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/checksum.h"
#include "io/batch.h"
#include "io/checkpoint.h"
#include "io/input_split.h"
#include "io/readers.h"
#include "s3_server.h"
#include "test_util.h"

namespace keel::testing {
namespace {

enum class Backend { kFile, kS3 };

// One server for every test of the binary; each test works under its own prefix.
S3Server* SharedServer(std::string* problem) {
  static S3Server* server = nullptr;
  static std::string start_problem;
  if (server == nullptr && start_problem.empty()) {
    server = new S3Server();
    start_problem = server->Start();
  }
  *problem = start_problem;
  return start_problem.empty() ? server : nullptr;
}

// Stops the shared server when the test binary ends.
class StopServer : public ::testing::Environment {
 public:
  void TearDown() override {
    std::string problem;
    delete SharedServer(&problem);
  }
};
const auto* const kStopServer = ::testing::AddGlobalTestEnvironment(new StopServer);

std::string UniquePrefix() {
  static std::atomic<int> counter{0};
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(test->test_suite_name()) + "-" + test->name();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  return name + "-" + std::to_string(counter++);
}

std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random() & 0xFF);
  return bytes;
}

std::vector<std::string> KeysOf(const std::vector<ObjectInfo>& objects) {
  std::vector<std::string> keys;
  for (const ObjectInfo& object : objects) keys.push_back(object.key);
  return keys;
}

class StorageTest : public TempFolderTest, public ::testing::WithParamInterface<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kFile) {
      storage_ = OpenStorage("file://" + folder_ + "/root");
      return;
    }
    std::string problem;
    server_ = SharedServer(&problem);
    ASSERT_TRUE(server_ != nullptr) << problem;
    S3Options options = server_->Options();
    options.list_page_size = 7;  // several pages in the listing tests
    options.multipart_threshold = 5 << 20;
    options.part_size = 5 << 20;  // S3's smallest part
    storage_ =
        OpenS3Storage(std::string("s3://") + S3Server::kBucket + "/" + UniquePrefix(), options);
  }

  std::unique_ptr<Storage> storage_;
  S3Server* server_ = nullptr;  // for S3
};

TEST_P(StorageTest, PutThenGetReturnsTheBytes) {
  const std::string data("binary\0data\xff\n", 13);
  storage_->Put("a.bin", data);
  EXPECT_EQ(storage_->Get("a.bin"), data);
}

TEST_P(StorageTest, EmptyObjectRoundTrips) {
  storage_->Put("empty", "");
  EXPECT_EQ(storage_->Get("empty"), "");
  ASSERT_EQ(storage_->List("").size(), 1u);
  EXPECT_EQ(storage_->List("")[0].size, 0u);
}

TEST_P(StorageTest, PutReplacesAnObject) {
  storage_->Put("model.json", "first version, longer");
  storage_->Put("model.json", "second");
  EXPECT_EQ(storage_->Get("model.json"), "second");
  EXPECT_EQ(storage_->List("").size(), 1u);
}

TEST_P(StorageTest, NestedKeysAreListedRelativeToTheRootSortedWithSizes) {
  storage_->Put("ckpt-2/server-1.bin", "22");
  storage_->Put("ckpt-10/server-0.bin", "1");
  storage_->Put("LATEST", "ckpt-2");
  storage_->Put("ckpt-2/server-0.bin", "333");
  const std::vector<ObjectInfo> objects = storage_->List("");
  EXPECT_EQ(KeysOf(objects),
            (std::vector<std::string>{"LATEST", "ckpt-10/server-0.bin", "ckpt-2/server-0.bin",
                                      "ckpt-2/server-1.bin"}));
  ASSERT_EQ(objects.size(), 4u);
  EXPECT_EQ(objects[0].size, 6u);
  EXPECT_EQ(objects[2].size, 3u);
}

TEST_P(StorageTest, ListKeepsOnlyKeysWithThePrefix) {
  storage_->Put("ckpt-1/a", "x");
  storage_->Put("ckpt-1/b", "x");
  storage_->Put("ckpt-12/a", "x");
  storage_->Put("other", "x");
  EXPECT_EQ(KeysOf(storage_->List("ckpt-1/")), (std::vector<std::string>{"ckpt-1/a", "ckpt-1/b"}));
  EXPECT_EQ(KeysOf(storage_->List("ckpt-1")),
            (std::vector<std::string>{"ckpt-1/a", "ckpt-1/b", "ckpt-12/a"}));
  EXPECT_TRUE(storage_->List("nothing-here/").empty());
}

TEST_P(StorageTest, ListGoesOnOverManyPages) {
  // The S3 backend lists 7 keys a page here, so this takes several requests.
  std::vector<std::string> expected;
  for (int i = 0; i < 40; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "part-%03d", i);
    storage_->Put(key, std::to_string(i));
    expected.push_back(key);
  }
  EXPECT_EQ(KeysOf(storage_->List("part-")), expected);
}

TEST_P(StorageTest, KeysWithCharactersThatNeedEscaping) {
  // Not '&', '<', '>' or '\'': s3rver escapes those twice in its listings (S3
  // escapes once; S3RetryTest.ListingsAreUnescaped checks the parsing).
  const std::string key = "odd names/a b \"e\" +f=g?h#i%j,k;l@m$.txt";
  storage_->Put(key, "odd");
  EXPECT_EQ(storage_->Get(key), "odd");
  EXPECT_EQ(KeysOf(storage_->List("odd names/")), std::vector<std::string>{key});
}

TEST_P(StorageTest, GetOfAMissingObjectThrowsNotFoundNamingTheUri) {
  try {
    storage_->Get("missing/object");
    FAIL() << "no error";
  } catch (const NotFoundError& error) {
    EXPECT_TRUE(Contains(error.what(), storage_->UriOf("missing/object"))) << error.what();
  }
  EXPECT_THROW(storage_->GetRange("missing/object", 0, 10), NotFoundError);
}

TEST_P(StorageTest, GetRangeReturnsTheBytesAskedForAndFewerAtTheEnd) {
  storage_->Put("digits", "0123456789");
  EXPECT_EQ(storage_->GetRange("digits", 0, 3), "012");
  EXPECT_EQ(storage_->GetRange("digits", 4, 2), "45");
  EXPECT_EQ(storage_->GetRange("digits", 8, 100), "89");
  EXPECT_EQ(storage_->GetRange("digits", 10, 5), "");
  EXPECT_EQ(storage_->GetRange("digits", 3, 0), "");
}

TEST_P(StorageTest, DeleteRemovesTheObjectAndMissingIsNoError) {
  storage_->Put("a", "1");
  storage_->Put("b", "2");
  storage_->Delete("a");
  EXPECT_THROW(storage_->Get("a"), NotFoundError);
  EXPECT_EQ(KeysOf(storage_->List("")), std::vector<std::string>{"b"});
  EXPECT_NO_THROW(storage_->Delete("a"));
  EXPECT_NO_THROW(storage_->Delete("never-was"));
}

TEST_P(StorageTest, LargeObjectRoundTripsByteForByte) {
  // Above the S3 backend's 5 MiB multipart threshold here: three parts.
  const std::string data = RandomBytes((size_t{12} << 20) + 123, 7);
  storage_->Put("big/weights.bin", data);
  if (server_ != nullptr) {  // the server logs each request's path and query
    const std::string log = server_->Output();
    EXPECT_TRUE(Contains(log, "big/weights.bin?uploads=")) << "no multipart upload";
    EXPECT_TRUE(Contains(log, "big/weights.bin?partNumber=3&uploadId=")) << "no third part";
    EXPECT_FALSE(Contains(log, "big/weights.bin?partNumber=4&")) << "a fourth part";
  }
  const std::string back = storage_->Get("big/weights.bin");
  ASSERT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data);
  ASSERT_EQ(storage_->List("big/").size(), 1u);
  EXPECT_EQ(storage_->List("big/")[0].size, data.size());
  EXPECT_TRUE(storage_->GetRange("big/weights.bin", (size_t{5} << 20) - 10, 20) ==
              data.substr((size_t{5} << 20) - 10, 20));
}

TEST_P(StorageTest, PutPiecesWritesThePiecesInOrderAsOneObject) {
  const std::string big = RandomBytes(3 << 20, 7);
  storage_->PutPieces("p.bin", [&](const Storage::PieceSink& sink) {
    sink("head");
    sink(big);
    sink("");
    sink("tail");
  });
  EXPECT_EQ(storage_->Get("p.bin"), "head" + big + "tail");
}

TEST_P(StorageTest, PutPiecesThatThrowsLeavesTheOldObject) {
  storage_->Put("p.bin", "old");
  EXPECT_THROW(storage_->PutPieces("p.bin",
                                   [](const Storage::PieceSink& sink) {
                                     sink("new, but cut short");
                                     throw Error("the producer failed");
                                   }),
               Error);
  EXPECT_EQ(storage_->Get("p.bin"), "old");
  EXPECT_EQ(KeysOf(storage_->List("")), std::vector<std::string>{"p.bin"});
}

TEST_P(StorageTest, PutPiecesOfSeveralPartsRoundTripsByteForByte) {
  // Above the S3 backend's 5 MiB threshold here: a piece longer than a part,
  // then pieces that straddle the parts' boundaries; 4 parts.
  const std::string big = RandomBytes((size_t{11} << 20) + 5, 3);
  const std::string small = RandomBytes((size_t{64} << 10) + 1, 4);
  std::string expected = "head" + big;
  storage_->PutPieces("parts.bin", [&](const Storage::PieceSink& sink) {
    sink("head");
    sink(big);
    for (int i = 0; i < 100; ++i) sink(small);
    sink("tail");
  });
  for (int i = 0; i < 100; ++i) expected += small;
  expected += "tail";
  if (server_ != nullptr) {
    const std::string log = server_->Output();
    EXPECT_TRUE(Contains(log, "parts.bin?partNumber=4&uploadId=")) << "no fourth part";
    EXPECT_FALSE(Contains(log, "parts.bin?partNumber=5&")) << "a fifth part";
  }
  const std::string back = storage_->Get("parts.bin");
  ASSERT_EQ(back.size(), expected.size());
  EXPECT_TRUE(back == expected);
  const size_t boundary = size_t{10} << 20;
  EXPECT_TRUE(storage_->GetRange("parts.bin", boundary - 9, 18) ==
              expected.substr(boundary - 9, 18));
}

TEST_P(StorageTest, ConcurrentPutsAndGetsFromSeveralThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
        const std::string data = RandomBytes(1000 + i, t * 100 + i);
        storage_->Put(key, data);
        if (storage_->Get(key) != data) ++mismatches;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(storage_->List("").size(), 20u);
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageTest, ::testing::Values(Backend::kFile, Backend::kS3),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kFile ? "File" : "S3";
                         });

// ---- The folder backend.

using FileStorageTest = TempFolderTest;

TEST_F(FileStorageTest, PlainPathsAndFileUrisNameTheSameFolder) {
  OpenStorage(folder_ + "/data")->Put("x/y.txt", "hello");
  EXPECT_EQ(OpenStorage("file://" + folder_ + "/data/")->Get("x/y.txt"), "hello");
  EXPECT_EQ(OpenStorage("file://" + folder_ + "/data")->UriOf("x/y.txt"),
            "file://" + folder_ + "/data/x/y.txt");
}

TEST_F(FileStorageTest, PutLeavesNoTemporaryFileBehind) {
  auto storage = OpenFileStorage(folder_);
  storage->Put("a/b", "1");
  storage->Put("a/b", "2");
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder_)) {
    if (entry.is_regular_file()) ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(FileStorageTest, KeysThatLeaveTheRootAreRefused) {
  auto storage = OpenFileStorage(folder_ + "/root");
  EXPECT_TRUE(Contains(ErrorOf([&] { storage->Put("../escape", "x"); }), "bad key"));
  EXPECT_TRUE(Contains(ErrorOf([&] { storage->Get("a//b"); }), "bad key"));
  EXPECT_FALSE(std::filesystem::exists(folder_ + "/escape"));
}

TEST_F(FileStorageTest, UnknownSchemesAreRefused) {
  EXPECT_TRUE(Contains(ErrorOf([] { OpenStorage("gs://bucket/x"); }), "unknown scheme 'gs'"));
  EXPECT_TRUE(Contains(ErrorOf([] { OpenStorage("s3://"); }), "needs a bucket"));
}

// ---- S3 only.

class S3StorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string problem;
    server_ = SharedServer(&problem);
    ASSERT_TRUE(server_ != nullptr) << problem;
  }
  std::string Uri() const {
    return std::string("s3://") + S3Server::kBucket + "/" + UniquePrefix();
  }
  S3Server* server_ = nullptr;
};

TEST_F(S3StorageTest, AWrongSecretIsRefusedWithS3sCodeAndWithoutTheSecret) {
  S3Options options = server_->Options();
  options.secret_access_key = "wrong-secret-c0ffee-do-not-print";
  auto storage = OpenS3Storage(Uri(), options);
  const std::string put_error = ErrorOf([&] { storage->Put("a", "data"); });
  EXPECT_TRUE(Contains(put_error, "SignatureDoesNotMatch")) << put_error;
  EXPECT_TRUE(Contains(put_error, storage->UriOf("a"))) << put_error;
  EXPECT_TRUE(Contains(put_error, S3Server::kBucket)) << put_error;
  EXPECT_FALSE(Contains(put_error, options.secret_access_key)) << put_error;
  const std::string list_error = ErrorOf([&] { storage->List(""); });
  EXPECT_TRUE(Contains(list_error, "SignatureDoesNotMatch")) << list_error;
  EXPECT_FALSE(Contains(list_error, options.secret_access_key)) << list_error;
}

TEST_F(S3StorageTest, AnUnknownAccessKeyIsRefused) {
  S3Options options = server_->Options();
  options.access_key_id = "NOSUCHKEY";
  const std::string error = ErrorOf([&] { OpenS3Storage(Uri(), options)->Get("a"); });
  EXPECT_TRUE(Contains(error, "InvalidAccessKeyId")) << error;
  EXPECT_FALSE(Contains(error, options.secret_access_key)) << error;
}

TEST_F(S3StorageTest, AMissingBucketIsNamed) {
  auto storage = OpenS3Storage("s3://no-such-bucket/x", server_->Options());
  try {
    storage->List("");
    FAIL() << "no error";
  } catch (const NotFoundError& error) {
    EXPECT_TRUE(Contains(error.what(), "no-such-bucket")) << error.what();
  }
}

TEST_F(S3StorageTest, PrefixesKeepStoragesApart) {
  const std::string root = Uri();
  auto outer = OpenS3Storage(root, server_->Options());
  auto inner = OpenS3Storage(root + "/inner/", server_->Options());
  inner->Put("k", "inner");
  outer->Put("k", "outer");
  EXPECT_EQ(inner->Get("k"), "inner");
  EXPECT_EQ(outer->Get("inner/k"), "inner");
  EXPECT_EQ(KeysOf(outer->List("")), (std::vector<std::string>{"inner/k", "k"}));
  EXPECT_EQ(KeysOf(inner->List("")), std::vector<std::string>{"k"});
  EXPECT_EQ(inner->UriOf("k"), root + "/inner/k");
}

TEST_F(S3StorageTest, OpenStorageReadsTheEnvironment) {
  server_->ExportEnvironment();
  setenv("KEEL_S3_PART_SIZE", "6000000", 1);
  const S3Options options = S3Options::FromEnvironment();
  EXPECT_EQ(options.endpoint, server_->endpoint());
  EXPECT_EQ(options.part_size, 6000000u);
  unsetenv("KEEL_S3_PART_SIZE");
  auto storage = OpenStorage(Uri());
  storage->Put("from-env", "yes");
  EXPECT_EQ(storage->Get("from-env"), "yes");
  setenv("KEEL_S3_ADDRESSING", "sideways", 1);
  EXPECT_TRUE(Contains(ErrorOf([] { S3Options::FromEnvironment(); }), "KEEL_S3_ADDRESSING"));
  unsetenv("KEEL_S3_ADDRESSING");
}

TEST_F(S3StorageTest, PutPiecesUnderTheThresholdIsOnePut) {
  S3Options options = server_->Options();
  options.multipart_threshold = 5 << 20;
  options.part_size = 5 << 20;
  auto storage = OpenS3Storage(Uri(), options);
  const std::string data = RandomBytes(5 << 20, 9);  // the threshold itself: one PUT
  storage->PutPieces("one-put.bin", [&](const Storage::PieceSink& sink) {
    sink(std::string_view(data).substr(0, 1000));
    sink(std::string_view(data).substr(1000));
  });
  EXPECT_FALSE(Contains(server_->Output(), "one-put.bin?uploads=")) << "a multipart upload";
  EXPECT_TRUE(storage->Get("one-put.bin") == data);
}

TEST_F(S3StorageTest, PartSizesOutsideS3sLimitsAreRefused) {
  S3Options options = server_->Options();
  options.part_size = (5 << 20) - 1;
  const std::string error = ErrorOf([&] { OpenS3Storage(Uri(), options); });
  EXPECT_TRUE(Contains(error, "part size 5242879 bytes")) << error;
  EXPECT_TRUE(Contains(error, "KEEL_S3_PART_SIZE")) << error;
  options.part_size = (uint64_t{5} << 30) + 1;
  EXPECT_THROW(OpenS3Storage(Uri(), options), Error);
}

// A server's snapshot file of `rows` rows (a weight and an optimizer value each).
ServerSnapshot LargeSnapshot(uint64_t rows) {
  ServerSnapshot snapshot;
  snapshot.spans.emplace_back(0, ~uint64_t{0});
  SnapshotTable table;
  table.weight_width = 1;
  table.row_width = 2;
  for (uint64_t i = 0; i < rows; ++i) {
    table.keys.push_back(i * 7 + 3);
    table.rows.push_back(static_cast<float>(i));
    table.rows.push_back(static_cast<float>(i % 1000) / 8);
  }
  snapshot.tables.push_back(std::move(table));
  return snapshot;
}

TEST_F(S3StorageTest, AMultipartCheckpointIsVerifiedAndReadBackInPieces) {
  server_->ExportEnvironment();  // CheckpointStore opens s3:// from the environment
  const std::string uri = Uri();
  CheckpointStore store(uri);
  const ServerSnapshot snapshot = LargeSnapshot(1500000);  // 24 MB: 3 parts of 8 MiB
  proto::CheckpointManifest manifest;
  manifest.set_format_version(1);
  manifest.set_id(CheckpointId(1, 0));
  manifest.set_epoch(1);
  manifest.set_num_servers(1);
  uint64_t checksum = 0;
  const uint64_t bytes = store.PutFilePieces(
      manifest.id(), SnapshotFileName(0),
      [&](const Storage::PieceSink& sink) { checksum = WriteSnapshot(snapshot, sink); });
  EXPECT_TRUE(Contains(server_->Output(), SnapshotFileName(0) + "?partNumber=3&uploadId="));
  proto::CheckpointFile* file = manifest.add_files();
  file->set_name(SnapshotFileName(0));
  file->set_bytes(bytes);
  file->set_rows(1500000);
  file->set_checksum(ChecksumHex(checksum));
  proto::KeySpan* span = file->add_spans();
  span->set_first(0);
  span->set_last(~uint64_t{0});
  store.Commit(manifest);

  EXPECT_EQ(store.Verify(manifest.id()).id(), manifest.id());
  const SnapshotFileReader reader = store.OpenSnapshotFile(manifest.id(), *file);
  std::vector<uint64_t> keys;
  std::vector<float> rows;
  reader.ForEachChunk(
      0,
      [&](const SnapshotTable& chunk) {
        keys.insert(keys.end(), chunk.keys.begin(), chunk.keys.end());
        rows.insert(rows.end(), chunk.rows.begin(), chunk.rows.end());
      },
      100000);
  EXPECT_TRUE(keys == snapshot.tables[0].keys);
  EXPECT_TRUE(rows == snapshot.tables[0].rows);
}

// ---- Data channels on storage.

// "label 1:label" lines, labels from `first` on.
std::string LibsvmLines(int first, int count) {
  std::string text;
  for (int i = first; i < first + count; ++i) {
    text += std::to_string(i) + " 1:" + std::to_string(i) + " 7:0.5\n";
  }
  return text;
}

// The labels of every example in the splits, read as libsvm.
std::vector<int> ReadLabels(const std::vector<InputSplit>& splits) {
  std::vector<int> labels;
  for (const InputSplit& split : splits) {
    auto reader = OpenReader(split, ReaderOptions{});
    Batch batch;
    while (reader->Read(1000, &batch) > 0) {
    }
    for (const float label : batch.labels) labels.push_back(static_cast<int>(label));
  }
  return labels;
}

std::vector<int> Sorted(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  return values;
}

std::vector<int> Range(int count) {
  std::vector<int> values(count);
  for (int i = 0; i < count; ++i) values[i] = i;
  return values;
}

TEST_F(S3StorageTest, AChannelPrefixIsShardedByObjectAcrossWorkers) {
  const std::string uri = Uri();
  auto storage = OpenS3Storage(uri, server_->Options());
  server_->ExportEnvironment();  // ResolveChannel opens storage from the environment
  storage->Put("train/part-0", LibsvmLines(0, 50));
  storage->Put("train/part-1", LibsvmLines(50, 50));
  storage->Put("train/part-2", LibsvmLines(100, 50));
  storage->Put("train/_SUCCESS", "");
  storage->Put("train/old/part-9", LibsvmLines(1000, 5));  // deeper: not part of the channel
  const std::vector<InputSplit> first = ResolveChannel(uri + "/train/", 0, 2);
  const std::vector<InputSplit> second = ResolveChannel(uri + "/train/", 1, 2);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].path, uri + "/train/part-0");
  EXPECT_EQ(second[0].path, uri + "/train/part-1");
  std::vector<int> labels = ReadLabels(first);
  for (const int label : ReadLabels(second)) labels.push_back(label);
  EXPECT_EQ(Sorted(labels), Range(150));
}

TEST_F(S3StorageTest, OneObjectIsCutIntoByteRangesReadOnceEach) {
  const std::string uri = Uri();
  server_->ExportEnvironment();
  // About 4.5 MB: several prefetched blocks per worker's range.
  OpenS3Storage(uri, server_->Options())->Put("data.libsvm", LibsvmLines(0, 200000));
  std::vector<int> labels;
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<InputSplit> splits = ResolveChannel(uri + "/data.libsvm", rank, 3);
    ASSERT_EQ(splits.size(), 1u);
    EXPECT_EQ(splits[0].begin > 0, rank > 0);  // byte ranges, not the whole object
    EXPECT_LT(splits[0].end - splits[0].begin, size_t{2} << 20);
    for (const int label : ReadLabels(splits)) labels.push_back(label);
  }
  EXPECT_EQ(Sorted(labels), Range(200000));
}

TEST_F(S3StorageTest, BlockReaderReadsAnObjectFromAnOffsetAcrossFetches) {
  const std::string uri = Uri();
  server_->ExportEnvironment();
  const std::string data = RandomBytes((size_t{3} << 20) + 77, 3);
  OpenS3Storage(uri, server_->Options())->Put("blob", data);
  BlockReader reader(uri + "/blob", false, 12345, size_t{64} << 10);  // fetches of 1 MiB
  EXPECT_EQ(reader.file_size(), data.size());
  std::string back;
  while (reader.Fill(1)) {
    back.append(reader.data(), reader.size());
    reader.Consume(reader.size());
  }
  EXPECT_TRUE(reader.at_end());
  ASSERT_EQ(back.size(), data.size() - 12345);
  EXPECT_TRUE(back == data.substr(12345));
}

TEST_F(S3StorageTest, AMissingChannelIsNamed) {
  server_->ExportEnvironment();
  const std::string uri = Uri() + "/nothing/";
  const std::string error = ErrorOf([&] { ResolveChannel(uri, 0, 1); });
  EXPECT_TRUE(Contains(error, uri)) << error;
  EXPECT_TRUE(Contains(error, "no such object or prefix")) << error;
}

TEST_F(FileStorageTest, FileUrisWorkAsChannels) {
  WriteFile("a.libsvm", LibsvmLines(0, 10));
  WriteFile("b.libsvm", LibsvmLines(10, 10));
  EXPECT_EQ(Sorted(ReadLabels(ResolveChannel("file://" + folder_, 0, 1))), Range(20));
  EXPECT_EQ(Sorted(ReadLabels(ResolveChannel("file://" + folder_ + "/b.libsvm", 0, 1))).size(),
            10u);
}

TEST(S3RetryTest, NothingListeningFailsAfterTheRetriesNamingTheUri) {
  S3Options options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(UnusedPort());
  options.access_key_id = "key";
  options.secret_access_key = "secret-never-shown";
  options.max_retries = 2;
  options.initial_backoff_s = 0.01;
  auto storage = OpenS3Storage("s3://bucket/prefix", options);
  const std::string error = ErrorOf([&] { storage->Get("object"); });
  EXPECT_TRUE(Contains(error, "s3://bucket/prefix/object")) << error;
  EXPECT_TRUE(Contains(error, "after 3 attempts")) << error;
  EXPECT_FALSE(Contains(error, "secret-never-shown")) << error;
}

// A one-thread server on loopback that hands each connection it accepts to
// Answer, one request a connection, then closes it. A subclass calls Start()
// at the end of its constructor and Stop() first in its destructor.
class LoopbackServer {
 public:
  LoopbackServer() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    listen(listener_, 8);
  }
  virtual ~LoopbackServer() { close(listener_); }
  int port() const { return port_; }

 protected:
  void Start() {
    thread_ = std::thread([this] { Serve(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  virtual void Answer(int connection) = 0;

  // Reads into `*text` until it holds `part`; false on a closed or silent
  // (5 s) connection.
  static bool ReadUntil(int connection, std::string* text, const std::string& part) {
    char buffer[65536];
    while (text->find(part) == std::string::npos) {
      pollfd readable{connection, POLLIN, 0};
      if (poll(&readable, 1, 5000) <= 0) return false;
      const ssize_t got = read(connection, buffer, sizeof buffer);
      if (got <= 0) return false;
      text->append(buffer, static_cast<size_t>(got));
    }
    return true;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd ready{listener_, POLLIN, 0};
      if (poll(&ready, 1, 50) <= 0) continue;
      const int connection = accept(listener_, nullptr, nullptr);
      if (connection < 0) continue;
      Answer(connection);
      close(connection);
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Answers its requests, in order, with the given status codes (the last one
// repeats), each with `body`.
class FakeHttpServer : public LoopbackServer {
 public:
  explicit FakeHttpServer(std::vector<int> statuses, std::string body = "hello")
      : statuses_(std::move(statuses)), body_(std::move(body)) {
    Start();
  }
  ~FakeHttpServer() override { Stop(); }
  int requests() const { return requests_; }

 private:
  void Answer(int connection) override {
    std::string head;  // requests here have no body
    ReadUntil(connection, &head, "\r\n\r\n");
    const int status = statuses_[std::min<size_t>(requests_, statuses_.size() - 1)];
    ++requests_;
    const std::string reply = "HTTP/1.1 " + std::to_string(status) +
                              (status == 200 ? " OK" : " Internal Server Error") +
                              "\r\nContent-Length: " + std::to_string(body_.size()) +
                              "\r\nConnection: close\r\n\r\n" + body_;
    (void)!write(connection, reply.data(), reply.size());
  }

  std::vector<int> statuses_;
  std::string body_;
  std::atomic<int> requests_{0};
};

TEST(S3RetryTest, AServerErrorIsRetriedAndTheRetrySucceeds) {
  FakeHttpServer server({500, 503, 200});
  S3Options options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(server.port());
  options.access_key_id = "key";
  options.secret_access_key = "secret";
  options.max_retries = 3;
  options.initial_backoff_s = 0.01;
  EXPECT_EQ(OpenS3Storage("s3://bucket", options)->Get("object"), "hello");
  EXPECT_EQ(server.requests(), 3);
}

TEST(S3RetryTest, ServerErrorsBeyondTheRetriesFailWithTheStatus) {
  FakeHttpServer server({500});
  S3Options options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(server.port());
  options.max_retries = 1;
  options.initial_backoff_s = 0.01;
  const std::string error = ErrorOf([&] { OpenS3Storage("s3://bucket", options)->Get("object"); });
  EXPECT_TRUE(Contains(error, "s3://bucket/object")) << error;
  EXPECT_TRUE(Contains(error, "HTTP 500")) << error;
  EXPECT_EQ(server.requests(), 2);
}

TEST(S3RetryTest, ListingsAreUnescaped) {
  FakeHttpServer server({200},
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
                        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bucket</Name>"
                        "<Prefix>p/</Prefix><KeyCount>2</KeyCount><IsTruncated>false</IsTruncated>"
                        "<Contents><Key>p/a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&#39;&#x41;</Key>"
                        "<Size>12</Size></Contents><Contents><Key>p/z</Key><Size>3</Size>"
                        "</Contents></ListBucketResult>");
  S3Options options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(server.port());
  const std::vector<ObjectInfo> objects = OpenS3Storage("s3://bucket/p", options)->List("");
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ(objects[0].key, "a&b <c> \"d\" 'e'A");
  EXPECT_EQ(objects[0].size, 12u);
  EXPECT_EQ(objects[1].key, "z");
}

// Speaks just enough S3 for a multipart upload (start, parts, completion,
// abort) and single PUTs. It reads and counts the bodies without keeping them,
// answers part `failing_part` (0: none) with HTTP 500, and records each
// request line.
class FakeMultipartServer : public LoopbackServer {
 public:
  explicit FakeMultipartServer(int failing_part) : failing_part_(failing_part) { Start(); }
  ~FakeMultipartServer() override { Stop(); }
  S3Options Options() const {
    S3Options options;
    options.endpoint = "http://127.0.0.1:" + std::to_string(port());
    options.max_retries = 1;
    options.initial_backoff_s = 0.01;
    options.multipart_threshold = 5 << 20;
    options.part_size = 5 << 20;
    return options;
  }
  // Body bytes received so far (counted before the answer goes out).
  uint64_t body_bytes() const { return body_bytes_; }
  // How many request lines ("METHOD /path?query") so far contain `part`.
  int Count(const std::string& part) const {
    std::lock_guard<std::mutex> lock(mutex_);
    int count = 0;
    for (const std::string& request : requests_) count += Contains(request, part) ? 1 : 0;
    return count;
  }

 private:
  void Answer(int connection) override {
    std::string line;
    if (ReadRequest(connection, &line)) Reply(connection, line);
  }

  // Reads a request and counts its body; false if it did not all come.
  bool ReadRequest(int connection, std::string* line) {
    std::string head;
    if (!ReadUntil(connection, &head, "\r\n\r\n")) return false;
    const size_t head_end = head.find("\r\n\r\n") + 4;
    *line = head.substr(0, head.find(" HTTP/"));
    std::string lower = head.substr(0, head_end);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    uint64_t length = 0;
    if (const size_t at = lower.find("content-length:"); at != std::string::npos) {
      length = std::strtoull(lower.c_str() + at + 15, nullptr, 10);
    }
    if (Contains(lower, "expect: 100-continue")) {
      const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)!write(connection, go_on.data(), go_on.size());
    }
    uint64_t received = head.size() - head_end;
    char buffer[65536];
    while (received < length) {
      pollfd readable{connection, POLLIN, 0};
      if (poll(&readable, 1, 5000) <= 0) return false;
      const ssize_t got = read(connection, buffer, sizeof buffer);
      if (got <= 0) return false;
      received += static_cast<uint64_t>(got);
    }
    body_bytes_ += received;
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(*line);
    return true;
  }

  void Reply(int connection, const std::string& line) {
    int status = 200;
    std::string body, headers;
    if (Contains(line, "?uploads=")) {
      body =
          "<InitiateMultipartUploadResult><UploadId>upload-1</UploadId>"
          "</InitiateMultipartUploadResult>";
    } else if (const size_t at = line.find("?partNumber="); at != std::string::npos) {
      const int number = std::atoi(line.c_str() + at + 12);
      if (number == failing_part_) {
        status = 500;
        body = "<Error><Code>InternalError</Code><Message>part refused</Message></Error>";
      } else {
        headers = "ETag: \"etag-" + std::to_string(number) + "\"\r\n";
      }
    } else if (line.rfind("DELETE", 0) == 0) {
      status = 204;
    } else if (line.rfind("POST", 0) == 0) {
      body =
          "<CompleteMultipartUploadResult><ETag>\"whole\"</ETag></CompleteMultipartUploadResult>";
    }
    const std::string reply = "HTTP/1.1 " + std::to_string(status) +
                              (status == 500 ? " Internal Server Error" : " OK") + "\r\n" +
                              headers + "Content-Length: " + std::to_string(body.size()) +
                              "\r\nConnection: close\r\n\r\n" + body;
    (void)!write(connection, reply.data(), reply.size());
  }

  const int failing_part_;
  std::atomic<uint64_t> body_bytes_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> requests_;
};

// Hands `total` bytes to the sink in pieces of `piece` bytes (one buffer,
// reused), calling `check` before each.
void ProduceCounted(const Storage::PieceSink& sink, uint64_t total, size_t piece,
                    const std::function<void(uint64_t produced)>& check) {
  const std::string buffer = RandomBytes(piece, 11);
  for (uint64_t produced = 0; produced < total; produced += piece) {
    check(produced);
    sink(std::string_view(buffer).substr(0, std::min<uint64_t>(piece, total - produced)));
  }
}

TEST(S3MultipartTest, AFailedPartAbortsTheUploadNamingTheKeyAndThePart) {
  FakeMultipartServer server(/*failing_part=*/2);
  auto storage = OpenS3Storage("s3://bucket/prefix", server.Options());
  const std::string error = ErrorOf([&] {
    storage->PutPieces("ckpt/server-0.snap", [](const Storage::PieceSink& sink) {
      ProduceCounted(sink, uint64_t{18} << 20, (1 << 20) + 3, [](uint64_t) {});
    });
  });
  EXPECT_TRUE(Contains(error, "s3://bucket/prefix/ckpt/server-0.snap")) << error;
  EXPECT_TRUE(Contains(error, "part 2")) << error;
  EXPECT_TRUE(Contains(error, "HTTP 500 InternalError")) << error;
  EXPECT_EQ(server.Count("partNumber=2&"), 2) << "tried once more, as every request is";
  EXPECT_EQ(server.Count("partNumber=3&"), 0) << "went on after the failed part";
  EXPECT_EQ(server.Count("DELETE /bucket/prefix/ckpt/server-0.snap?uploadId=upload-1"), 1)
      << "not aborted";
  EXPECT_EQ(server.Count("POST /bucket/prefix/ckpt/server-0.snap?uploadId="), 0) << "completed";
}

TEST(S3MultipartTest, AProducerFailureAfterSomePartsAbortsTheUpload) {
  FakeMultipartServer server(/*failing_part=*/0);
  auto storage = OpenS3Storage("s3://bucket", server.Options());
  const std::string error = ErrorOf([&] {
    storage->PutPieces("cut.snap", [](const Storage::PieceSink& sink) {
      ProduceCounted(sink, uint64_t{12} << 20, 1 << 20, [](uint64_t) {});
      throw Error("the producer failed");
    });
  });
  EXPECT_EQ(error, "the producer failed");
  EXPECT_EQ(server.Count("cut.snap?partNumber=2&"), 1);
  EXPECT_EQ(server.Count("DELETE /bucket/cut.snap?uploadId=upload-1"), 1) << "not aborted";
  EXPECT_EQ(server.Count("POST /bucket/cut.snap?uploadId="), 0) << "completed";
}

TEST(S3MultipartTest, PutPiecesHoldsAtMostAPartOfTheObject) {
  FakeMultipartServer server(/*failing_part=*/0);
  const S3Options options = server.Options();
  auto storage = OpenS3Storage("s3://bucket", options);
  const uint64_t total = uint64_t{40} << 20;
  uint64_t most_held = 0;
  storage->PutPieces("big.snap", [&](const Storage::PieceSink& sink) {
    // Before each piece: what was handed over and has not reached the server
    // is what the storage holds.
    ProduceCounted(sink, total, (1 << 20) + 3, [&](uint64_t produced) {
      most_held = std::max(most_held, produced - std::min(produced, server.body_bytes()));
    });
  });
  EXPECT_LE(most_held, options.part_size);
  EXPECT_GT(most_held, 0u);
  EXPECT_EQ(server.Count("big.snap?partNumber=8&"), 1);
  EXPECT_EQ(server.Count("big.snap?partNumber=9&"), 0);
  EXPECT_EQ(server.Count("POST /bucket/big.snap?uploadId=upload-1"), 1);
  // The parts and the completion's list of them.
  EXPECT_GE(server.body_bytes(), total);
}

}  // namespace
}  // namespace keel::testing
