#include "io/readers.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/recordio.h"
#include "record.pb.h"
#include "test_util.h"

namespace keel {
namespace {

using TempFolder = testing::TempFolderTest;

// Reads the whole file in batches of at most 3 rows.
Batch ReadAll(const std::string& path, const ReaderOptions& options, uint64_t* skipped = nullptr) {
  std::unique_ptr<ExampleReader> reader = OpenReader(InputSplit{path}, options);
  Batch batch;
  while (reader->Read(3, &batch) > 0) {
  }
  if (skipped != nullptr) *skipped = reader->skipped_records();
  return batch;
}

// The message of the Error that `body` throws, or "no error".
using testing::Contains;
using testing::ErrorOf;

std::vector<uint64_t> Indices(const Batch& batch, size_t row) {
  return {batch.indices.begin() + batch.row_offsets[row],
          batch.indices.begin() + batch.row_offsets[row + 1]};
}

std::vector<float> Values(const Batch& batch, size_t row) {
  return {batch.values.begin() + batch.row_offsets[row],
          batch.values.begin() + batch.row_offsets[row + 1]};
}

ReaderOptions Options(DataFormat format) {
  ReaderOptions options;
  options.format = format;
  return options;
}

// ---------------------------------------------------------------------------
// Holdout

class Holdout : public TempFolder {
 protected:
  // 2,000 distinct rows of 4 features, some zero, as CSV (zeros written) and libsvm
  // (zeros left out).
  void WriteSets();
};

void Holdout::WriteSets() {
  std::string csv, libsvm;
  for (int r = 0; r < 2000; ++r) {
    const int label = r % 2;
    csv += std::to_string(label);
    libsvm += std::to_string(label);
    for (int f = 0; f < 4; ++f) {
      // Features 0-2 are 0 one time in five; feature 3 tells the rows apart.
      const int value = f == 3 ? r + 1 : (r * 7 + f * 13) % 5;
      csv += "," + std::to_string(value);
      if (value != 0) libsvm += " " + std::to_string(f + 1) + ":" + std::to_string(value);
    }
    csv += "\n";
    libsvm += "\n";
  }
  WriteFile("rows.csv", csv);
  WriteFile("rows.libsvm", libsvm);
}

// Each row of a batch as text: label, then its non-zero entries.
std::multiset<std::string> RowTexts(const Batch& batch) {
  std::multiset<std::string> rows;
  for (size_t r = 0; r < batch.rows(); ++r) {
    std::string text = std::to_string(batch.labels[r]);
    for (uint64_t i = batch.row_offsets[r]; i < batch.row_offsets[r + 1]; ++i) {
      if (batch.values[i] != 0.0f) {
        text += " " + std::to_string(batch.indices[i]) + ":" + std::to_string(batch.values[i]);
      }
    }
    rows.insert(text);
  }
  return rows;
}

TEST_F(Holdout, TheTwoSidesSplitTheRowsAboutAsAskedAndEveryFormatHoldsOutTheSameRows) {
  WriteSets();
  ReaderOptions csv = Options(DataFormat::kCsv);
  ReaderOptions libsvm = Options(DataFormat::kLibsvm);
  for (ReaderOptions* options : {&csv, &libsvm}) options->holdout_share = 0.1;
  const Batch csv_train = ReadAll(folder_ + "/rows.csv", csv);
  const Batch libsvm_train = ReadAll(folder_ + "/rows.libsvm", libsvm);
  csv.holdout_side = libsvm.holdout_side = true;
  const Batch csv_held = ReadAll(folder_ + "/rows.csv", csv);
  const Batch libsvm_held = ReadAll(folder_ + "/rows.libsvm", libsvm);
  EXPECT_EQ(csv_train.rows() + csv_held.rows(), 2000u);
  EXPECT_GT(csv_held.rows(), 140u);  // 200 expected: 4 standard deviations either way
  EXPECT_LT(csv_held.rows(), 260u);
  EXPECT_EQ(RowTexts(csv_held), RowTexts(libsvm_held));
  EXPECT_EQ(RowTexts(csv_train), RowTexts(libsvm_train));
  // Every row read at once is on exactly one side.
  std::multiset<std::string> joined = RowTexts(csv_train);
  const std::multiset<std::string> held = RowTexts(csv_held);
  joined.insert(held.begin(), held.end());
  EXPECT_EQ(joined, RowTexts(ReadAll(folder_ + "/rows.csv", Options(DataFormat::kCsv))));
}

TEST_F(Holdout, WorkersSplittingTheChannelHoldOutTheRowsOneReaderHoldsOut) {
  WriteSets();
  ReaderOptions options = Options(DataFormat::kLibsvm);
  options.holdout_share = 0.2;
  options.holdout_side = true;
  const Batch whole = ReadAll(folder_ + "/rows.libsvm", options);
  std::multiset<std::string> by_workers;
  for (int rank = 0; rank < 3; ++rank) {
    for (const InputSplit& split : ResolveChannel(folder_ + "/rows.libsvm", rank, 3)) {
      std::unique_ptr<ExampleReader> reader = OpenReader(split, options);
      Batch part;
      while (reader->Read(7, &part) > 0) {
      }
      const std::multiset<std::string> rows = RowTexts(part);
      by_workers.insert(rows.begin(), rows.end());
    }
  }
  EXPECT_EQ(by_workers, RowTexts(whole));
}

// ---------------------------------------------------------------------------
// libsvm

class LibsvmReading : public TempFolder {};

TEST_F(LibsvmReading, ReadsLabelsAndShiftsOneBasedIndicesToZeroBased) {
  const std::string path = WriteFile("a.libsvm", "1 1:0.5 3:2\n-1 2:-1.5e-1\n+1 10:7\n");
  const Batch batch = ReadAll(path, Options(DataFormat::kLibsvm));
  ASSERT_EQ(batch.rows(), 3u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, -1, 1}));
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{0.5f, 2}));
  EXPECT_EQ(Indices(batch, 1), (std::vector<uint64_t>{1}));
  EXPECT_EQ(Values(batch, 1), (std::vector<float>{-0.15f}));
  EXPECT_EQ(Indices(batch, 2), (std::vector<uint64_t>{9}));
}

