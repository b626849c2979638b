#include "io/input_split.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "io/readers.h"
#include "io/recordio.h"
#include "record.pb.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::TempFolderTest;

using testing::Contains;
using testing::ErrorOf;

std::vector<std::string> Paths(const std::vector<InputFile>& files) {
  std::vector<std::string> paths;
  for (const InputFile& file : files) paths.push_back(file.path);
  return paths;
}

// ---------------------------------------------------------------------------
// ListInputs

class InputSplitListing : public TempFolderTest {};

TEST_F(InputSplitListing, FileIsListedAsItselfWithItsSize) {
  const std::string path = WriteFile("data.libsvm", "1 1:1\n");
  const std::vector<InputFile> files = ListInputs(path);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].path, path);
  EXPECT_EQ(files[0].size, 6u);
}

TEST_F(InputSplitListing, FolderListsItsFilesSortedSkippingHiddenUnderscoreAndSubfolders) {
  WriteFile("b", "bb");
  WriteFile("a", "a");
  WriteFile("c10", "");
  WriteFile(".crc", "x");
  WriteFile("_SUCCESS", "");
  std::filesystem::create_directory(folder_ + "/sub");
  WriteFile("sub/d", "d");
  const std::vector<InputFile> files = ListInputs(folder_);
  EXPECT_EQ(Paths(files),
            (std::vector<std::string>{folder_ + "/a", folder_ + "/b", folder_ + "/c10"}));
  EXPECT_EQ(files[1].size, 2u);
}

TEST_F(InputSplitListing, MissingPathThrowsNamingIt) {
  const std::string path = folder_ + "/missing";
  const std::string message = ErrorOf([&] { ListInputs(path); });
  EXPECT_TRUE(Contains(message, path + ": cannot read")) << message;
}

TEST_F(InputSplitListing, FolderWithoutInputFilesThrowsNamingIt) {
  WriteFile("_SUCCESS", "");
  const std::string message = ErrorOf([&] { ListInputs(folder_); });
  EXPECT_TRUE(Contains(message, folder_ + ": folder holds no input files")) << message;
}

TEST_F(InputSplitListing, UnreadableFileThrowsNamingIt) {
  const std::string path = WriteFile("secret", "1 1:1\n");
  chmod(path.c_str(), 0);
  if (geteuid() != 0) {
    const std::string message = ErrorOf([&] { ListInputs(folder_); });
    EXPECT_TRUE(Contains(message, path + ": cannot read")) << message;
    return;
  }
  // Root reads every file: check as an unprivileged user, in a child process.
  chmod(folder_.c_str(), 0755);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const std::string message = ErrorOf([&] { ListInputs(folder_); });
    _exit(Contains(message, path + ": cannot read") ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "could not drop privileges to check as another user";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the error did not name " << path;
}

// ---------------------------------------------------------------------------
// ShardInputs

TEST(InputSplitSharding, WholeFilesGoRoundRobinWhenAtLeastAsManyFilesAsWorkers) {
  const std::vector<InputFile> files = {{"a", 10}, {"b", 20}, {"c", 30}, {"d", 40}, {"e", 50}};
  const std::vector<InputSplit> splits = ShardInputs(files, 1, 2);
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[0].path, "b");
  EXPECT_EQ(splits[0].begin, 0u);
  EXPECT_EQ(splits[0].end, 20u);
  EXPECT_EQ(splits[1].path, "d");
  EXPECT_FALSE(splits[1].is_pipe);
}

TEST(InputSplitSharding, FewerFilesThanWorkersGiveEqualByteRanges) {
  const std::vector<InputSplit> splits = ShardInputs({{"a", 100}}, 2, 4);
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].begin, 50u);
  EXPECT_EQ(splits[0].end, 75u);
}

TEST(InputSplitSharding, ARangeGetsOneSplitPerFileItTouches) {
  const std::vector<InputFile> files = {{"a", 10}, {"b", 0}, {"c", 20}};  // 30 bytes
  const std::vector<InputSplit> first = ShardInputs(files, 0, 4);         // [0, 7)
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].path, "a");
  EXPECT_EQ(first[0].end, 7u);
  const std::vector<InputSplit> second = ShardInputs(files, 1, 4);  // [7, 15)
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].path, "a");
  EXPECT_EQ(second[0].begin, 7u);
  EXPECT_EQ(second[0].end, 10u);
  EXPECT_EQ(second[1].path, "c");  // the empty "b" gets no split
  EXPECT_EQ(second[1].begin, 0u);
  EXPECT_EQ(second[1].end, 5u);
  const std::vector<InputSplit> third = ShardInputs(files, 2, 4);  // [15, 22)
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].path, "c");
  EXPECT_EQ(third[0].begin, 5u);
  EXPECT_EQ(third[0].end, 12u);
}

