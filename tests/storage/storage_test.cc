// Storage: one specification run against both backends (a folder, and a real
// S3-protocol server on loopback), then what only S3 has: signatures,
// retries, multipart upload.
#include "io/storage.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/batch.h"
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

// A one-thread HTTP server on loopback that answers its requests, in order,
// with the given status codes (the last one repeats), each with `body`.
class FakeHttpServer {
 public:
  explicit FakeHttpServer(std::vector<int> statuses, std::string body = "hello")
      : statuses_(std::move(statuses)), body_(std::move(body)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    listen(listener_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeHttpServer() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd ready{listener_, POLLIN, 0};
      if (poll(&ready, 1, 50) <= 0) continue;
      const int connection = accept(listener_, nullptr, nullptr);
      if (connection < 0) continue;
      // Read the request head (requests here have no body).
      std::string head;
      char buffer[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        pollfd readable{connection, POLLIN, 0};
        if (poll(&readable, 1, 5000) <= 0) break;
        const ssize_t got = read(connection, buffer, sizeof buffer);
        if (got <= 0) break;
        head.append(buffer, static_cast<size_t>(got));
      }
      const int status = statuses_[std::min<size_t>(requests_, statuses_.size() - 1)];
      ++requests_;
      const std::string reply = "HTTP/1.1 " + std::to_string(status) +
                                (status == 200 ? " OK" : " Internal Server Error") +
                                "\r\nContent-Length: " + std::to_string(body_.size()) +
                                "\r\nConnection: close\r\n\r\n" + body_;
      (void)!write(connection, reply.data(), reply.size());
      close(connection);
    }
  }

  std::vector<int> statuses_;
  std::string body_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
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

}  // namespace
}  // namespace keel::testing