// Decimal numbers of many shapes: short and long, with and without a point,
// signs, exponents, leading zeros.
std::vector<std::string> NumberTexts() {
  std::mt19937 random(11);
  std::vector<std::string> texts = {"0",        "-0",           "0.1",          "16777215",
                                    "16777216", "16777217",     "3.4028235e38", "1e-45",
                                    "1e-50",    "0.0000000001", "123456.7",     "1.",
                                    ".5",       "-.5",          "+2.5",         "00000000012"};
  for (int i = 0; i < 3000; ++i) {
    std::string text = random() % 4 == 0 ? "-" : "";
    const int whole = random() % 10, fraction = random() % 12;
    for (int d = 0; d < whole; ++d) text += static_cast<char>('0' + random() % 10);
    if (whole == 0 || fraction > 0) text += whole == 0 ? "0." : ".";
    for (int d = 0; d < fraction; ++d) text += static_cast<char>('0' + random() % 10);
    if (random() % 10 == 0) text += "e" + std::to_string(static_cast<int>(random() % 60) - 30);
    texts.push_back(text);
  }
  return texts;
}

TEST_F(LibsvmReading, ParsesValuesExactlyAsStrtofDoes) {
  const std::vector<std::string> texts = NumberTexts();
  std::string contents;
  for (const std::string& text : texts) contents += text + " 1:" + text + "\n";
  const Batch batch = ReadAll(WriteFile("a.libsvm", contents), Options(DataFormat::kLibsvm));
  ASSERT_EQ(batch.rows(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const float expected = std::strtof(texts[i].c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&batch.values[i], &expected, sizeof(float)), 0) << texts[i];
    ASSERT_EQ(std::memcmp(&batch.labels[i], &expected, sizeof(float)), 0) << texts[i];
  }
}

TEST_F(LibsvmReading, ZeroBasedKeepsIndicesAndAcceptsIndexZero) {
  ReaderOptions options = Options(DataFormat::kLibsvm);
  options.zero_based = true;
  const Batch batch = ReadAll(WriteFile("a.libsvm", "0 0:1 5:2\n"), options);
  ASSERT_EQ(batch.rows(), 1u);
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 5}));
}

TEST_F(LibsvmReading, SkipsBlankAndCommentLinesAndTrailingComments) {
  const std::string path =
      WriteFile("a.libsvm", "# header\n\n   \n1 1:1 # trailing\n\t\n2 2:2#tight\n# end");
  const Batch batch = ReadAll(path, Options(DataFormat::kLibsvm));
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 2}));
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1}));
}

TEST_F(LibsvmReading, IgnoresQidTokens) {
  const Batch batch =
      ReadAll(WriteFile("a.libsvm", "3 qid:17 1:1 2:2\n"), Options(DataFormat::kLibsvm));
  ASSERT_EQ(batch.rows(), 1u);
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 1}));
}

TEST_F(LibsvmReading, AcceptsCrLfLineEndsAndAMissingFinalNewline) {
  const Batch batch =
      ReadAll(WriteFile("a.libsvm", "1 1:1\r\n0 2:3\r\n1 3:4"), Options(DataFormat::kLibsvm));
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 3, 4}));
}

TEST_F(LibsvmReading, AcceptsALabelWithoutFeatures) {
  const Batch batch = ReadAll(WriteFile("a.libsvm", "1\n0 1:1\n"), Options(DataFormat::kLibsvm));
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_TRUE(Indices(batch, 0).empty());
}

TEST_F(LibsvmReading, ReadReturnsAtMostMaxRowsThenZeroAtTheEnd) {
  const std::string path = WriteFile("a.libsvm", "1 1:1\n2 1:1\n3 1:1\n4 1:1\n5 1:1\n");
  std::unique_ptr<ExampleReader> reader =
      OpenReader(InputSplit{path}, Options(DataFormat::kLibsvm));
  Batch batch;
  EXPECT_EQ(reader->Read(2, &batch), 2u);
  EXPECT_EQ(reader->Read(2, &batch), 2u);
  EXPECT_EQ(reader->Read(2, &batch), 1u);
  EXPECT_EQ(reader->Read(2, &batch), 0u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(reader->bytes_read(), std::filesystem::file_size(path));
}

TEST_F(LibsvmReading, ReadsLinesLongerThanTheBlock) {
  std::string line = "7";
  for (int i = 1; i <= 500; ++i) line += " " + std::to_string(i) + ":" + std::to_string(i);
  ReaderOptions options = Options(DataFormat::kLibsvm);
  options.block_size = 64;
  const Batch batch = ReadAll(WriteFile("a.libsvm", line + "\n" + line + "\n"), options);
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(Indices(batch, 1).size(), 500u);
  EXPECT_EQ(Values(batch, 1).back(), 500.0f);
}

TEST_F(LibsvmReading, OpeningAMissingFileThrowsNamingIt) {
  const std::string path = folder_ + "/missing.libsvm";
  const std::string message = ErrorOf([&] { OpenReader(InputSplit{path}, ReaderOptions()); });
  EXPECT_TRUE(Contains(message, path)) << message;
}

TEST_F(LibsvmReading, FeatureDimRejectsIndicesPastIt) {
  ReaderOptions options = Options(DataFormat::kLibsvm);
  options.feature_dim = 3;
  const std::string path = WriteFile("a.libsvm", "1 3:1\n1 4:1\n");
  const std::string message = ErrorOf([&] { ReadAll(path, options); });
  EXPECT_TRUE(Contains(message, path + ":2: feature index 4 is out of range")) << message;
}

TEST_F(LibsvmReading, FeatureDimAppliesToZeroBasedIndices) {
  ReaderOptions options = Options(DataFormat::kLibsvm);
  options.feature_dim = 3;
  options.zero_based = true;
  options.skip_bad_records = true;
  uint64_t skipped = 0;
  const Batch batch = ReadAll(WriteFile("a.libsvm", "1 2:1\n2 3:1\n3 0:1\n"), options, &skipped);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 3}));
  EXPECT_EQ(skipped, 1u);
}