TEST(InputSplitSharding, EveryByteGoesToExactlyOneWorker) {
  const std::vector<std::vector<InputFile>> layouts = {
      {{"a", 1000}}, {{"a", 10}, {"b", 0}, {"c", 7}}, {{"a", 3}}, {{"a", 0}}};
  for (const auto& files : layouts) {
    for (int workers = 1; workers <= 7; ++workers) {
      std::vector<std::vector<int>> owners(files.size());
      for (size_t f = 0; f < files.size(); ++f) owners[f].assign(files[f].size, 0);
      for (int rank = 0; rank < workers; ++rank) {
        for (const InputSplit& split : ShardInputs(files, rank, workers)) {
          const auto file = std::find_if(files.begin(), files.end(),
                                         [&](const InputFile& x) { return x.path == split.path; });
          ASSERT_NE(file, files.end());
          auto& owned = owners[file - files.begin()];
          for (uint64_t byte = split.begin; byte < std::min<uint64_t>(split.end, file->size);
               ++byte) {
            ++owned[byte];
          }
        }
      }
      for (const auto& owned : owners) {
        for (int count : owned) ASSERT_EQ(count, 1) << workers << " workers";
      }
    }
  }
}

TEST(InputSplitSharding, RejectsARankOutsideTheWorkers) {
  EXPECT_TRUE(Contains(ErrorOf([] { ShardInputs({{"a", 1}}, 2, 2); }), "rank 2 of 2"));
  EXPECT_TRUE(Contains(ErrorOf([] { ShardInputs({{"a", 1}}, -1, 2); }), "rank -1 of 2"));
  EXPECT_TRUE(Contains(ErrorOf([] { ShardInputs({{"a", 1}}, 0, 0); }), "rank 0 of 0"));
}

TEST(InputSplitDescribe, NamesThePathAndTheRange) {
  EXPECT_EQ((InputSplit{"a.csv"}).Describe(), "a.csv");
  EXPECT_EQ((InputSplit{"a.csv", 10, 20}).Describe(), "a.csv[10, 20)");
  EXPECT_EQ((InputSplit{"/fifo", 0, UINT64_MAX, true}).Describe(), "pipe:/fifo");
}

// ---------------------------------------------------------------------------
// Every example is read by exactly one worker.

float FloatWithBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Example `id`, with a few features, in `format`. Varies lengths, blank and
// comment lines, line ends, and (for recordIO) holds the RecordIO magic so
// that some records are cut into parts.
std::string Example(DataFormat format, int id) {
  std::string text;
  switch (format) {
    case DataFormat::kLibsvm: {
      if (id % 10 == 3) text += "# a comment line\n\n";
      text += std::to_string(id);
      for (int i = 1; i <= id * 7 % 31; ++i) text += " " + std::to_string(i * 3) + ":0.25";
      if (id % 6 == 1) text += "  # trailing comment";
      text += id % 4 == 0 ? "\r\n" : "\n";
      return text;
    }
    case DataFormat::kCsv:
      if (id % 9 == 2) text += "\n";
      text += std::to_string(id) + ",1.5,0,-2,3e1";
      text += id % 5 == 0 ? "\r\n" : "\n";
      return text;
    case DataFormat::kRecordIO: {
      aialgs::data::Record record;
      auto* features = (*record.mutable_features())["values"].mutable_float32_tensor();
      for (int i = 0; i < id % 13; ++i) features->add_values(0.5f);
      if (id % 3 == 0) features->add_values(FloatWithBits(kRecordIOMagic));
      (*record.mutable_label())["values"].mutable_float32_tensor()->add_values(id);
      std::ostringstream out;
      RecordIOWriter(&out).Write(record);
      return out.str();
    }
  }
  return text;
}

struct Layout {
  const char* name;
  std::vector<int> examples_per_file;
};

class InputSplitCounting : public TempFolderTest {
 protected:
  // Writes the layout's files into a fresh subfolder (plus files the listing
  // skips); returns the subfolder and sets *examples.
  std::string WriteLayout(DataFormat format, const Layout& layout, int* examples) {
    const std::string folder = folder_ + "/" + layout.name + DataFormatName(format);
    std::filesystem::create_directory(folder);
    int id = 0;
    for (size_t f = 0; f < layout.examples_per_file.size(); ++f) {
      std::string contents;
      for (int i = 0; i < layout.examples_per_file[f]; ++i) contents += Example(format, id++);
      char name[32];
      std::snprintf(name, sizeof(name), "/part-%05zu", f);
      std::ofstream(folder + name, std::ios::binary) << contents;
    }
    std::ofstream(folder + "/_SUCCESS");
    *examples = id;
    return folder;
  }

