#include "worker/shard_check.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "io/batch.h"
#include "io/input_split.h"
#include "test_util.h"
#include "worker/batch_stream.h"

namespace keel {
namespace {

class ShardCheckTest : public testing::TempFolderTest {
 protected:
  // `rows` libsvm lines of varying length; line `bad` (1-based, 0: none) has
  // a label that is not a number.
  std::string WriteRows(const std::string& name, int rows, int bad) {
    std::string text;
    for (int row = 1; row <= rows; ++row) {
      text += row == bad ? "x" : std::to_string(row % 2);
      for (int f = 0; f <= row % 7; ++f) text += " " + std::to_string(f * 13 + 1) + ":0.5";
      text += "\n";
    }
    return WriteFile(name, text);
  }
  ReaderOptions Libsvm() const {
    ReaderOptions options;
    options.format = DataFormat::kLibsvm;
    return options;
  }
};

TEST_F(ShardCheckTest, PiecesOfASplitCountEveryRowOnce) {
  WriteRows("a", 1000, 0);
  WriteRows("b", 37, 0);
  const std::vector<InputSplit> splits = ResolveChannel(folder_, 0, 1);
  ASSERT_EQ(splits.size(), 2u);
  // Whole, and cut into pieces of about 100 bytes on 1, 3 and 8 threads.
  EXPECT_EQ(CheckShard(splits, Libsvm(), 1), 1037u);
  for (int threads : {1, 3, 8}) {
    EXPECT_EQ(CheckShard(splits, Libsvm(), threads, 100), 1037u) << threads << " threads";
  }
  // Each of two workers' byte ranges of one file, cut again.
  const std::string a = folder_ + "/a";
  const std::vector<InputSplit> first = ResolveChannel(a, 0, 2);
  const std::vector<InputSplit> second = ResolveChannel(a, 1, 2);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  ASSERT_GT(second[0].begin, 0u);  // mid-file
  EXPECT_EQ(CheckShard(first, Libsvm(), 3, 100) + CheckShard(second, Libsvm(), 3, 100), 1000u);
}

TEST_F(ShardCheckTest, TheFirstBadRecordInTheSplitsOrderIsNamedByItsLine) {
  // Bad lines at 300 and 900: pieces after the first bad one may fail first
  // on another thread; the error is still line 300's.
  std::string path = WriteRows("a", 1000, 300);
  std::string text = ReadFile(path);
  const size_t line_900 = [&] {
    size_t at = 0;
    for (int line = 1; line < 900; ++line) at = text.find('\n', at) + 1;
    return at;
  }();
  text[line_900] = 'y';
  testing::WriteFile(path, text);
  for (int threads : {1, 4}) {
    try {
      CheckShard(ResolveChannel(path, 0, 1), Libsvm(), threads, 100);
      FAIL() << "a bad label passed the check on " << threads << " threads";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path + ":300:"), std::string::npos) << message;
    }
  }
}

// The rows of `splits` as one reader per split gives them, one after another.
Batch ReadWhole(const std::vector<InputSplit>& splits, const ReaderOptions& options,
                std::vector<uint64_t>* bytes_read) {
  Batch all;
  for (const InputSplit& split : splits) {
    auto reader = OpenReader(split, options);
    while (reader->Read(100, &all) > 0) {
    }
    bytes_read->push_back(reader->bytes_read());
  }
  return all;
}

void ExpectSameRows(const Batch& expected, const Batch& actual) {
  EXPECT_EQ(actual.labels, expected.labels);
  EXPECT_EQ(actual.row_offsets, expected.row_offsets);
  EXPECT_EQ(actual.indices, expected.indices);
  EXPECT_EQ(actual.values, expected.values);
}