struct BadLine {
  const char* name;
  const char* line;
  const char* problem;  // part of the expected message
};

class LibsvmBadRecord : public TempFolder, public ::testing::WithParamInterface<BadLine> {};

TEST_P(LibsvmBadRecord, ThrowsNamingFileAndLine) {
  // Line 3, after a comment line and a good line.
  const std::string path =
      WriteFile("data.libsvm", std::string("# comment\n1 1:1\n") + GetParam().line + "\n0 2:2\n");
  const std::string message = ErrorOf([&] { ReadAll(path, Options(DataFormat::kLibsvm)); });
  EXPECT_TRUE(Contains(message, path + ":3: ")) << message;
  EXPECT_TRUE(Contains(message, GetParam().problem)) << message;
}

TEST_P(LibsvmBadRecord, IsSkippedAndCountedWithSkipBadRecords) {
  const std::string path =
      WriteFile("data.libsvm", std::string("1 1:1\n") + GetParam().line + "\n2 2:2\n");
  ReaderOptions options = Options(DataFormat::kLibsvm);
  options.skip_bad_records = true;
  uint64_t skipped = 0;
  const Batch batch = ReadAll(path, options, &skipped);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 2}));
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(batch.row_offsets, (std::vector<uint64_t>{0, 1, 2}));
}

INSTANTIATE_TEST_SUITE_P(
    Libsvm, LibsvmBadRecord,
    ::testing::Values(BadLine{"MissingLabel", "1:0.5 2:1", "missing label"},
                      BadLine{"NonNumericLabel", "yes 1:1", "label 'yes' is not a number"},
                      BadLine{"NonNumericIndex", "1 abc:1", "feature index 'abc' is not"},
                      BadLine{"NegativeIndex", "1 -2:1", "feature index '-2' is not"},
                      BadLine{"EmptyIndex", "1 :1", "feature index '' is not"},
                      BadLine{"NonNumericValue", "1 2:x", "feature value 'x' is not a number"},
                      BadLine{"EmptyValue", "1 2:", "feature value '' is not a number"},
                      BadLine{"IndexBelowBase", "1 0:1",
                              "feature index 0 is below 1, the first index (for 0-based "
                              "indices, set --libsvm_zero_based)"},
                      BadLine{"MissingColon", "1 2", "feature '2' has no ':'"},
                      BadLine{"NanLabel", "nan 1:1", "label 'nan' is not finite"},
                      BadLine{"InfLabel", "-inf 1:1", "label '-inf' is not finite"},
                      BadLine{"NanValue", "1 1:NaN", "feature value 'NaN' is not finite"},
                      BadLine{"InfValue", "1 1:1e999", "feature value '1e999' is not finite"}),
    [](const ::testing::TestParamInfo<BadLine>& info) { return std::string(info.param.name); });

TEST_F(LibsvmReading, ErrorInALaterSplitNamesTheLineCountedFromTheFileStart) {
  std::string contents;
  for (int i = 1; i <= 100; ++i) contents += i == 80 ? "1 x:1\n" : std::to_string(i) + " 1:1\n";
  const std::string path = WriteFile("a.libsvm", contents);
  const InputSplit second_half{path, contents.size() / 2, contents.size()};
  std::unique_ptr<ExampleReader> reader = OpenReader(second_half, Options(DataFormat::kLibsvm));
  Batch batch;
  const std::string message = ErrorOf([&] { reader->Read(1000, &batch); });
  EXPECT_TRUE(Contains(message, path + ":80: ")) << message;
}

TEST_F(LibsvmReading, SplitsMeetingAtALineStartEachReadTheirOwnLines) {
  const std::string path = WriteFile("a.libsvm", "1 1:1\n2 1:1\n3 1:1\n");
  ReaderOptions options = Options(DataFormat::kLibsvm);
  Batch first, second;
  OpenReader(InputSplit{path, 0, 6}, options)->Read(10, &first);
  OpenReader(InputSplit{path, 6, 18}, options)->Read(10, &second);
  EXPECT_EQ(first.labels, (std::vector<float>{1}));
  EXPECT_EQ(second.labels, (std::vector<float>{2, 3}));
}

TEST_F(LibsvmReading, ASplitInsideALineReadsFromTheNextLine) {
  const std::string path = WriteFile("a.libsvm", "1 1:1\n2 1:1\n3 1:1\n");
  Batch first, second;
  OpenReader(InputSplit{path, 0, 7}, Options(DataFormat::kLibsvm))->Read(10, &first);
  OpenReader(InputSplit{path, 7, 18}, Options(DataFormat::kLibsvm))->Read(10, &second);
  EXPECT_EQ(first.labels, (std::vector<float>{1, 2}));
  EXPECT_EQ(second.labels, (std::vector<float>{3}));
}

