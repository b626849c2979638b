#include "worker/shard_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "io/input_split.h"
#include "test_util.h"

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

}  // namespace
}  // namespace keel