TEST_F(ShardCheckTest, KeptRowsAreEverySplitsRowsInTheReadersOrder) {
  WriteRows("a", 1000, 0);
  WriteRows("b", 37, 0);
  const std::vector<InputSplit> splits = ResolveChannel(folder_, 0, 1);
  std::vector<uint64_t> bytes_read;
  const Batch whole = ReadWhole(splits, Libsvm(), &bytes_read);
  ASSERT_EQ(whole.rows(), 1037u);
  for (int threads : {1, 3}) {
    // Pieces of about 100 bytes: split "a" is read as many, on several threads.
    CheckedRows kept;
    ASSERT_EQ(CheckShard(splits, Libsvm(), threads, 100, &kept, uint64_t{1} << 30), 1037u);
    ASSERT_TRUE(kept.Holds(splits, Libsvm()));
    ASSERT_EQ(kept.chunks.size(), 2u);
    Batch joined;
    for (const auto& chunks : kept.chunks) {
      for (const Batch& chunk : chunks) joined.AppendRows(chunk, 0, chunk.rows());
    }
    ExpectSameRows(whole, joined);
    EXPECT_EQ(kept.bytes_read, bytes_read) << threads << " threads";
    EXPECT_GT(kept.held_bytes, 0u);
  }
}

TEST_F(ShardCheckTest, RowsOverTheBoundAreNotKeptButStillChecked) {
  WriteRows("a", 1000, 0);
  const std::vector<InputSplit> splits = ResolveChannel(folder_, 0, 1);
  CheckedRows kept;
  EXPECT_EQ(CheckShard(splits, Libsvm(), 2, 100, &kept, 1000), 1000u);
  EXPECT_TRUE(kept.empty());
  EXPECT_EQ(kept.held_bytes, 0u);
  // A bad record still fails the check that keeps rows.
  WriteRows("a", 1000, 500);
  EXPECT_NE(testing::ErrorOf([&] {
              CheckShard(splits, Libsvm(), 2, 100, &kept, uint64_t{1} << 30);
            }).find(":500:"),
            std::string::npos);
}

TEST_F(ShardCheckTest, AStreamTakesKeptRowsOnlyForTheirOwnSplits) {
  WriteRows("a", 1000, 0);
  WriteRows("b", 37, 0);
  const std::vector<InputSplit> splits = ResolveChannel(folder_, 0, 1);
  // Minibatches of 64 rows from the text, then from the kept rows.
  const auto minibatches = [&](const std::vector<InputSplit>& of, CheckedRows* held,
                               uint64_t* bytes) {
    BatchStream stream(of, Libsvm(), 64, 4, nullptr, nullptr, held);
    std::vector<PreparedBatch> out;
    PreparedBatch batch;
    while (stream.Next(&batch)) out.push_back(std::move(batch));
    *bytes = stream.bytes_read();
    return out;
  };
  uint64_t text_bytes = 0;
  const std::vector<PreparedBatch> from_text = minibatches(splits, nullptr, &text_bytes);
  CheckedRows kept;
  ASSERT_EQ(CheckShard(splits, Libsvm(), 3, 100, &kept, uint64_t{1} << 30), 1037u);
  // Marked, to see where the stream's rows come from: the first row's label.
  ASSERT_EQ(kept.chunks[0][0].labels[0], 1.0f);
  kept.chunks[0][0].labels[0] = 7.0f;
  // The same rows, said to be read from file "a" alone, or with other options.
  CheckedRows other;
  ASSERT_EQ(CheckShard({splits[0]}, Libsvm(), 3, 100, &other, uint64_t{1} << 30), 1000u);
  other.chunks = kept.chunks;
  other.bytes_read = kept.bytes_read;
  uint64_t other_bytes = 0;
  EXPECT_EQ(minibatches(splits, &other, &other_bytes)[0].batch.labels[0], 1.0f);
  ReaderOptions zero_based = Libsvm();
  zero_based.zero_based = true;
  EXPECT_FALSE(kept.Holds(splits, zero_based));
  uint64_t kept_bytes = 0;
  const std::vector<PreparedBatch> from_kept = minibatches(splits, &kept, &kept_bytes);
  ASSERT_EQ(from_kept.size(), from_text.size());
  EXPECT_EQ(from_kept[0].batch.labels[0], 7.0f);
  // Each chunk's memory was given back as the stream took its rows.
  EXPECT_EQ(kept.chunks[0][0].indices.capacity(), 0u);
  for (size_t b = 0; b < from_text.size(); ++b) {
    SCOPED_TRACE("minibatch " + std::to_string(b));
    Batch expected = from_text[b].batch;
    if (b == 0) expected.labels[0] = 7.0f;
    ExpectSameRows(expected, from_kept[b].batch);
    EXPECT_EQ(from_kept[b].keys.size(), from_text[b].keys.size());
    EXPECT_EQ(from_kept[b].positions, from_text[b].positions);
  }
  EXPECT_EQ(kept_bytes, text_bytes);
  EXPECT_EQ(other_bytes, text_bytes);
}