  void ExpectEveryExampleReadOnce(DataFormat format) {
    const std::vector<Layout> layouts = {{"one_file", {157}},
                                         {"more_files_than_workers", {0, 13, 1, 40, 7, 22, 3}},
                                         {"two_files", {90, 11}},
                                         {"three_with_an_empty_one", {50, 0, 60}}};
    for (const Layout& layout : layouts) {
      int examples = 0;
      const std::string folder = WriteLayout(format, layout, &examples);
      uint64_t total_size = 0;
      for (const InputFile& file : ListInputs(folder)) total_size += file.size;
      for (size_t block_size : {size_t{16}, size_t{4} << 20}) {
        for (int workers = 1; workers <= 5; ++workers) {
          SCOPED_TRACE(std::string(layout.name) + ", " + std::to_string(workers) +
                       " workers, block " + std::to_string(block_size));
          ReaderOptions options;
          options.format = format;
          options.block_size = block_size;
          std::vector<int> ids;
          uint64_t bytes_read = 0;
          for (int rank = 0; rank < workers; ++rank) {
            for (const InputSplit& split : ResolveChannel(folder, rank, workers)) {
              std::unique_ptr<ExampleReader> reader = OpenReader(split, options);
              Batch batch;
              while (reader->Read(7, &batch) > 0) {
              }
              for (float label : batch.labels) ids.push_back(static_cast<int>(label));
              bytes_read += reader->bytes_read();
              EXPECT_EQ(reader->skipped_records(), 0u);
            }
          }
          std::sort(ids.begin(), ids.end());
          std::vector<int> expected(examples);
          std::iota(expected.begin(), expected.end(), 0);
          EXPECT_EQ(ids, expected);
          EXPECT_EQ(bytes_read, total_size);
        }
      }
    }
  }
};

TEST_F(InputSplitCounting, EveryLibsvmExampleIsReadByExactlyOneWorker) {
  ExpectEveryExampleReadOnce(DataFormat::kLibsvm);
}

TEST_F(InputSplitCounting, EveryCsvExampleIsReadByExactlyOneWorker) {
  ExpectEveryExampleReadOnce(DataFormat::kCsv);
}

TEST_F(InputSplitCounting, EveryRecordIOExampleIsReadByExactlyOneWorker) {
  std::string all;
  for (int id = 0; id < 157; ++id) all += Example(DataFormat::kRecordIO, id);
  int multi_part = 0;  // the test must cross multi-part records
  for (size_t at = 0; at + 8 <= all.size(); at += 4) {
    uint32_t words[2];
    std::memcpy(words, all.data() + at, 8);
    if (words[0] == kRecordIOMagic && words[1] >> 29 == 1) ++multi_part;
  }
  ASSERT_GT(multi_part, 5);
  ExpectEveryExampleReadOnce(DataFormat::kRecordIO);
}

// ---------------------------------------------------------------------------
// Channels

TEST(ChannelSpec, PipeReplacesRankInThePath) {
  const std::vector<InputSplit> splits = ResolveChannel("pipe:/opt/ml/train_{rank}", 3, 4);
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].path, "/opt/ml/train_3");
  EXPECT_TRUE(splits[0].is_pipe);
}

TEST(ChannelSpec, APipeNamingThePassIsTheSameStreamWhateverThePass) {
  EXPECT_TRUE(IsPipePerPass("pipe:/opt/ml/input/data/train_{pass}"));
  EXPECT_FALSE(IsPipePerPass("pipe:/opt/ml/input/data/train_0"));
  EXPECT_FALSE(IsPipePerPass("/data/train_{pass}"));
  const std::vector<InputSplit> second = ResolveChannel("pipe:/ml/w{rank}/train_{pass}", 1, 2, 2);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].path, "/ml/w1/train_2");
  EXPECT_EQ(second[0].stream, "/ml/w1/train_{pass}");
  EXPECT_TRUE(second[0].is_pipe);
  EXPECT_EQ(ResolveChannel("pipe:/ml/w{rank}/train_{pass}", 1, 2)[0].path, "/ml/w1/train_0");
  // A pipe without the field is one stream, read from the same path every pass.
  const std::vector<InputSplit> once = ResolveChannel("pipe:/ml/train", 0, 1, 3);
  EXPECT_EQ(once[0].path, "/ml/train");
  EXPECT_EQ(once[0].stream, "");
  EXPECT_TRUE(Contains(ErrorOf([] { ResolveChannel("pipe:/ml/train_{pass}", 0, 1, -1); }),
                       "pass -1 is negative"));
}