TEST_F(LibsvmReading, ReadCanGoOnAfterAnError) {
  const std::string path = WriteFile("a.libsvm", "1 1:1\nbad\n3 1:1\n");
  std::unique_ptr<ExampleReader> reader =
      OpenReader(InputSplit{path}, Options(DataFormat::kLibsvm));
  Batch batch;
  EXPECT_NE(ErrorOf([&] { reader->Read(10, &batch); }), "no error");
  EXPECT_EQ(reader->Read(10, &batch), 1u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 3}));
  EXPECT_EQ(batch.rows(), 2u);
}

// ---------------------------------------------------------------------------
// csv

class CsvReading : public TempFolder {};

TEST_F(CsvReading, ReadsLabelThenDenseFeaturesKeepingZeros) {
  const std::string path = WriteFile("a.csv", "1,0.5,0,2\n0, 3 ,-1e-2,0\n");
  const Batch batch = ReadAll(path, Options(DataFormat::kCsv));
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 0}));
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{0.5f, 0, 2}));
  EXPECT_EQ(Indices(batch, 1), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(Values(batch, 1), (std::vector<float>{3, -0.01f, 0}));
}

TEST_F(CsvReading, ParsesValuesExactlyAsStrtofDoes) {
  const std::vector<std::string> texts = NumberTexts();
  std::string contents;
  for (const std::string& text : texts) contents += text + "," + text + ", " + text + " \n";
  const Batch batch = ReadAll(WriteFile("a.csv", contents), Options(DataFormat::kCsv));
  ASSERT_EQ(batch.rows(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const float expected = std::strtof(texts[i].c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&batch.labels[i], &expected, sizeof(float)), 0) << texts[i];
    ASSERT_EQ(std::memcmp(&batch.values[2 * i], &expected, sizeof(float)), 0) << texts[i];
    ASSERT_EQ(std::memcmp(&batch.values[2 * i + 1], &expected, sizeof(float)), 0) << texts[i];
  }
}

TEST_F(CsvReading, SkipsBlankLinesAndAcceptsCrLf) {
  const Batch batch =
      ReadAll(WriteFile("a.csv", "\n1,2\r\n\r\n3,4\r\n"), Options(DataFormat::kCsv));
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 3}));
  EXPECT_EQ(batch.values, (std::vector<float>{2, 4}));
}

TEST_F(CsvReading, FeatureDimRejectsRowsWithMoreFeatures) {
  ReaderOptions options = Options(DataFormat::kCsv);
  options.feature_dim = 2;
  const std::string path = WriteFile("a.csv", "1,2,3,4\n");
  const std::string message = ErrorOf([&] { ReadAll(path, options); });
  EXPECT_TRUE(Contains(message, path + ":1: the rows have 3 features, more than feature_dim 2"))
      << message;
}

TEST_F(CsvReading, FeatureDimAcceptsRowsWithAtMostThatManyFeatures) {
  ReaderOptions options = Options(DataFormat::kCsv);
  options.feature_dim = 3;
  EXPECT_EQ(ReadAll(WriteFile("a.csv", "1,2,3,4\n"), options).rows(), 1u);
}

TEST_F(CsvReading, ColumnCountOfALaterSplitComesFromTheFileFirstRow) {
  std::string contents = "0,1,2\n";
  for (int i = 1; i < 50; ++i) contents += std::to_string(i) + ",1,2\n";
  contents += "50,1\n";  // line 51
  const std::string path = WriteFile("a.csv", contents);
  const InputSplit second_half{path, contents.size() / 2, contents.size()};
  std::unique_ptr<ExampleReader> reader = OpenReader(second_half, Options(DataFormat::kCsv));
  Batch batch;
  const std::string message = ErrorOf([&] { reader->Read(1000, &batch); });
  EXPECT_TRUE(Contains(message, path + ":51: the row has 2 columns, the first row has 3"))
      << message;
}

class CsvBadRecord : public TempFolder, public ::testing::WithParamInterface<BadLine> {};

TEST_P(CsvBadRecord, ThrowsNamingFileAndLine) {
  const std::string path =
      WriteFile("data.csv", std::string("1,1,1\n\n") + GetParam().line + "\n0,2,2\n");
  const std::string message = ErrorOf([&] { ReadAll(path, Options(DataFormat::kCsv)); });
  EXPECT_TRUE(Contains(message, path + ":3: ")) << message;
  EXPECT_TRUE(Contains(message, GetParam().problem)) << message;
}

TEST_P(CsvBadRecord, IsSkippedAndCountedWithSkipBadRecords) {
  const std::string path =
      WriteFile("data.csv", std::string("1,1,1\n") + GetParam().line + "\n2,2,2\n");
  ReaderOptions options = Options(DataFormat::kCsv);
  options.skip_bad_records = true;
  uint64_t skipped = 0;
  const Batch batch = ReadAll(path, options, &skipped);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 2}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(batch.row_offsets, (std::vector<uint64_t>{0, 2, 4}));
}