// A pipe's first rows held for the statistics, then the stream read on after
// them: every row of the stream once, in order, as a stream reading it alone.
TEST_F(ShardCheckTest, AStreamsHeldHeadIsFollowedByTheRestOfTheStream) {
  const std::string text = ReadFile(WriteRows("a", 1000, 0));
  const std::string fifo = folder_ + "/stream";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto read_stream = [&](CheckedRows* held, uint64_t* bytes) {
    std::thread feeder([&] { testing::WriteFile(fifo, text); });
    const std::vector<InputSplit> splits = ResolveChannel("pipe:" + fifo, 0, 1);
    if (held != nullptr) {
      EXPECT_EQ(HoldStreamHead(splits[0], Libsvm(), 300, held), 300u);
    }
    BatchStream stream(splits, Libsvm(), 64, 4, nullptr, nullptr, held);
    std::vector<PreparedBatch> out;
    PreparedBatch batch;
    while (stream.Next(&batch)) out.push_back(std::move(batch));
    *bytes = stream.bytes_read();
    feeder.join();
    return out;
  };
  uint64_t alone_bytes = 0;
  const std::vector<PreparedBatch> alone = read_stream(nullptr, &alone_bytes);
  CheckedRows held;
  uint64_t held_bytes = 0;
  const std::vector<PreparedBatch> after_head = read_stream(&held, &held_bytes);
  ASSERT_EQ(after_head.size(), alone.size());
  ASSERT_EQ(alone.size(), 16u);  // 1,000 rows in 64s
  for (size_t b = 0; b < alone.size(); ++b) {
    SCOPED_TRACE("minibatch " + std::to_string(b));
    ExpectSameRows(alone[b].batch, after_head[b].batch);
  }
  EXPECT_EQ(held_bytes, alone_bytes);
  EXPECT_EQ(held_bytes, text.size());
  // A head longer than the stream holds all of it, and the rest is empty.
  std::thread feeder([&] { testing::WriteFile(fifo, text); });
  CheckedRows whole;
  EXPECT_EQ(HoldStreamHead(ResolveChannel("pipe:" + fifo, 0, 1)[0], Libsvm(), 5000, &whole),
            1000u);
  feeder.join();
}

TEST(BatchAppendRows, CopiesRowsAndRefusesRowsOfAnotherLabelWidth) {
  Batch two;  // two rows of two labels
  two.label_width = 2;
  two.labels = {1, 2, 3, 4};
  two.row_offsets = {0, 1, 3};
  two.indices = {5, 6, 7};
  two.values = {0.5f, 0.25f, 0.125f};
  Batch out;
  out.AppendRows(two, 1, 1);
  out.AppendRows(two, 0, 1);
  EXPECT_EQ(out.label_width, 2);
  EXPECT_EQ(out.labels, (std::vector<float>{3, 4, 1, 2}));
  EXPECT_EQ(out.row_offsets, (std::vector<uint64_t>{0, 2, 3}));
  EXPECT_EQ(out.indices, (std::vector<uint64_t>{6, 7, 5}));
  EXPECT_EQ(out.values, (std::vector<float>{0.25f, 0.125f, 0.5f}));
  Batch one;  // one row of one label
  const uint64_t index = 9;
  const float value = 1.0f;
  one.AddRow(1.0f, &index, &value, 1);
  EXPECT_NE(testing::ErrorOf([&] { out.AppendRows(one, 0, 1); }).find("1 labels"),
            std::string::npos);
  EXPECT_EQ(out.rows(), 2u);
}

}  // namespace
}  // namespace keel
