// The batch cache (worker/batch_cache.h) under BatchStream: later passes
// read the first pass's minibatches, exactly; changed input, a damaged file,
// the size bound, a stopped pass and a crashed writer each leave no wrong or
// stale cache behind; a file truncated while in use is an error naming it.
#include "worker/batch_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/checksum.h"
#include "base/error.h"
#include "base/files.h"
#include "test_util.h"
#include "worker/batch_stream.h"
#include "worker/data_statistics.h"

namespace keel {
namespace {

constexpr size_t kBatchSize = 7;

// `rows` libsvm lines with 1-5 non-zeros of features 1..50.
std::string LibsvmText(int rows, unsigned seed) {
  std::mt19937 random(seed);
  std::string text;
  for (int r = 0; r < rows; ++r) {
    text += std::to_string(random() % 2);
    const int nnz = 1 + static_cast<int>(random() % 5);
    int feature = 0;
    for (int i = 0; i < nnz; ++i) {
      feature += 1 + static_cast<int>(random() % 10);
      text += " " + std::to_string(feature) + ":" + std::to_string(0.25 * (random() % 8));
    }
    text += "\n";
  }
  return text;
}

struct Pass {
  std::vector<PreparedBatch> batches;
  bool from_cache = false;
};

bool SameBatches(const std::vector<PreparedBatch>& a, const std::vector<PreparedBatch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const PreparedBatch& x = a[i];
    const PreparedBatch& y = b[i];
    if (x.batch.labels != y.batch.labels || x.batch.row_offsets != y.batch.row_offsets ||
        x.batch.indices != y.batch.indices || x.batch.values != y.batch.values ||
        x.batch.label_width != y.batch.label_width || x.positions != y.positions ||
        x.key_offsets != y.key_offsets || x.nonzeros_by_key != y.nonzeros_by_key ||
        std::vector<Key>(x.keys.begin(), x.keys.end()) !=
            std::vector<Key>(y.keys.begin(), y.keys.end())) {
      return false;
    }
  }
  return true;
}

class BatchCacheTest : public testing::TempFolderTest {
 protected:
  BatchCacheTest() { data_ = WriteFile("train.libsvm", LibsvmText(100, 1)); }

  std::vector<InputSplit> Splits() const { return ResolveChannel(data_, 0, 1); }

  // Reads every batch of `splits` through `cache` (null: none), scaled by
  // `scaler` if given.
  Pass Read(BatchCache* cache, std::vector<InputSplit> splits = {},
            const DataScaler* scaler = nullptr) {
    if (splits.empty()) splits = Splits();
    BatchStream stream(splits, ReaderOptions(), kBatchSize, 4, scaler, cache);
    Pass pass;
    PreparedBatch batch;
    while (stream.Next(&batch)) pass.batches.push_back(std::move(batch));
    pass.from_cache = stream.from_cache();
    return pass;
  }

  // The names in the cache folder.
  std::vector<std::string> CacheFiles() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(cache_folder_)) {
      names.push_back(entry.path().filename());
    }
    return names;
  }

  std::string data_;
  const std::string cache_folder_ = folder_ + "/cache";
};