INSTANTIATE_TEST_SUITE_P(
    Csv, CsvBadRecord,
    ::testing::Values(BadLine{"NonNumericLabel", "a,1,1", "label 'a' is not a number"},
                      BadLine{"NonNumericFeature", "1,1,b", "column 3: feature value 'b' is not"},
                      BadLine{"EmptyField", "1,,1", "column 2: feature value '' is not"},
                      BadLine{"NanFeature", "1,nan,1", "feature value 'nan' is not finite"},
                      BadLine{"InfLabel", "inf,1,1", "label 'inf' is not finite"},
                      BadLine{"FewerColumns", "1,1", "the row has 2 columns, the first row has 3"},
                      BadLine{"MoreColumns", "1,1,1,1", "more columns than the first row's 3"}),
    [](const ::testing::TestParamInfo<BadLine>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------
// recordIO-protobuf

aialgs::data::Record DenseRecord(const std::vector<float>& values, std::vector<float> label) {
  aialgs::data::Record record;
  auto* features = (*record.mutable_features())["values"].mutable_float32_tensor();
  for (float value : values) features->add_values(value);
  auto* labels = (*record.mutable_label())["values"].mutable_float32_tensor();
  for (float value : label) labels->add_values(value);
  return record;
}

aialgs::data::Record SparseRecord(const std::vector<uint64_t>& keys,
                                  const std::vector<float>& values, uint64_t dimension,
                                  float label) {
  aialgs::data::Record record = DenseRecord(values, {label});
  auto* features = (*record.mutable_features())["values"].mutable_float32_tensor();
  for (uint64_t key : keys) features->add_keys(key);
  features->add_shape(dimension);
  return record;
}

float FloatWithBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint32_t WordAt(const std::string& bytes, size_t at) {
  uint32_t word;  // little-endian, like the test machines
  std::memcpy(&word, bytes.data() + at, 4);
  return word;
}

bool HasAlignedMagic(const std::string& bytes) {
  for (size_t at = 0; at + 4 <= bytes.size(); at += 4) {
    if (WordAt(bytes, at) == kRecordIOMagic) return true;
  }
  return false;
}

// Whether a RecordIO file holds the start part of a multi-part record.
bool HasMultiPartRecord(const std::string& bytes) {
  for (size_t at = 0; at + 8 <= bytes.size(); at += 4) {
    if (WordAt(bytes, at) == kRecordIOMagic && WordAt(bytes, at + 4) >> 29 == 1) return true;
  }
  return false;
}

// A dense record whose serialized form holds the RecordIO magic at a 4-byte-
// aligned offset, so the writer cuts it into parts.
aialgs::data::Record MultiPartRecord(float label) {
  for (int shift = 0; shift < 4; ++shift) {
    std::vector<float> values(shift, 1.0f);
    values.push_back(FloatWithBits(kRecordIOMagic));
    values.push_back(2.0f);
    values.push_back(FloatWithBits(kRecordIOMagic));
    aialgs::data::Record record = DenseRecord(values, {label});
    if (HasAlignedMagic(record.SerializeAsString())) return record;
  }
  throw std::runtime_error("no multi-part record found");
}

class RecordIOReading : public TempFolder {
 protected:
  std::string WriteRecords(const std::string& name,
                           const std::vector<aialgs::data::Record>& records) {
    const std::string path = folder_ + "/" + name;
    RecordIOWriter writer(path);
    for (const auto& record : records) writer.Write(record);
    writer.Flush();
    return path;
  }
};

TEST_F(RecordIOReading, ReadsDenseRecords) {
  const std::string path =
      WriteRecords("a.rec", {DenseRecord({1, 0, 2}, {1}), DenseRecord({3, 4, 0}, {0})});
  const Batch batch = ReadAll(path, Options(DataFormat::kRecordIO));
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 0}));
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{1, 0, 2}));
  EXPECT_EQ(Values(batch, 1), (std::vector<float>{3, 4, 0}));
}

TEST_F(RecordIOReading, ReadsDenseRecordsWithAMatchingShape) {
  aialgs::data::Record record = DenseRecord({1, 2, 3, 4}, {1});
  auto* features = (*record.mutable_features())["values"].mutable_float32_tensor();
  features->add_shape(2);
  features->add_shape(2);
  EXPECT_EQ(ReadAll(WriteRecords("a.rec", {record}), Options(DataFormat::kRecordIO)).nnz(), 4u);
}

TEST_F(RecordIOReading, ReadsSparseRecordsWithKeysAsIndices) {
  const std::string path = WriteRecords(
      "a.rec", {SparseRecord({3, 70}, {0.5, -1}, 100, 1), SparseRecord({}, {}, 100, 0)});
  const Batch batch = ReadAll(path, Options(DataFormat::kRecordIO));
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{3, 70}));
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{0.5f, -1}));
  EXPECT_TRUE(Indices(batch, 1).empty());
}

TEST_F(RecordIOReading, ReadsMultiPartRecords) {
  const aialgs::data::Record multi_part = MultiPartRecord(5);
  const std::string path =
      WriteRecords("a.rec", {DenseRecord({1}, {1}), multi_part, DenseRecord({2}, {2})});
  std::ifstream file(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(HasMultiPartRecord(bytes));

  const Batch batch = ReadAll(path, Options(DataFormat::kRecordIO));
  ASSERT_EQ(batch.rows(), 3u);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 5, 2}));
  const auto& expected = multi_part.features().at("values").float32_tensor().values();
  const std::vector<float> values = Values(batch, 1);
  ASSERT_EQ(values.size(), static_cast<size_t>(expected.size()));
  EXPECT_EQ(std::memcmp(values.data(), expected.data(), values.size() * sizeof(float)), 0);
}

TEST_F(RecordIOReading, SplitsMeetingAtARecordStartEachReadTheirOwnRecords) {
  const std::string path = folder_ + "/a.rec";
  RecordIOWriter writer(path);
  writer.Write(DenseRecord({1}, {1}));
  const uint64_t boundary = writer.bytes_written();
  writer.Write(DenseRecord({2}, {2}));
  writer.Flush();
  Batch first, second;
  OpenReader(InputSplit{path, 0, boundary}, Options(DataFormat::kRecordIO))->Read(10, &first);
  OpenReader(InputSplit{path, boundary, writer.bytes_written()}, Options(DataFormat::kRecordIO))
      ->Read(10, &second);
  EXPECT_EQ(first.labels, (std::vector<float>{1}));
  EXPECT_EQ(second.labels, (std::vector<float>{2}));
}

