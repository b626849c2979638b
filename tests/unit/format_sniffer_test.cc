// A data file's format from its first bytes (io/format_sniffer.h), and how a
// job settles its --data_format with it (ResolveDataFormat, cli/job_flags.h).
#include "io/format_sniffer.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "base/files.h"
#include "cli/job_flags.h"
#include "io/recordio.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::ErrorOf;

// A recordIO file's first bytes: one record.
std::string RecordIOBytes() {
  std::ostringstream out;
  RecordIOWriter writer(&out);
  writer.WritePayload("a record's payload");
  writer.Flush();
  return out.str();
}

// `text` is sniffed as `format`, for `evidence`.
void ExpectSniffed(const std::string& text, DataFormat format, const std::string& evidence) {
  const SniffedFormat sniffed = SniffDataFormat(text);
  ASSERT_TRUE(sniffed.format.has_value());
  EXPECT_EQ(*sniffed.format, format);
  EXPECT_EQ(sniffed.evidence, evidence);
}

TEST(SniffDataFormat, RecordIOsMagicNumberIsRecordIO) {
  ExpectSniffed(RecordIOBytes(), DataFormat::kRecordIO, "recordIO's magic number");
}

TEST(SniffDataFormat, IndexValuePairsAreLibsvm) {
  ExpectSniffed("1 3:0.5 17:1\n0 2:1\n", DataFormat::kLibsvm, "index:value pairs");
}

TEST(SniffDataFormat, ALibsvmLineWithAQueryIdIsLibsvm) {
  EXPECT_EQ(SniffDataFormat("2 qid:7 1:0.5\n").format, DataFormat::kLibsvm);
}

TEST(SniffDataFormat, CommasAreCsv) {
  ExpectSniffed("1,0.5,0,2.25\n0,1,1,0\n", DataFormat::kCsv, "commas");
}

TEST(SniffDataFormat, BlankLinesAndCommentsBeforeTheFirstRowAreSkipped) {
  EXPECT_EQ(SniffDataFormat("\n# written by datagen, 3:1 is not data\n\n1,2,3\n").format,
            DataFormat::kCsv);
}

TEST(SniffDataFormat, OneColumnOrNothingTellsNothing) {
  EXPECT_FALSE(SniffDataFormat("1\n0\n").format.has_value());
  EXPECT_FALSE(SniffDataFormat("").format.has_value());
  EXPECT_FALSE(SniffDataFormat(std::string("\x01\x02\x03\x04\x05", 5)).format.has_value());
}

// Each test sets --data_format as a command line would; the fixture restores it.
class ResolveDataFormatTest : public testing::TempFolderTest {
 protected:
  ReaderOptions Resolve(const std::string& channel) {
    return ResolveDataFormat(channel, ReaderOptionsFromFlags(), false);
  }

 private:
  gflags::FlagSaver saver_;
};

TEST_F(ResolveDataFormatTest, WithoutDataFormatTheDataIsReadAsItsFirstFileShows) {
  MakeDirectories(folder_ + "/train");
  WriteFile("train/part-0", "1,0.5,2\n");
  WriteFile("train/part-1", "1 1:2\n");  // the first file decides, for every worker alike
  EXPECT_EQ(Resolve(folder_ + "/train").format, DataFormat::kCsv);
  WriteFile("recordio", RecordIOBytes());
  EXPECT_EQ(Resolve(folder_ + "/recordio").format, DataFormat::kRecordIO);
}

TEST_F(ResolveDataFormatTest, WithoutDataFormatDataThatShowsNothingIsLibsvm) {
  WriteFile("labels-only", "1\n0\n");
  EXPECT_EQ(Resolve(folder_ + "/labels-only").format, DataFormat::kLibsvm);
}

TEST_F(ResolveDataFormatTest, ADataFormatThatMatchesTheDataIsKept) {
  gflags::SetCommandLineOption("data_format", "csv");
  WriteFile("train.csv", "1,0.5,2\n");
  EXPECT_EQ(Resolve(folder_ + "/train.csv").format, DataFormat::kCsv);
}

TEST_F(ResolveDataFormatTest, ADataFormatTheDataContradictsIsAnErrorNamingTheFlagToSet) {
  gflags::SetCommandLineOption("data_format", "libsvm");
  const std::string path = WriteFile("train.csv", "1,0.5,2\n");
  EXPECT_EQ(ErrorOf([&] { Resolve(path); }),
            "--data_format=libsvm but " + path +
                " shows commas: it is csv data; set --data_format=csv (or leave it out)");
  gflags::SetCommandLineOption("data_format", "csv");
  const std::string recordio = WriteFile("train.rec", RecordIOBytes());
  EXPECT_EQ(ErrorOf([&] { Resolve(recordio); }),
            "--data_format=csv but " + recordio +
                " shows recordIO's magic number: it is recordio-protobuf data; set "
                "--data_format=recordio-protobuf (or leave it out)");
}

TEST_F(ResolveDataFormatTest, APipeIsNotReadAhead) {
  // Nothing there: reading it would fail (or, for a FIFO, block).
  EXPECT_EQ(Resolve("pipe:" + folder_ + "/no-such-fifo").format, DataFormat::kLibsvm);
}

}  // namespace
}  // namespace keel