TEST_F(BatchCacheTest, ASecondPassReadsTheFirstPassesBatchesExactly) {
  const Pass text = Read(nullptr);
  ASSERT_EQ(text.batches.size(), 15u);  // 100 rows in 7s
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  const Pass first = Read(&cache);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(SameBatches(first.batches, text.batches));
  const Pass second = Read(&cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_TRUE(SameBatches(second.batches, text.batches));
  // Another process's cache object (verifying the file anew) reads it too.
  BatchCache again(cache_folder_, "train.batches", 1 << 30);
  const Pass third = Read(&again);
  EXPECT_TRUE(third.from_cache);
  EXPECT_TRUE(SameBatches(third.batches, text.batches));
  EXPECT_EQ(CacheFiles(), std::vector<std::string>{"train.batches"});
}

TEST_F(BatchCacheTest, ChangedInputIsReadFromTheTextAgain) {
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  Read(&cache);
  // Same size, other bytes: only the file's version tells.
  std::string text = ReadFile(data_);
  text[0] = text[0] == '0' ? '1' : '0';
  testing::WriteFile(data_, text);
  const Pass changed = Read(&cache);
  EXPECT_FALSE(changed.from_cache);
  EXPECT_TRUE(SameBatches(changed.batches, Read(nullptr).batches));
  EXPECT_EQ(changed.batches[0].batch.labels[0], text[0] == '1' ? 1.0f : 0.0f);
  EXPECT_TRUE(Read(&cache).from_cache) << "the changed input's cache is written in its place";
  // Another batch size or worker count is other minibatches.
  BatchStream other(Splits(), ReaderOptions(), kBatchSize + 1, 4, nullptr, &cache);
  PreparedBatch batch;
  ASSERT_TRUE(other.Next(&batch));
  EXPECT_EQ(batch.batch.rows(), kBatchSize + 1);
  EXPECT_FALSE(other.from_cache());
}

// Flips one byte at `offset` of `path`.
void Damage(const std::string& path, size_t offset) {
  std::string bytes = ReadFile(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] ^= 0x40;
  testing::WriteFile(path, bytes);
}

TEST_F(BatchCacheTest, ADamagedFileIsRemovedAndTheTextReadInstead) {
  const Pass text = Read(nullptr);
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  Read(&cache);
  const std::string path = cache_folder_ + "/train.batches";
  const size_t size = std::filesystem::file_size(path);
  for (size_t offset : {size_t{3}, size / 2, size - 20}) {  // header, a batch, the footer
    Damage(path, offset);
    const Pass damaged = Read(&cache);
    EXPECT_FALSE(damaged.from_cache) << "damaged at byte " << offset;
    EXPECT_TRUE(SameBatches(damaged.batches, text.batches)) << "damaged at byte " << offset;
    EXPECT_TRUE(Read(&cache).from_cache) << "written again after damage at byte " << offset;
  }
  std::filesystem::resize_file(path, size / 3);
  const Pass truncated = Read(&cache);
  EXPECT_FALSE(truncated.from_cache);
  EXPECT_TRUE(SameBatches(truncated.batches, text.batches));
  testing::WriteFile(path, "");
  EXPECT_FALSE(Read(&cache).from_cache);
  EXPECT_TRUE(Read(&cache).from_cache);
}

TEST_F(BatchCacheTest, AFileTruncatedWhileInUseIsAnErrorNamingItNotACrash) {
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  Read(&cache);
  const std::string path = cache_folder_ + "/train.batches";
  std::unique_ptr<BatchCacheReader> reader =
      cache.OpenReader(BatchCacheKey(Splits(), ReaderOptions(), kBatchSize));
  ASSERT_NE(reader, nullptr);
  PreparedBatch batch;
  ASSERT_TRUE(reader->Next(&batch));
  // Another process cuts the mapped file short: reading past its new end
  // would raise SIGBUS.
  std::filesystem::resize_file(path, 0);
  try {
    reader->Next(&batch);
    ADD_FAILURE() << "a batch read from a truncated file";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  }
  // Cut at a page's end midway: the batches before it are read, the one
  // across it is the error.
  Read(&cache);
  reader = cache.OpenReader(BatchCacheKey(Splits(), ReaderOptions(), kBatchSize));
  ASSERT_NE(reader, nullptr);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  ASSERT_GT(std::filesystem::file_size(path), page) << "the file this test needs";
  std::filesystem::resize_file(path, page);
  size_t read = 0;
  try {
    while (reader->Next(&batch)) ++read;
    ADD_FAILURE() << "every batch read from a truncated file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  EXPECT_GT(read, 0u);
}

TEST_F(BatchCacheTest, AFileWhoseKeysDoNotMatchItsFeaturesIsRemovedThoughItsChecksumsHold) {
  const Pass text = Read(nullptr);
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  Read(&cache);
  // The first batch's first key, changed, and its checksum made right again:
  // what someone who can write the folder could do.
  const std::string path = cache_folder_ + "/train.batches";
  std::string bytes = ReadFile(path);
  const PreparedBatch& first = text.batches[0];
  const size_t header = 32, batch_header = 40;
  const size_t payload = header + batch_header;
  const size_t keys = payload + first.batch.rows() * sizeof(float) +
                      (first.batch.rows() + 1) * sizeof(uint64_t) +
                      first.batch.nnz() * (sizeof(uint64_t) + sizeof(float));
  Key key;
  std::memcpy(&key, bytes.data() + keys, sizeof(key));
  ASSERT_EQ(key, first.keys[0]) << "the layout this test assumes";
  key ^= 1;
  std::memcpy(bytes.data() + keys, &key, sizeof(key));
  const size_t payload_bytes = keys + first.keys.size() * sizeof(Key) +
                               first.batch.nnz() * 2 * sizeof(uint32_t) +
                               (first.keys.size() + 1) * sizeof(uint32_t) - payload;
  const uint64_t checksum = WordChecksum64(bytes.data() + payload, payload_bytes);
  std::memcpy(bytes.data() + payload - sizeof(uint64_t), &checksum, sizeof(checksum));
  testing::WriteFile(path, bytes);
  BatchCache another_process(cache_folder_, "train.batches", 1 << 30);
  const Pass read = Read(&another_process);
  EXPECT_FALSE(read.from_cache);
  EXPECT_TRUE(SameBatches(read.batches, text.batches));
}

// Statistics that centre feature 3 (0-based: libsvm's 4; so rows without it
// gain it and their keys change) and scale feature 5 by `scale`.
DataStatistics Statistics(double scale) {
  DataStatistics statistics;
  statistics.features = {3, 5};
  statistics.means = {0.5, 0.0};
  statistics.scales = {2.0, scale};
  statistics.features_scaled = true;
  statistics.centred_features = 1;
  return statistics;
}

TEST_F(BatchCacheTest, ScaledBatchesAreCachedAsDeliveredAndOtherScalingWritesTheFileAgain) {
  const DataScaler scaler(Statistics(4.0)), other(Statistics(8.0));
  ASSERT_NE(scaler.fingerprint(), other.fingerprint());
  ASSERT_EQ(scaler.fingerprint(), DataScaler(Statistics(4.0)).fingerprint());
  const Pass scaled = Read(nullptr, {}, &scaler), other_scaled = Read(nullptr, {}, &other);
  ASSERT_FALSE(SameBatches(scaled.batches, Read(nullptr).batches)) << "the scaler changes nothing";
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  EXPECT_TRUE(SameBatches(Read(&cache, {}, &scaler).batches, scaled.batches));
  // Read back as delivered: not scaled twice, keys those of the scaled rows.
  const Pass again = Read(&cache, {}, &scaler);
  EXPECT_TRUE(again.from_cache);
  EXPECT_TRUE(SameBatches(again.batches, scaled.batches));
  // Another scaling reads the text, and its file serves the next pass.
  const Pass otherwise = Read(&cache, {}, &other);
  EXPECT_FALSE(otherwise.from_cache);
  EXPECT_TRUE(SameBatches(otherwise.batches, other_scaled.batches));
  const Pass other_again = Read(&cache, {}, &other);
  EXPECT_TRUE(other_again.from_cache);
  EXPECT_TRUE(SameBatches(other_again.batches, other_scaled.batches));
  // And no scaling at all is a scaling of its own.
  EXPECT_FALSE(Read(&cache).from_cache);
}

TEST(DataScalerFingerprint, ChangesWithEveryFigureApplyReads) {
  const uint64_t base = DataScaler(Statistics(4.0)).fingerprint();
  DataStatistics mean = Statistics(4.0), unsampled = Statistics(4.0), label = Statistics(4.0),
                 feature = Statistics(4.0);
  mean.means[0] = 0.25;
  unsampled.unsampled_scale = 2.0;
  label.label_scaled = true;
  label.label_offset = 3.0;
  feature.features[1] = 6;
  for (const DataStatistics* other : {&mean, &unsampled, &label, &feature}) {
    EXPECT_NE(DataScaler(*other).fingerprint(), base);
  }
  EXPECT_NE(base, 0u);
}

TEST_F(BatchCacheTest, ARowsWorthOfCentredFeaturesIsCachedAsReadAndScaledOnTheWay) {
  // 300 centred features (every sampled one, as unbias_data=true makes
  // them): every row would gain them all, so the file holds the rows as read.
  DataStatistics statistics;
  for (uint64_t f = 0; f < 300; ++f) {
    statistics.features.push_back(f);
    statistics.means.push_back(0.125);
    statistics.scales.push_back(2.0);
  }
  statistics.features_scaled = true;
  statistics.centred_features = 300;
  const DataScaler scaler(statistics);
  const Pass scaled = Read(nullptr, {}, &scaler);
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  EXPECT_TRUE(SameBatches(Read(&cache, {}, &scaler).batches, scaled.batches));
  const Pass again = Read(&cache, {}, &scaler);
  EXPECT_TRUE(again.from_cache);
  EXPECT_TRUE(SameBatches(again.batches, scaled.batches));
  // As read: a stream without scaling takes the same file.
  EXPECT_TRUE(Read(&cache).from_cache);
  // Smaller than the scaled rows (300 entries a row): the rows as read.
  EXPECT_LT(std::filesystem::file_size(cache_folder_ + "/train.batches"),
            size_t{100} * 300 * sizeof(float));
}

TEST_F(BatchCacheTest, AFifoPutInTheFolderBlocksNothing) {
  MakeDirectories(cache_folder_);
  ASSERT_EQ(mkfifo((cache_folder_ + "/train.batches").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((cache_folder_ + "/x.batches.1.2.partial").c_str(), 0600), 0);
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);  // cleans up: must not open it
  EXPECT_FALSE(Read(&cache).from_cache);  // nor read it as the cache
  EXPECT_TRUE(Read(&cache).from_cache) << "the written file took its place";
}

TEST_F(BatchCacheTest, AFileOfOtherInputIsReplacedNotRemovedOnSight) {
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  Read(&cache);
  // Another key: not read, and left in place until this pass's file replaces it.
  BatchCache reader(cache_folder_, "train.batches", 1 << 30);
  EXPECT_EQ(reader.OpenReader(12345), nullptr);
  EXPECT_TRUE(std::filesystem::exists(cache_folder_ + "/train.batches"));
}

TEST_F(BatchCacheTest, AShareLargerThanTheBoundIsParsedEveryPass) {
  BatchCache cache(cache_folder_, "train.batches", 2048);
  const Pass first = Read(&cache);
  const Pass second = Read(&cache);
  EXPECT_FALSE(second.from_cache);
  EXPECT_TRUE(SameBatches(first.batches, second.batches));
  EXPECT_TRUE(CacheFiles().empty()) << "the given-up file is removed";
}

TEST_F(BatchCacheTest, APassStoppedEarlyKeepsNoFile) {
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  {
    BatchStream stream(Splits(), ReaderOptions(), kBatchSize, 1, nullptr, &cache);
    PreparedBatch batch;
    ASSERT_TRUE(stream.Next(&batch));
  }
  EXPECT_TRUE(CacheFiles().empty());
  EXPECT_FALSE(Read(&cache).from_cache);
}

TEST_F(BatchCacheTest, TheUnfinishedFileOfAWriterThatIsGoneIsRemoved) {
  MakeDirectories(cache_folder_);
  testing::WriteFile(cache_folder_ + "/train.batches.123.4.partial", "left by a crash");
  const std::string live = cache_folder_ + "/other.batches.9.9.partial";
  testing::WriteFile(live, "being written");
  const int held = open(live.c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);  // its writer is alive
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  EXPECT_EQ(CacheFiles(), std::vector<std::string>{"other.batches.9.9.partial"});
  close(held);
}

TEST_F(BatchCacheTest, APipeIsReadOnceThenFromTheCache) {
  const std::string fifo = folder_ + "/train.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string text = LibsvmText(50, 2);
  std::thread feeder([&] { testing::WriteFile(fifo, text); });
  const std::vector<InputSplit> splits = ResolveChannel("pipe:" + fifo, 0, 1);
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  const Pass first = Read(&cache, splits);
  feeder.join();
  // Nothing feeds the pipe again: reading it would block, opening it fails.
  ASSERT_EQ(unlink(fifo.c_str()), 0);
  const Pass second = Read(&cache, splits);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.batches.size(), 8u);  // 50 rows in 7s
  EXPECT_TRUE(SameBatches(first.batches, second.batches));
}

TEST_F(BatchCacheTest, APipeGivenPerPassIsCachedFromItsFirstPassAndServedForTheNext) {
  const std::string fifo = folder_ + "/train_0";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string text = LibsvmText(50, 2);
  std::thread feeder([&] { testing::WriteFile(fifo, text); });
  const std::string spec = "pipe:" + folder_ + "/train_{pass}";
  BatchCache cache(cache_folder_, "train.batches", 1 << 30);
  const Pass first = Read(&cache, ResolveChannel(spec, 0, 1, 0));
  feeder.join();
  // The next pass's stream is another path, never made: the cache serves it.
  const Pass second = Read(&cache, ResolveChannel(spec, 0, 1, 1));
  EXPECT_TRUE(second.from_cache);
  EXPECT_TRUE(SameBatches(first.batches, second.batches));
  EXPECT_EQ(BatchCacheKey(ResolveChannel(spec, 0, 1, 0), ReaderOptions(), 7),
            BatchCacheKey(ResolveChannel(spec, 0, 1, 5), ReaderOptions(), 7));
  EXPECT_NE(BatchCacheKey(ResolveChannel(spec, 0, 1, 0), ReaderOptions(), 7),
            BatchCacheKey(ResolveChannel("pipe:" + folder_ + "/other_{pass}", 0, 1, 0),
                          ReaderOptions(), 7));
}

TEST(TemporaryCacheFolder, IsRemovedAtTheEndAndAfterACrashByTheNextOne) {
  testing::TempFolder parent("tmpdir");
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  setenv("TMPDIR", parent.path().c_str(), 1);
  std::string path;
  {
    TemporaryCacheFolder folder;
    path = folder.path();
    EXPECT_EQ(path.rfind(parent.path() + "/keel-cache-", 0), 0u) << path;
    EXPECT_TRUE(std::filesystem::is_directory(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  // A crashed process's folder: its lock is free and old. One made a moment
  // ago may not be locked yet and is kept.
  const std::string crashed = parent.path() + "/keel-cache-crashed";
  const std::string fresh = parent.path() + "/keel-cache-fresh";
  for (const std::string& folder : {crashed, fresh}) {
    MakeDirectories(folder);
    testing::WriteFile(folder + "/.lock", "");
    testing::WriteFile(folder + "/train.batches", "cached");
  }
  const auto an_hour_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::filesystem::last_write_time(crashed + "/.lock", an_hour_ago);
  {
    TemporaryCacheFolder next;
    EXPECT_FALSE(std::filesystem::exists(crashed));
    EXPECT_TRUE(std::filesystem::exists(fresh));
    // A live folder is kept by others, however old.
    std::filesystem::last_write_time(next.path() + "/.lock", an_hour_ago);
    TemporaryCacheFolder other;
    EXPECT_TRUE(std::filesystem::exists(next.path()));
  }
  if (old) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}

// BatchStream::Select, as a survivor reads its part of a departed worker's
// share: every parts-th batch from the cursor on, starting at its part.
TEST_F(BatchCacheTest, ASelectedStreamGivesItsPartOfTheBatchesFromTheFirstInTurn) {
  const Pass all = Read(nullptr);
  ASSERT_EQ(all.batches.size(), 15u);
  for (int part = 0; part < 3; ++part) {
    BatchStream stream(Splits(), ReaderOptions(), kBatchSize);
    stream.Select(/*first=*/4, part, /*parts=*/3);
    std::vector<PreparedBatch> read, expected;
    PreparedBatch batch;
    while (stream.Next(&batch)) read.push_back(std::move(batch));
    for (size_t i = 4 + static_cast<size_t>(part); i < all.batches.size(); i += 3) {
      expected.push_back(all.batches[i]);
    }
    EXPECT_EQ(read.size(), part < 2 ? 4u : 3u) << "part " << part;
    EXPECT_TRUE(SameBatches(read, expected)) << "part " << part;
  }
  // From past the end: nothing.
  BatchStream stream(Splits(), ReaderOptions(), kBatchSize);
  stream.Select(/*first=*/15, 0, 1);
  PreparedBatch batch;
  EXPECT_FALSE(stream.Next(&batch));
}

}  // namespace
}  // namespace keel