class StreamAwaited : public TempFolderTest {};

TEST_F(StreamAwaited, UntilItsPathAppears) {
  const std::string fifo = folder_ + "/train_1";
  std::thread maker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    mkfifo(fifo.c_str(), 0600);
  });
  const InputSplit split = ResolveChannel("pipe:" + folder_ + "/train_{pass}", 0, 1, 1)[0];
  AwaitStream(split, 30);
  maker.join();
  struct stat info;
  EXPECT_EQ(stat(fifo.c_str(), &info), 0);
}

TEST_F(StreamAwaited, AndNamedWhenItNeverComes) {
  const InputSplit split = ResolveChannel("pipe:" + folder_ + "/train_{pass}", 0, 1, 4)[0];
  const std::string error = ErrorOf([&] { AwaitStream(split, 0.1); });
  EXPECT_TRUE(Contains(error, "pipe:" + folder_ + "/train_4: not there after waiting 0.1 s"))
      << error;
}

TEST(ChannelSpec, PipeWithoutAPathThrows) {
  EXPECT_TRUE(Contains(ErrorOf([] { ResolveChannel("pipe:", 0, 1); }), "pipe: needs a path"));
}

class ChannelFolder : public TempFolderTest {};

TEST_F(ChannelFolder, IsListedAndSharded) {
  WriteFile("a", "1 1:1\n");
  WriteFile("b", "2 1:1\n");
  WriteFile("c", "3 1:1\n");
  const std::vector<InputSplit> splits = ResolveChannel(folder_, 1, 2);
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].path, folder_ + "/b");
}

TEST_F(ChannelFolder, MissingFolderThrowsNamingIt) {
  const std::string path = folder_ + "/none";
  EXPECT_TRUE(Contains(ErrorOf([&] { ResolveChannel(path, 0, 1); }), path));
}

class ChannelPipe : public TempFolderTest {
 protected:
  // Writes `contents` into the FIFO `path` from another thread, in pieces.
  void StartWriter(const std::string& path, const std::string& contents) {
    writer_ = std::thread([path, contents] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      int descriptor = -1;
      // Non-blocking open fails until the reader opens: never hang the test.
      while ((descriptor = open(path.c_str(), O_WRONLY | O_NONBLOCK)) < 0 && errno == ENXIO &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (descriptor < 0) return;
      fcntl(descriptor, F_SETFL, 0);
      for (size_t at = 0; at < contents.size();) {
        const ssize_t wrote =
            write(descriptor, contents.data() + at, std::min<size_t>(999, contents.size() - at));
        if (wrote <= 0) break;
        at += static_cast<size_t>(wrote);
      }
      close(descriptor);
    });
  }
  ~ChannelPipe() override {
    if (writer_.joinable()) writer_.join();
  }

  std::vector<int> ReadAllIds(const std::string& spec, DataFormat format) {
    const std::vector<InputSplit> splits = ResolveChannel(spec, 1, 3);
    EXPECT_EQ(splits.size(), 1u);
    ReaderOptions options;
    options.format = format;
    options.block_size = 4096;
    std::unique_ptr<ExampleReader> reader = OpenReader(splits.at(0), options);
    Batch batch;
    while (reader->Read(100, &batch) > 0) {
    }
    std::vector<int> ids;
    for (float label : batch.labels) ids.push_back(static_cast<int>(label));
    return ids;
  }

  std::thread writer_;
};

TEST_F(ChannelPipe, LibsvmReaderReadsEveryExampleOfTheStream) {
  const std::string fifo = folder_ + "/train_1";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::string contents;
  for (int id = 0; id < 5000; ++id) contents += Example(DataFormat::kLibsvm, id);
  StartWriter(fifo, contents);
  std::vector<int> expected(5000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(ReadAllIds("pipe:" + folder_ + "/train_{rank}", DataFormat::kLibsvm), expected);
}

TEST_F(ChannelPipe, RecordIOReaderReadsEveryRecordOfTheStream) {
  const std::string fifo = folder_ + "/train_1";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::string contents;
  for (int id = 0; id < 3000; ++id) contents += Example(DataFormat::kRecordIO, id);
  StartWriter(fifo, contents);
  std::vector<int> expected(3000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(ReadAllIds("pipe:" + folder_ + "/train_{rank}", DataFormat::kRecordIO), expected);
}

}  // namespace
}  // namespace keel