TEST_F(RecordIOReading, MultiValueLabelsSetTheBatchLabelWidth) {
  const std::string path =
      WriteRecords("a.rec", {DenseRecord({1}, {1, 2}), DenseRecord({2}, {3, 4})});
  const Batch batch = ReadAll(path, Options(DataFormat::kRecordIO));
  EXPECT_EQ(batch.label_width, 2);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(RecordIOReading, FeatureDimRejectsKeysPastIt) {
  ReaderOptions options = Options(DataFormat::kRecordIO);
  options.feature_dim = 50;
  const std::string path = folder_ + "/a.rec";
  RecordIOWriter writer(path);
  writer.Write(SparseRecord({49}, {1}, 100, 1));
  const uint64_t offset = writer.bytes_written();
  writer.Write(SparseRecord({50}, {1}, 100, 1));
  writer.Flush();
  const std::string message = ErrorOf([&] { ReadAll(path, options); });
  EXPECT_TRUE(Contains(message, path + "@" + std::to_string(offset) +
                                    ": feature index 50 is out of range: feature_dim is 50"))
      << message;
}

TEST_F(RecordIOReading, FeatureDimRejectsDenseRecordsWithMoreValues) {
  ReaderOptions options = Options(DataFormat::kRecordIO);
  options.feature_dim = 2;
  options.skip_bad_records = true;
  uint64_t skipped = 0;
  const std::string path =
      WriteRecords("a.rec", {DenseRecord({1, 2}, {1}), DenseRecord({1, 2, 3}, {2})});
  EXPECT_EQ(ReadAll(path, options, &skipped).labels, (std::vector<float>{1}));
  EXPECT_EQ(skipped, 1u);
}

TEST(RecordIOFraming, WriterCutsPayloadsAtAlignedMagicAndReaderRejoinsThem) {
  const std::string magic("\x0a\x23\xd7\xce", 4);
  const std::vector<std::string> payloads = {"",
                                             "a",
                                             "abcde",
                                             magic,
                                             magic + magic,
                                             "abcd" + magic + "ef",
                                             "ab" + magic + "cdefgh",  // unaligned: one part
                                             "abcd" + magic + "efgh" + magic,
                                             std::string(1000, 'x') + magic + "y"};
  const testing::TempFolder folder("recordio");
  const std::string path = folder.path() + "/raw.rec";
  {
    RecordIOWriter writer(path);
    for (const std::string& payload : payloads) writer.WritePayload(payload);
    writer.Flush();
    EXPECT_EQ(writer.bytes_written(), std::filesystem::file_size(path));
  }
  RecordIOReader reader(InputSplit{path}, 16);
  std::string_view payload;
  for (const std::string& expected : payloads) {
    ASSERT_TRUE(reader.ReadRecord(&payload));
    EXPECT_EQ(std::string(payload), expected);
  }
  EXPECT_FALSE(reader.ReadRecord(&payload));
  EXPECT_EQ(reader.bytes_read(), std::filesystem::file_size(path));
}

TEST(RecordIOFraming, WriterPadsToFourBytesWithLittleEndianHeader) {
  std::ostringstream out;
  RecordIOWriter writer(&out);
  writer.WritePayload("abcde");
  EXPECT_EQ(out.str(), std::string("\x0a\x23\xd7\xce\x05\x00\x00\x00"
                                   "abcde\0\0\0",
                                   16));
}

// A bad record between two good ones (labels 1 and 2): the file, and the
// offset of the bad record.
struct BadRecordFile {
  std::string bytes;
  uint64_t offset;
};

struct BadRecordCase {
  const char* name;
  std::function<std::string()> bad_bytes;  // what goes between the good records
  const char* problem;
  bool at_end = false;  // the bad bytes end the file (a truncated record)
};

std::string Serialized(const aialgs::data::Record& record) {
  std::ostringstream out;
  RecordIOWriter writer(&out);
  writer.Write(record);
  return out.str();
}

std::string Framed(const std::string& payload) {
  std::ostringstream out;
  RecordIOWriter writer(&out);
  writer.WritePayload(payload);
  return out.str();
}

class RecordIOBadRecord : public TempFolder, public ::testing::WithParamInterface<BadRecordCase> {
 protected:
  std::string WriteBadFile(uint64_t* offset) {
    std::string bytes = Serialized(DenseRecord({1}, {1}));
    *offset = bytes.size();
    bytes += GetParam().bad_bytes();
    if (!GetParam().at_end) bytes += Serialized(DenseRecord({2}, {2}));
    return WriteFile("data.rec", bytes);
  }
};

TEST_P(RecordIOBadRecord, ThrowsNamingFileAndOffset) {
  uint64_t offset = 0;
  const std::string path = WriteBadFile(&offset);
  const std::string message = ErrorOf([&] { ReadAll(path, Options(DataFormat::kRecordIO)); });
  EXPECT_TRUE(Contains(message, path + "@" + std::to_string(offset) + ": ")) << message;
  EXPECT_TRUE(Contains(message, GetParam().problem)) << message;
}

TEST_P(RecordIOBadRecord, IsSkippedAndCountedWithSkipBadRecords) {
  uint64_t offset = 0;
  const std::string path = WriteBadFile(&offset);
  ReaderOptions options = Options(DataFormat::kRecordIO);
  options.skip_bad_records = true;
  uint64_t skipped = 0;
  const Batch batch = ReadAll(path, options, &skipped);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(batch.labels, (GetParam().at_end ? std::vector<float>{1} : std::vector<float>{1, 2}));
  EXPECT_EQ(batch.row_offsets.size(), batch.labels.size() + 1);
}

INSTANTIATE_TEST_SUITE_P(
    RecordIO, RecordIOBadRecord,
    ::testing::Values(
        BadRecordCase{"WrongMagic", [] { return std::string(12, '\0'); },
                      "expected the RecordIO magic 0xced7230a, found 0x00000000"},
        BadRecordCase{"UnparsableProtobuf", [] { return Framed(std::string(11, '\xff')); },
                      "not a valid aialgs.data.Record"},
        BadRecordCase{"MissingFeatureValues",
                      [] {
                        aialgs::data::Record record = DenseRecord({1}, {1});
                        record.mutable_features()->clear();
                        (*record.mutable_features())["other"].mutable_float32_tensor();
                        return Serialized(record);
                      },
                      "the record has no features[\"values\"]"},
        BadRecordCase{"MissingLabelValues",
                      [] {
                        aialgs::data::Record record = DenseRecord({1}, {1});
                        record.mutable_label()->clear();
                        return Serialized(record);
                      },
                      "the record has no label[\"values\"]"},
        BadRecordCase{"FeaturesNotFloat32",
                      [] {
                        aialgs::data::Record record = DenseRecord({}, {1});
                        (*record.mutable_features())["values"].mutable_int32_tensor()->add_values(
                            1);
                        return Serialized(record);
                      },
                      "features[\"values\"] is not a float32_tensor"},
        BadRecordCase{"KeysValuesLengthMismatch",
                      [] {
                        return Serialized(SparseRecord({1, 2}, {1}, 10, 1));
                      },
                      "has 2 keys but 1 values"},
        BadRecordCase{"KeyOutsideShape", [] { return Serialized(SparseRecord({10}, {1}, 10, 1)); },
                      "feature index 10 is out of range: the shape holds 10"},
        BadRecordCase{"DenseShapeMismatch",
                      [] {
                        aialgs::data::Record record = DenseRecord({1, 2, 3}, {1});
                        (*record.mutable_features())["values"].mutable_float32_tensor()->add_shape(
                            4);
                        return Serialized(record);
                      },
                      "has 3 values but its shape holds 4"},
        BadRecordCase{
            "NanFeature",
            [] {
              return Serialized(DenseRecord({1, std::numeric_limits<float>::quiet_NaN()}, {1}));
            },
            "features[\"values\"][1] is nan, not finite"},
        BadRecordCase{
            "InfLabel",
            [] { return Serialized(DenseRecord({1}, {std::numeric_limits<float>::infinity()})); },
            "label[\"values\"][0] is inf, not finite"},
        BadRecordCase{"EmptyLabel", [] { return Serialized(DenseRecord({1}, {})); },
                      "label[\"values\"] is empty"},
        BadRecordCase{"LabelWidthChange",
                      [] {
                        return Serialized(DenseRecord({1}, {1, 2}));
                      },
                      "the label has 2 values, the first record's has 1"},
        BadRecordCase{"PartWithoutStart",
                      [] {
                        std::string bytes =
                            Framed("abcd" + std::string("\x0a\x23\xd7\xce", 4) + "efgh");
                        return bytes.substr(12);  // drop the start part: 8 + 4 bytes
                      },
                      "end part of a multi-part record without its start part"},
        BadRecordCase{"TruncatedPayload",
                      [] {
                        const std::string bytes = Serialized(DenseRecord({1, 2, 3}, {3}));
                        return bytes.substr(0, bytes.size() - 8);
                      },
                      "truncated record", true},
        BadRecordCase{"TruncatedHeader",
                      [] { return Serialized(DenseRecord({1}, {3})).substr(0, 6); },
                      "truncated record", true},
        BadRecordCase{"TruncatedMultiPart",
                      [] {
                        std::string bytes =
                            Framed("abcd" + std::string("\x0a\x23\xd7\xce", 4) + "efgh");
                        return bytes.substr(0, 12);  // only the start part
                      },
                      "truncated record", true}),
    [](const ::testing::TestParamInfo<BadRecordCase>& info) {
      return std::string(info.param.name);
    });

TEST(ChannelFormat, ParsesNamesAndSageMakerContentTypes) {
  EXPECT_EQ(ParseDataFormat("libsvm"), DataFormat::kLibsvm);
  EXPECT_EQ(ParseDataFormat("text/libsvm"), DataFormat::kLibsvm);
  EXPECT_EQ(ParseDataFormat("csv"), DataFormat::kCsv);
  EXPECT_EQ(ParseDataFormat("text/csv"), DataFormat::kCsv);
  EXPECT_EQ(ParseDataFormat("recordio-protobuf"), DataFormat::kRecordIO);
  EXPECT_EQ(ParseDataFormat("recordio"), DataFormat::kRecordIO);
  EXPECT_EQ(ParseDataFormat("application/x-recordio-protobuf"), DataFormat::kRecordIO);
}

TEST(ChannelFormat, UnknownNameThrowsNamingTheAcceptedOnes) {
  const std::string message = ErrorOf([] { ParseDataFormat("parquet"); });
  EXPECT_TRUE(Contains(message, "'parquet'")) << message;
  EXPECT_TRUE(Contains(message, "libsvm, csv or recordio-protobuf")) << message;
}

// ---------------------------------------------------------------------------
// Label rules (ReaderOptions::labels), in every format

ReaderOptions WithLabels(DataFormat format, LabelRule rule, int num_classes = 0) {
  ReaderOptions options = Options(format);
  options.labels = rule;
  options.num_classes = num_classes;
  return options;
}

class LabelRules : public RecordIOReading {
 protected:
  // A file of `format` with one example per label, each with feature 0 = 1.
  // Sets *offsets, for recordIO, to each record's byte offset.
  std::string WriteLabels(DataFormat format, const std::vector<std::string>& labels,
                          std::vector<uint64_t>* offsets = nullptr) {
    if (format == DataFormat::kRecordIO) {
      const std::string path = folder_ + "/labels.rec";
      RecordIOWriter writer(path);
      for (const std::string& label : labels) {
        if (offsets != nullptr) offsets->push_back(writer.bytes_written());
        writer.Write(DenseRecord({1}, {std::stof(label)}));
      }
      writer.Flush();
      return path;
    }
    std::string contents;
    for (const std::string& label : labels) {
      contents += label + (format == DataFormat::kCsv ? ",1\n" : " 1:1\n");
    }
    return WriteFile(format == DataFormat::kCsv ? "labels.csv" : "labels.libsvm", contents);
  }
};

TEST_F(LabelRules, BinaryKeepsZeroOneAndReadsMinusOnePlusOneAsZeroOne) {
  for (DataFormat format : {DataFormat::kLibsvm, DataFormat::kCsv, DataFormat::kRecordIO}) {
    const std::string path = WriteLabels(format, {"-1", "+1", "0", "1", "-1"});
    EXPECT_EQ(ReadAll(path, WithLabels(format, LabelRule::kBinary)).labels,
              (std::vector<float>{0, 1, 0, 1, 0}))
        << DataFormatName(format);
  }
}

TEST_F(LabelRules, BinaryRejectsOtherLabelsNamingFileLineAndValueInLibsvm) {
  for (const char* label : {"2", "0.5", "-2"}) {
    const std::string path = WriteLabels(DataFormat::kLibsvm, {"1", "0", label, "1"});
    const std::string message =
        ErrorOf([&] { ReadAll(path, WithLabels(DataFormat::kLibsvm, LabelRule::kBinary)); });
    EXPECT_TRUE(
        Contains(message, path + ":3: label " + label + " is not a binary label (0/1 or -1/+1)"))
        << message;
  }
}

TEST_F(LabelRules, BinaryRejectsOtherLabelsNamingFileLineAndValueInCsv) {
  const std::string path = WriteLabels(DataFormat::kCsv, {"1", "2"});
  const std::string message =
      ErrorOf([&] { ReadAll(path, WithLabels(DataFormat::kCsv, LabelRule::kBinary)); });
  EXPECT_TRUE(Contains(message, path + ":2: label 2 is not a binary label")) << message;
}

TEST_F(LabelRules, BinaryRejectsOtherLabelsNamingFileRecordAndValueInRecordIO) {
  std::vector<uint64_t> offsets;
  const std::string path = WriteLabels(DataFormat::kRecordIO, {"1", "3"}, &offsets);
  const std::string message =
      ErrorOf([&] { ReadAll(path, WithLabels(DataFormat::kRecordIO, LabelRule::kBinary)); });
  EXPECT_TRUE(Contains(message,
                       path + "@" + std::to_string(offsets[1]) + ": label 3 is not a binary label"))
      << message;
}

TEST_F(LabelRules, ClassIdsMustBeIntegersBelowNumClasses) {
  const std::string good = WriteLabels(DataFormat::kLibsvm, {"0", "2", "1"});
  EXPECT_EQ(ReadAll(good, WithLabels(DataFormat::kLibsvm, LabelRule::kClassId, 3)).labels,
            (std::vector<float>{0, 2, 1}));
  for (const char* label : {"3", "-1", "1.5"}) {
    const std::string path = WriteLabels(DataFormat::kLibsvm, {"0", label});
    const std::string message =
        ErrorOf([&] { ReadAll(path, WithLabels(DataFormat::kLibsvm, LabelRule::kClassId, 3)); });
    EXPECT_TRUE(Contains(
        message, path + ":2: label " + label + " is not a class id in 0..2 (num_classes 3)"))
        << message;
  }
}

TEST_F(LabelRules, RegressionTakesAnyFiniteLabelAsItIs) {
  const std::string path = WriteLabels(DataFormat::kLibsvm, {"-1", "150.5", "2", "-3e3"});
  EXPECT_EQ(ReadAll(path, WithLabels(DataFormat::kLibsvm, LabelRule::kFinite)).labels,
            (std::vector<float>{-1, 150.5f, 2, -3000}));
}

TEST_F(LabelRules, ABadLabelIsABadRecordSkippedAndCountedWithSkipBadRecords) {
  for (DataFormat format : {DataFormat::kLibsvm, DataFormat::kCsv, DataFormat::kRecordIO}) {
    const std::string path = WriteLabels(format, {"1", "2", "-1", "7"});
    ReaderOptions options = WithLabels(format, LabelRule::kBinary);
    options.skip_bad_records = true;
    uint64_t skipped = 0;
    const Batch batch = ReadAll(path, options, &skipped);
    EXPECT_EQ(skipped, 2u) << DataFormatName(format);
    EXPECT_EQ(batch.labels, (std::vector<float>{1, 0})) << DataFormatName(format);
    EXPECT_EQ(batch.row_offsets, (std::vector<uint64_t>{0, 1, 2})) << DataFormatName(format);
    EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 0})) << DataFormatName(format);
  }
}

}  // namespace
}  // namespace keel
