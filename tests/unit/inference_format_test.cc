// The inference contract's bodies (io/inference_format.h): requests decoded
// into batches, bad requests refused by status with the record named,
// headers parsed, predictions encoded; and the Scorer (worker/scorer.h) that
// turns a decoded batch into predictions.
#include "io/inference_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/json_reader.h"
#include "io/recordio.h"
#include "record.pb.h"
#include "test_util.h"
#include "worker/model_artifact.h"
#include "worker/scorer.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

// ---------------------------------------------------------------------------
// Helpers

InferenceInput Width(uint64_t input_dim) {
  InferenceInput input;
  input.input_dim = input_dim;
  return input;
}

// The batch `body` decodes to.
Batch Decoded(InferenceFormat format, std::string_view body, const InferenceInput& input = {}) {
  Batch batch;
  DecodeRecords(format, body, input, &batch);
  return batch;
}

std::vector<uint64_t> Indices(const Batch& batch, size_t row) {
  return {batch.indices.begin() + static_cast<long>(batch.row_offsets[row]),
          batch.indices.begin() + static_cast<long>(batch.row_offsets[row + 1])};
}

std::vector<float> Values(const Batch& batch, size_t row) {
  return {batch.values.begin() + static_cast<long>(batch.row_offsets[row]),
          batch.values.begin() + static_cast<long>(batch.row_offsets[row + 1])};
}

bool SameBatch(const Batch& a, const Batch& b) {
  return a.labels == b.labels && a.row_offsets == b.row_offsets && a.indices == b.indices &&
         a.values == b.values && a.label_width == b.label_width;
}

// Whether DecodeRecords refuses `body` with InferenceRequestError 400 whose
// message holds `message`, leaving a batch that already held a row (from an
// earlier request) exactly as it was.
::testing::AssertionResult Refused(InferenceFormat format, std::string_view body,
                                   const InferenceInput& input, const std::string& message) {
  Batch batch;
  const uint64_t index = 7;
  const float value = 2;
  batch.AddRow(0, &index, &value, 1);
  const Batch before = batch;
  try {
    DecodeRecords(format, body, input, &batch);
  } catch (const InferenceRequestError& error) {
    if (error.status() != 400) {
      return ::testing::AssertionFailure() << "status " << error.status() << ": " << error.what();
    }
    if (!Contains(error.what(), message)) {
      return ::testing::AssertionFailure()
             << "the message '" << error.what() << "' does not hold '" << message << "'";
    }
    if (!SameBatch(batch, before)) {
      return ::testing::AssertionFailure() << "the batch changed: it has " << batch.rows()
                                           << " rows, " << batch.nnz() << " non-zeros";
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "accepted, adding " << batch.rows() - 1 << " rows";
}

// The status and message of the InferenceRequestError `body` throws.
struct Refusal {
  int status = 0;
  std::string message = "no error";
};

Refusal RefusalOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const InferenceRequestError& error) {
    return {error.status(), error.what()};
  }
  return {};
}

aialgs::data::Record DenseRecord(const std::vector<float>& values) {
  aialgs::data::Record record;
  auto* tensor = (*record.mutable_features())["values"].mutable_float32_tensor();
  for (float value : values) tensor->add_values(value);
  return record;
}

// `shape` 0: none.
aialgs::data::Record SparseRecord(const std::vector<uint64_t>& keys,
                                  const std::vector<float>& values, uint64_t shape = 0) {
  aialgs::data::Record record = DenseRecord(values);
  auto* tensor = (*record.mutable_features())["values"].mutable_float32_tensor();
  for (uint64_t key : keys) tensor->add_keys(key);
  if (shape > 0) tensor->add_shape(shape);
  return record;
}

std::string RecordIOPayload(std::string_view payload) {
  std::ostringstream out;
  RecordIOWriter writer(&out);
  writer.WritePayload(payload);
  writer.Flush();
  return out.str();
}

// A RecordIO header: the magic, then `flag` and `length` in lrecord.
std::string RecordIOHeader(uint32_t flag, uint32_t length) {
  const uint32_t words[2] = {kRecordIOMagic, flag << 29 | length};
  return std::string(reinterpret_cast<const char*>(words), sizeof(words));
}

float MagicAsFloat() {
  float magic;
  std::memcpy(&magic, &kRecordIOMagic, sizeof(magic));
  return magic;
}

// ---------------------------------------------------------------------------
// text/csv

TEST(InferenceCsv, DecodesEachLineAsADenseRowOfItsColumnsWithLabelZero) {
  const Batch batch = Decoded(InferenceFormat::kCsv, "1,2.5,-3\n0,0,4e2\n");
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.row_offsets, (std::vector<uint64_t>{0, 3, 6}));
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2.5f, -3, 0, 0, 400}));
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 0}));
  EXPECT_EQ(batch.label_width, 1);
}

TEST(InferenceCsv, SkipsBlankLinesAndAcceptsCrLfSpacesAndNoFinalNewline) {
  const Batch batch = Decoded(InferenceFormat::kCsv, "1, 2\r\n\r\n   \n 3 ,4", Width(2));
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2, 3, 4}));
}

TEST(InferenceCsv, AWrongFeatureCountIsRefusedNamingTheRecord) {
  EXPECT_TRUE(Refused(InferenceFormat::kCsv, "1,2,3\n4,5\n", Width(3),
                      "record 2 (line 2): 2 features, the model takes 3"));
}

TEST(InferenceCsv, AWrongFeatureCountNamesTheLineToo) {
  // The header: "for the line formats also its line".
  EXPECT_TRUE(Refused(InferenceFormat::kCsv, "\n1,2\n", Width(3), "line 2"));
}

TEST(InferenceCsv, ANonNumberIsRefusedNamingRecordLineAndColumn) {
  EXPECT_TRUE(Refused(InferenceFormat::kCsv, "1,2\n\n3,abc\n", {},
                      "record 2 (line 3): column 2: 'abc' is not a finite number"));
}

TEST(InferenceCsv, AnEmptyFieldIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kCsv, "1,,2\n", {},
                      "record 1 (line 1): column 2: '' is not a finite number"));
}

TEST(InferenceCsv, NanInfinityAndValuesBeyondFloatAreRefused) {
  for (const std::string value : {"nan", "inf", "-inf", "1e39"}) {
    SCOPED_TRACE(value);
    EXPECT_TRUE(Refused(InferenceFormat::kCsv, "1,2\n3," + value + "\n", {},
                        "record 2 (line 2): column 2: '" + value + "' is not a finite number"));
  }
}

// ---------------------------------------------------------------------------
// text/libsvm

TEST(InferenceLibsvm, IgnoresALeadingLabelAndShiftsOneBasedIndicesToZeroBased) {
  const Batch batch = Decoded(InferenceFormat::kLibsvm, "1 1:0.5 3:2\n2:4\n");
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{0.5f, 2}));
  EXPECT_EQ(Indices(batch, 1), (std::vector<uint64_t>{1}));
  EXPECT_EQ(Values(batch, 1), (std::vector<float>{4}));
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 0}));
}

TEST(InferenceLibsvm, ZeroBasedKeepsIndicesAndAcceptsIndexZero) {
  InferenceInput input;
  input.libsvm_zero_based = true;
  const Batch batch = Decoded(InferenceFormat::kLibsvm, "-1 0:1 5:2\n", input);
  ASSERT_EQ(batch.rows(), 1u);
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 5}));
}

TEST(InferenceLibsvm, IndexZeroIsRefusedWhenIndicesStartAtOne) {
  EXPECT_TRUE(Refused(InferenceFormat::kLibsvm, "1:1\n0:1\n", {},
                      "record 2 (line 2): feature index 0 is below 1"));
}

TEST(InferenceLibsvm, SkipsBlankAndCommentLinesAndQidAndAcceptsCrLf) {
  const Batch batch =
      Decoded(InferenceFormat::kLibsvm, "# header\r\n\r\n1 qid:3 1:1 # note\r\n  \n2:2");
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2}));
}

TEST(InferenceLibsvm, ALabelAloneIsARecordWithoutFeatures) {
  const Batch batch = Decoded(InferenceFormat::kLibsvm, "1\n");
  ASSERT_EQ(batch.rows(), 1u);
  EXPECT_TRUE(Indices(batch, 0).empty());
}

TEST(InferenceLibsvm, AnIndexAtOrBeyondTheInputWidthIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kLibsvm, "1:1 3:1\n1:1 4:1\n", Width(3),
                      "record 2 (line 2): feature index 4 is out of range: the model takes "
                      "indices 1 to 3"));
}

TEST(InferenceLibsvm, ANonIntegerIndexIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kLibsvm, "1 a:1\n", {},
                      "record 1 (line 1): feature index 'a' is not a non-negative integer"));
}

TEST(InferenceLibsvm, ATokenWithoutColonAfterTheLabelIsRefused) {
  EXPECT_TRUE(
      Refused(InferenceFormat::kLibsvm, "1 2\n", {}, "record 1 (line 1): feature '2' has no ':'"));
}

TEST(InferenceLibsvm, ANonFiniteValueIsRefused) {
  for (const std::string value : {"nan", "inf", "1e39", "x"}) {
    SCOPED_TRACE(value);
    EXPECT_TRUE(Refused(InferenceFormat::kLibsvm, "1:1\n2:" + value + "\n", {},
                        "record 2 (line 2): feature value '" + value + "' is not a finite number"));
  }
}

// ---------------------------------------------------------------------------
// application/json

TEST(InferenceJson, DecodesInstancesOfDenseFeatures) {
  const Batch batch = Decoded(
      InferenceFormat::kJson,
      R"({"instances": [{"features": [1, 2.5, -3]}, {"features": [0, 0, 4e2]}]})", Width(3));
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2.5f, -3, 0, 0, 400}));
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 0}));
}

TEST(InferenceJson, DecodesSageMakersSparseDataForm) {
  const Batch batch = Decoded(
      InferenceFormat::kJson,
      R"({"instances": [{"data": {"features": {"keys": [1, 7], "values": [0.5, -2], "shape": [10]}}},
                         {"data": {"features": {"keys": [], "values": []}}}]})",
      Width(10));
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{1, 7}));
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{0.5f, -2}));
  EXPECT_TRUE(Indices(batch, 1).empty());
}

TEST(InferenceJson, DecodesASingleInstanceWithoutInstances) {
  const Batch dense = Decoded(InferenceFormat::kJson, R"({"features": [4, 5]})");
  ASSERT_EQ(dense.rows(), 1u);
  EXPECT_EQ(dense.values, (std::vector<float>{4, 5}));
  const Batch sparse =
      Decoded(InferenceFormat::kJson, R"({"data": {"features": {"keys": [3], "values": [9]}}})");
  ASSERT_EQ(sparse.rows(), 1u);
  EXPECT_EQ(sparse.indices, (std::vector<uint64_t>{3}));
  EXPECT_EQ(sparse.values, (std::vector<float>{9}));
}

TEST(InferenceJson, DecodesABareArrayOfNumbersAsOneDenseRecord) {
  const Batch batch = Decoded(InferenceFormat::kJson, " [1, -2.5e-1, 3] \n", Width(3));
  ASSERT_EQ(batch.rows(), 1u);
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, -0.25f, 3}));
}

TEST(InferenceJson, DecodesABareArrayOfInstancesOfEveryForm) {
  const Batch batch =
      Decoded(InferenceFormat::kJson,
              R"([[1, 2], {"features": [3, 4]}, {"features": {"keys": [1], "values": [5]}}])");
  ASSERT_EQ(batch.rows(), 3u);
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1, 0, 1, 1}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(InferenceJson, AnEmptyInstancesArrayIsNoRecords) {
  EXPECT_EQ(Decoded(InferenceFormat::kJson, R"({"instances": []})").rows(), 0u);
  EXPECT_EQ(Decoded(InferenceFormat::kJson, "[]").rows(), 0u);
}

TEST(InferenceJson, InstancesBesideARecordOfTheRequestsOwnAreRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"instances": [[1]], "features": [1, 2]})", {},
                      "put every record in \"instances\""));
}

TEST(InferenceRequest, AByteOrderMarkBeforeATextBodyIsSkipped) {
  const Batch batch = Decoded(InferenceFormat::kCsv,
                              "\xEF\xBB\xBF"
                              "1,2\n");
  ASSERT_EQ(batch.rows(), 1u);
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2}));
}

TEST(InferenceJson, AWrongFeatureCountIsRefusedNamingTheRecord) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson,
                      R"({"instances": [{"features": [1, 2, 3]}, {"features": [1]}]})", Width(3),
                      "record 2: 1 features, the model takes 3"));
}

TEST(InferenceJson, ASparseIndexAtOrBeyondTheInputWidthIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson,
                      R"({"instances": [{"features": {"keys": [0, 3], "values": [1, 1]}}]})",
                      Width(3),
                      "record 1: feature index 3 is out of range: the model takes indices 0 to 2"));
}

TEST(InferenceJson, AnIndexAtOrBeyondTheRecordsShapeIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson,
                      R"({"features": {"keys": [5], "values": [1], "shape": [5]}})", {},
                      "record 1: feature index 5 is out of range: the model takes indices 0 to 4"));
}

TEST(InferenceJson, AShapeOtherThanTheInputWidthIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson,
                      R"({"features": {"keys": [1], "values": [1], "shape": [5]}})", Width(3),
                      "record 1: shape 5, the model takes 3 features"));
}

TEST(InferenceJson, KeysAndValuesOfDifferentLengthsAreRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson,
                      R"({"instances": [[1], {"features": {"keys": [0, 1], "values": [1]}}]})", {},
                      "record 2: 2 keys but 1 values"));
}

TEST(InferenceJson, ANonNumberFeatureIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"instances": [[1], [2, "3"]]})", {},
                      "record 2: features[1] is a string, not a number"));
}

TEST(InferenceJson, ANumberBeyondFloatIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"instances": [[1e39]]})", {},
                      "record 1: features[0] is '1e39', beyond float32's range"));
}

TEST(InferenceJson, NanAndInfinityAreNotJsonNumbers) {
  for (const std::string value : {"NaN", "Infinity", "-Infinity"}) {
    SCOPED_TRACE(value);
    EXPECT_TRUE(Refused(InferenceFormat::kJson, "{\"instances\": [[" + value + "]]}", {},
                        "the request's JSON: byte 1"));
  }
}

TEST(InferenceJson, ASyntaxErrorIsRefusedNamingTheByte) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"instances": [[1, 2]})", {},
                      "the request's JSON: byte 21: expected ']' but found '}'"));
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"features": [1, 2]} x)", {},
                      "the request's JSON: byte 21: text after the JSON value"));
}

TEST(InferenceJson, JsonOfTheWrongShapeIsRefusedSayingWhatWasExpected) {
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"instances": 5})", {},
                      "\"instances\" is a number, not an array"));
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"instances": [[1], {"feature": [1]}]})", {},
                      "record 2: the instance has neither \"features\" nor \"data\""));
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"features": "1,2"})", {},
                      "record 1: features is a string, not an array"));
  EXPECT_TRUE(Refused(InferenceFormat::kJson, R"({"data": [1, 2]})", {},
                      "record 1: \"data\" is not an object"));
  EXPECT_TRUE(Refused(InferenceFormat::kJson, "\"1,2\"", {},
                      "expected {\"instances\": [...]} but found a string"));
}

// ---------------------------------------------------------------------------
// application/jsonlines

TEST(InferenceJsonLines, DecodesAnInstanceOfAnyFormPerLine) {
  const Batch batch = Decoded(InferenceFormat::kJsonLines,
                              "{\"features\": [1, 2]}\n"
                              "[3, 4]\r\n"
                              "\n"
                              "{\"data\": {\"features\": {\"keys\": [1], \"values\": [5]}}}",
                              Width(2));
  ASSERT_EQ(batch.rows(), 3u);
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1, 0, 1, 1}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 0, 0}));
}

TEST(InferenceJsonLines, ASyntaxErrorIsRefusedNamingRecordAndLine) {
  EXPECT_TRUE(Refused(InferenceFormat::kJsonLines, "[1, 2]\n\n[3, 4\n", {},
                      "record 2 (line 3): byte 5: expected ']' but found the end"));
}

TEST(InferenceJsonLines, AWrongFeatureCountIsRefusedNamingTheRecord) {
  EXPECT_TRUE(Refused(InferenceFormat::kJsonLines, "[1, 2]\n[3]\n", Width(2),
                      "record 2 (line 2): 1 features, the model takes 2"));
}

// ---------------------------------------------------------------------------
// application/x-recordio-protobuf

TEST(InferenceRecordIO, DecodesDenseAndSparseTensorsIgnoringLabels) {
  aialgs::data::Record dense = DenseRecord({1, 0, 2.5f});
  (*dense.mutable_label())["values"].mutable_float32_tensor()->add_values(7);
  const Batch batch = Decoded(
      InferenceFormat::kRecordIO,
      testing::RecordIOBody({dense, SparseRecord({0, 2}, {-1, 4}, 3), SparseRecord({1}, {6})}),
      Width(3));
  ASSERT_EQ(batch.rows(), 3u);
  EXPECT_EQ(Indices(batch, 0), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{1, 0, 2.5f}));
  EXPECT_EQ(Indices(batch, 1), (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(Values(batch, 1), (std::vector<float>{-1, 4}));
  EXPECT_EQ(Indices(batch, 2), (std::vector<uint64_t>{1}));
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 0, 0}));
}

TEST(InferenceRecordIO, DecodesARecordWrittenInParts) {
  // Values before the magic shift it until it sits 4-byte aligned in the
  // payload, where RecordIOWriter cuts the record into parts.
  aialgs::data::Record record;
  std::vector<float> values;
  for (int shift = 0; shift < 4; ++shift) {
    values.assign(static_cast<size_t>(shift), 1.0f);
    values.push_back(MagicAsFloat());
    values.push_back(3);
    record = DenseRecord(values);
    const std::string payload = record.SerializeAsString();
    bool aligned = false;
    for (size_t at = 0; at + 4 <= payload.size(); at += 4) {
      aligned = aligned || std::memcmp(payload.data() + at, &kRecordIOMagic, 4) == 0;
    }
    if (aligned) break;
  }
  const std::string first = testing::RecordIOBody({DenseRecord({5})});
  const std::string body = first + testing::RecordIOBody({record});
  uint32_t second_lrecord;
  std::memcpy(&second_lrecord, body.data() + first.size() + 4, 4);
  ASSERT_EQ(second_lrecord >> 29, 1u) << "the record was not written in parts";

  const Batch batch = Decoded(InferenceFormat::kRecordIO, body);
  ASSERT_EQ(batch.rows(), 2u);
  EXPECT_EQ(Values(batch, 0), (std::vector<float>{5}));
  const std::vector<float> decoded = Values(batch, 1);
  ASSERT_EQ(decoded.size(), values.size());
  EXPECT_EQ(std::memcmp(decoded.data(), values.data(), values.size() * sizeof(float)), 0);
}

TEST(InferenceRecordIO, AWrongFeatureCountIsRefusedNamingTheRecord) {
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO,
                      testing::RecordIOBody({DenseRecord({1, 2, 3}), DenseRecord({1, 2})}),
                      Width(3), "record 2: 2 features, the model takes 3"));
}

TEST(InferenceRecordIO, ASparseKeyAtOrBeyondTheInputWidthOrShapeIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO,
                      testing::RecordIOBody({SparseRecord({0, 3}, {1, 1})}), Width(3),
                      "record 1: feature index 3 is out of range"));
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO,
                      testing::RecordIOBody({DenseRecord({1}), SparseRecord({4}, {1}, 4)}), {},
                      "record 2: feature index 4 is out of range"));
}

TEST(InferenceRecordIO, KeysAndValuesOfDifferentLengthsAreRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO,
                      testing::RecordIOBody({SparseRecord({0, 1}, {1})}), {},
                      "record 1: 2 keys but 1 values"));
}

TEST(InferenceRecordIO, ANonFiniteValueIsRefused) {
  const float infinity = std::numeric_limits<float>::infinity();
  for (const float value : {std::numeric_limits<float>::quiet_NaN(), infinity, -infinity}) {
    SCOPED_TRACE(value);
    EXPECT_TRUE(Refused(InferenceFormat::kRecordIO,
                        testing::RecordIOBody({DenseRecord({1, value})}), {},
                        "record 1: features[\"values\"][1] is not finite"));
  }
}

TEST(InferenceRecordIO, ATruncatedBodyIsRefused) {
  const std::string body = testing::RecordIOBody({DenseRecord({1, 2}), DenseRecord({3, 4})});
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO, body.substr(0, body.size() - 3), {},
                      "record 2: RecordIO record at byte"));
  EXPECT_TRUE(
      Refused(InferenceFormat::kRecordIO, body + RecordIOHeader(0, 4).substr(0, 6), {},
              "record 3: truncated RecordIO header at byte " + std::to_string(body.size())));
}

TEST(InferenceRecordIO, ABadMagicIsRefused) {
  std::string body = testing::RecordIOBody({DenseRecord({1})});
  body[0] = 'x';
  EXPECT_TRUE(
      Refused(InferenceFormat::kRecordIO, body, {}, "record 1: no RecordIO magic at byte 0"));
}

TEST(InferenceRecordIO, PartsOutOfOrderOrUnfinishedAreRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO, RecordIOHeader(2, 0), {},
                      "record 1: RecordIO part with flag 2 out of order"));
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO, RecordIOHeader(1, 0) + RecordIOHeader(2, 0), {},
                      "record 1: the body ends inside a multi-part record"));
}

TEST(InferenceRecordIO, APayloadThatIsNotARecordIsRefused) {
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO, RecordIOPayload("\xff\xff\xff\xff"), {},
                      "record 1: the payload is not a valid aialgs.data.Record protobuf"));
}

TEST(InferenceRecordIO, ARecordWithoutFeatureValuesIsRefused) {
  aialgs::data::Record record;
  (*record.mutable_features())["other"].mutable_float32_tensor()->add_values(1);
  EXPECT_TRUE(Refused(InferenceFormat::kRecordIO, testing::RecordIOBody({DenseRecord({1}), record}),
                      {}, "record 2: the record has no features[\"values\"]"));
}

TEST(InferenceRecordIO, ASparseRecordWithoutNonZerosIsAnEmptyRowOfTheModelsWidth) {
  // All of a sparse record's features zero: no keys, no values, its shape.
  const Batch batch = Decoded(InferenceFormat::kRecordIO,
                              testing::RecordIOBody({SparseRecord({}, {}, 3)}), Width(3));
  ASSERT_EQ(batch.rows(), 1u);
  EXPECT_TRUE(Indices(batch, 0).empty());
}

// ---------------------------------------------------------------------------
// Every request format

constexpr InferenceFormat kRequestFormats[] = {InferenceFormat::kCsv, InferenceFormat::kLibsvm,
                                               InferenceFormat::kJson, InferenceFormat::kJsonLines,
                                               InferenceFormat::kRecordIO};

TEST(InferenceRequest, AnEmptyBodyIsNoRecordsInEveryFormat) {
  for (InferenceFormat format : kRequestFormats) {
    SCOPED_TRACE(ContentTypeOf(format));
    Batch batch;
    const uint64_t index = 1;
    const float value = 1;
    batch.AddRow(0, &index, &value, 1);
    const Batch before = batch;
    DecodeRecords(format, "", Width(3), &batch);
    EXPECT_TRUE(SameBatch(batch, before));
  }
}

TEST(InferenceRequest, RowsAreAppendedAfterThoseOfAnEarlierRequest) {
  Batch batch;
  DecodeRecords(InferenceFormat::kCsv, "1,2\n", {}, &batch);
  DecodeRecords(InferenceFormat::kLibsvm, "5:3\n", {}, &batch);
  EXPECT_EQ(batch.row_offsets, (std::vector<uint64_t>{0, 2, 3}));
  EXPECT_EQ(batch.indices, (std::vector<uint64_t>{0, 1, 4}));
  EXPECT_EQ(batch.values, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 0}));
}

TEST(InferenceRequest, AnEmptyBatchGetsLabelWidthOne) {
  Batch batch;
  batch.label_width = 3;
  DecodeRecords(InferenceFormat::kCsv, "1\n", {}, &batch);
  EXPECT_EQ(batch.label_width, 1);
  EXPECT_EQ(batch.labels, (std::vector<float>{0}));
}

// ---------------------------------------------------------------------------
// Headers

TEST(InferenceContentType, EachCanonicalTypeParsesBackToItsFormat) {
  for (InferenceFormat format : kRequestFormats) {
    EXPECT_EQ(ParseContentType(ContentTypeOf(format)), format) << ContentTypeOf(format);
  }
}

TEST(InferenceContentType, IgnoresParametersAndCase) {
  EXPECT_EQ(ParseContentType("Text/CSV; charset=utf-8"), InferenceFormat::kCsv);
  EXPECT_EQ(ParseContentType(" APPLICATION/JSON ;charset=UTF-8"), InferenceFormat::kJson);
}

TEST(InferenceContentType, AcceptsTheAliasesOfLibsvmAndJsonLines) {
  EXPECT_EQ(ParseContentType("text/x-libsvm"), InferenceFormat::kLibsvm);
  EXPECT_EQ(ParseContentType("application/x-jsonlines"), InferenceFormat::kJsonLines);
  EXPECT_EQ(ParseContentType("application/jsonl"), InferenceFormat::kJsonLines);
}

TEST(InferenceContentType, AnUnknownTypeIs415NamingItAndTheSupportedTypes) {
  const Refusal refusal = RefusalOf([] { ParseContentType("application/xml"); });
  EXPECT_EQ(refusal.status, 415);
  EXPECT_TRUE(Contains(refusal.message,
                       "unsupported Content-Type 'application/xml': supported are text/csv, "
                       "text/libsvm, application/json, application/jsonlines, "
                       "application/x-recordio-protobuf"))
      << refusal.message;
}

TEST(InferenceContentType, AnEmptyTypeIs415) {
  const Refusal refusal = RefusalOf([] { ParseContentType(""); });
  EXPECT_EQ(refusal.status, 415);
  EXPECT_TRUE(Contains(refusal.message, "no Content-Type given: supported are text/csv"))
      << refusal.message;
}

TEST(InferenceAccept, EmptyOrAnyTypeGivesTheFallback) {
  for (const std::string accept : {"", "  ", "*/*", "application/*", "text/html, */*;q=0.1"}) {
    SCOPED_TRACE(accept);
    EXPECT_EQ(ParseAccept(accept, InferenceFormat::kJson), InferenceFormat::kJson);
    EXPECT_EQ(ParseAccept(accept, InferenceFormat::kCsv), InferenceFormat::kCsv);
  }
}

TEST(InferenceAccept, PrefersTheHighestQValueThenTheFirstListed) {
  EXPECT_EQ(ParseAccept("text/csv;q=0.5, application/jsonlines", InferenceFormat::kJson),
            InferenceFormat::kJsonLines);
  EXPECT_EQ(ParseAccept("application/json, text/csv", InferenceFormat::kCsv),
            InferenceFormat::kJson);
  EXPECT_EQ(
      ParseAccept("application/x-recordio-protobuf;q=0.9, text/csv;Q=0.2", InferenceFormat::kJson),
      InferenceFormat::kRecordIO);
}

TEST(InferenceAccept, AQValueAfterSpacesCounts) {
  // RFC 9110 allows whitespace around ';': "type; q=0.1" is the common spelling.
  EXPECT_EQ(ParseAccept("application/json; q=0.1, text/csv", InferenceFormat::kJson),
            InferenceFormat::kCsv);
}

TEST(InferenceAccept, QZeroExcludesAType) {
  EXPECT_EQ(ParseAccept("application/json;q=0, text/csv", InferenceFormat::kJson),
            InferenceFormat::kCsv);
}

TEST(InferenceAccept, SkipsUnsupportedTypesForASupportedOne) {
  EXPECT_EQ(ParseAccept("text/html, application/xml, Application/JSONLines", InferenceFormat::kCsv),
            InferenceFormat::kJsonLines);
}

TEST(InferenceAccept, OnlyUnsupportedTypesAre406NamingTheSupportedOnes) {
  const Refusal refusal =
      RefusalOf([] { ParseAccept("text/html, application/xml", InferenceFormat::kJson); });
  EXPECT_EQ(refusal.status, 406);
  EXPECT_TRUE(Contains(refusal.message,
                       "supported are application/json, application/jsonlines, "
                       "application/x-recordio-protobuf, text/csv"))
      << refusal.message;
}

TEST(InferenceAccept, LibsvmIsNotAResponseType) {
  EXPECT_EQ(RefusalOf([] { ParseAccept("text/libsvm", InferenceFormat::kJson); }).status, 406);
  EXPECT_EQ(ParseAccept("text/libsvm, application/json;q=0.5", InferenceFormat::kCsv),
            InferenceFormat::kJson);
}

TEST(InferenceFormatName, TakesShortNamesAndContentTypes) {
  EXPECT_EQ(ParseFormatName("csv"), InferenceFormat::kCsv);
  EXPECT_EQ(ParseFormatName("JSON"), InferenceFormat::kJson);
  EXPECT_EQ(ParseFormatName("jsonlines"), InferenceFormat::kJsonLines);
  EXPECT_EQ(ParseFormatName("recordio"), InferenceFormat::kRecordIO);
  EXPECT_EQ(ParseFormatName("libsvm"), InferenceFormat::kLibsvm);
  EXPECT_EQ(ParseFormatName("application/x-recordio-protobuf"), InferenceFormat::kRecordIO);
  EXPECT_TRUE(Contains(ErrorOf([] { ParseFormatName("xml"); }), "unknown format 'xml'"));
}

// ---------------------------------------------------------------------------
// Responses

Predictions Binary() {
  Predictions p;
  p.kind = Predictions::Kind::kBinary;
  p.scores = {0.25f, 0.875f};
  p.labels = {0, 1};
  return p;
}

Predictions Multiclass() {
  Predictions p;
  p.kind = Predictions::Kind::kMulticlass;
  p.width = 3;
  p.scores = {0.5f, 0.25f, 0.25f, 0.125f, 0.125f, 0.75f};
  p.labels = {0, 2};
  return p;
}

Predictions Regressor() {
  Predictions p;
  p.kind = Predictions::Kind::kRegressor;
  p.scores = {1.5f, -20.0f};
  p.labels = {0, 0};
  return p;
}

std::string Encoded(InferenceFormat format, const Predictions& predictions) {
  std::string out;
  EncodePredictions(format, predictions, &out);
  return out;
}

// The "predictions" of a JSON response body.
std::vector<JsonValue> JsonPredictions(const std::string& body) {
  const JsonValue document = ParseJson(body, "response");
  const JsonValue* predictions = document.Find("predictions");
  if (predictions == nullptr) throw Error("no \"predictions\" in " + body);
  return predictions->AsArray();
}

TEST(InferenceResponse, JsonOfABinaryClassifierHasScoreAndPredictedLabel) {
  const std::vector<JsonValue> predictions =
      JsonPredictions(Encoded(InferenceFormat::kJson, Binary()));
  ASSERT_EQ(predictions.size(), 2u);
  EXPECT_EQ(predictions[0].Find("score")->AsNumber(), 0.25);
  EXPECT_EQ(predictions[0].Find("predicted_label")->AsNumber(), 0);
  EXPECT_EQ(predictions[1].Find("score")->AsNumber(), 0.875);
  EXPECT_EQ(predictions[1].Find("predicted_label")->AsNumber(), 1);
}

TEST(InferenceResponse, AWriterOfManyBatchesWritesOneJsonDocument) {
  std::ostringstream out;
  PredictionWriter writer(InferenceFormat::kJson, &out);
  writer.Write(Binary());
  writer.Write(Binary());
  writer.Finish();
  const std::vector<JsonValue> predictions = JsonPredictions(out.str());
  ASSERT_EQ(predictions.size(), 4u);
  EXPECT_EQ(predictions[3].Find("score")->AsNumber(), 0.875);
}

TEST(InferenceResponse, AWriterWritesWhatEncodingEachBatchWouldInTheLineFormats) {
  for (const InferenceFormat format :
       {InferenceFormat::kCsv, InferenceFormat::kJsonLines, InferenceFormat::kRecordIO}) {
    std::ostringstream out;
    PredictionWriter writer(format, &out);
    writer.Write(Multiclass());
    writer.Write(Regressor());
    writer.Finish();
    EXPECT_EQ(out.str(), Encoded(format, Multiclass()) + Encoded(format, Regressor()));
  }
}

TEST(InferenceResponse, JsonOfAMulticlassClassifierHasAScoreArray) {
  const std::vector<JsonValue> predictions =
      JsonPredictions(Encoded(InferenceFormat::kJson, Multiclass()));
  ASSERT_EQ(predictions.size(), 2u);
  const std::vector<JsonValue>& scores = predictions[1].Find("score")->AsArray();
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_EQ(scores[0].AsNumber(), 0.125);
  EXPECT_EQ(scores[1].AsNumber(), 0.125);
  EXPECT_EQ(scores[2].AsNumber(), 0.75);
  EXPECT_EQ(predictions[1].Find("predicted_label")->AsNumber(), 2);
  EXPECT_EQ(predictions[0].Find("predicted_label")->AsNumber(), 0);
}

TEST(InferenceResponse, JsonOfARegressorHasNoPredictedLabel) {
  const std::vector<JsonValue> predictions =
      JsonPredictions(Encoded(InferenceFormat::kJson, Regressor()));
  ASSERT_EQ(predictions.size(), 2u);
  EXPECT_EQ(predictions[1].Find("score")->AsNumber(), -20);
  EXPECT_EQ(predictions[1].Find("predicted_label"), nullptr);
}

TEST(InferenceResponse, JsonOfNoRecordsIsAnEmptyArray) {
  EXPECT_TRUE(JsonPredictions(Encoded(InferenceFormat::kJson, Predictions())).empty());
}

TEST(InferenceResponse, JsonStaysJsonWhenAScoreIsNotFinite) {
  // Finite features can overflow a regressor's score: 3e38 x 2 is inf, and
  // 3e38 x 2 + 3e38 x -2 NaN.
  Predictions p = Regressor();
  p.scores = {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (InferenceFormat format : {InferenceFormat::kJson, InferenceFormat::kJsonLines}) {
    std::string body = Encoded(format, p);
    if (format == InferenceFormat::kJsonLines) body = body.substr(0, body.find('\n'));
    EXPECT_EQ(ErrorOf([&] { ParseJson(body, "response"); }), "no error") << body;
  }
}

TEST(InferenceResponse, ScoresHaveSevenSignificantDigits) {
  Predictions p = Regressor();
  p.scores = {0.123456789f, 123456789.0f};
  EXPECT_EQ(Encoded(InferenceFormat::kCsv, p), "0.1234568\n1.234568e+08\n");
}

TEST(InferenceResponse, ScoresAreWrittenAsPrintfsSevenDigitGeneralFormat) {
  // The text of "%.7g" for floats of every exponent and sign (denormals,
  // the largest float, non-finite ones: CSV writes a regressor's overflow
  // as it comes), whatever formats them.
  std::mt19937 random(9);
  Predictions p = Regressor();
  p.scores = {0.0f, -0.0f, 1e-45f, std::numeric_limits<float>::max(), 1e7f, 9999999.0f,
              0.0001f, 0.00001f, std::numeric_limits<float>::infinity(),
              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
              -std::numeric_limits<float>::quiet_NaN()};
  while (p.scores.size() < 20000) {
    const uint32_t bits = random();
    float score;
    std::memcpy(&score, &bits, sizeof(score));
    p.scores.push_back(score);
  }
  p.labels.assign(p.scores.size(), 0);
  std::string expected;
  for (const float score : p.scores) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.7g\n", static_cast<double>(score));
    expected += text;
  }
  EXPECT_EQ(Encoded(InferenceFormat::kCsv, p), expected);
}

TEST(InferenceResponse, JsonLinesHaveAPredictionPerLine) {
  const std::string body = Encoded(InferenceFormat::kJsonLines, Multiclass());
  EXPECT_EQ(body,
            "{\"score\":[0.5,0.25,0.25],\"predicted_label\":0}\n"
            "{\"score\":[0.125,0.125,0.75],\"predicted_label\":2}\n");
  EXPECT_EQ(Encoded(InferenceFormat::kJsonLines, Regressor()),
            "{\"score\":1.5}\n{\"score\":-20}\n");
}

TEST(InferenceResponse, CsvIsLabelThenScoresPerLine) {
  EXPECT_EQ(Encoded(InferenceFormat::kCsv, Binary()), "0,0.25\n1,0.875\n");
  EXPECT_EQ(Encoded(InferenceFormat::kCsv, Multiclass()), "0,0.5,0.25,0.25\n2,0.125,0.125,0.75\n");
  EXPECT_EQ(Encoded(InferenceFormat::kCsv, Regressor()), "1.5\n-20\n");
}

TEST(InferenceResponse, AppendsToWhatTheOutputHolds) {
  std::string out = "before;";
  EncodePredictions(InferenceFormat::kCsv, Regressor(), &out);
  EXPECT_EQ(out, "before;1.5\n-20\n");
}

TEST(InferenceResponse, LibsvmIsNotAResponseFormat) {
  EXPECT_TRUE(Contains(ErrorOf([] { Encoded(InferenceFormat::kLibsvm, Binary()); }),
                       "text/libsvm is a request format"));
}

class InferenceRecordIOResponse : public testing::TempFolderTest {
 protected:
  // The Records of a recordIO response body, read back by RecordIOReader.
  std::vector<aialgs::data::Record> Records(const std::string& body) {
    const std::string path = WriteFile("response.rec", body);
    RecordIOReader reader(InputSplit{path});
    std::vector<aialgs::data::Record> records;
    std::string_view payload;
    while (reader.ReadRecord(&payload)) {
      records.emplace_back();
      if (!records.back().ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
        throw Error("a payload is not a Record");
      }
    }
    return records;
  }

  static std::vector<float> Label(const aialgs::data::Record& record, const std::string& name) {
    const auto found = record.label().find(name);
    if (found == record.label().end()) return {};
    const auto& values = found->second.float32_tensor().values();
    return {values.begin(), values.end()};
  }
};

TEST_F(InferenceRecordIOResponse, ABinaryClassifiersRecordsHoldScoreAndPredictedLabel) {
  const std::vector<aialgs::data::Record> records =
      Records(Encoded(InferenceFormat::kRecordIO, Binary()));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(Label(records[0], "score"), (std::vector<float>{0.25f}));
  EXPECT_EQ(Label(records[0], "predicted_label"), (std::vector<float>{0}));
  EXPECT_EQ(Label(records[1], "score"), (std::vector<float>{0.875f}));
  EXPECT_EQ(Label(records[1], "predicted_label"), (std::vector<float>{1}));
}

TEST_F(InferenceRecordIOResponse, AMulticlassClassifiersScoreHoldsEveryClass) {
  const std::vector<aialgs::data::Record> records =
      Records(Encoded(InferenceFormat::kRecordIO, Multiclass()));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(Label(records[1], "score"), (std::vector<float>{0.125f, 0.125f, 0.75f}));
  EXPECT_EQ(Label(records[1], "predicted_label"), (std::vector<float>{2}));
}

TEST_F(InferenceRecordIOResponse, ARegressorsRecordsHaveNoPredictedLabel) {
  const std::vector<aialgs::data::Record> records =
      Records(Encoded(InferenceFormat::kRecordIO, Regressor()));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(Label(records[1], "score"), (std::vector<float>{-20}));
  EXPECT_EQ(records[1].label().count("predicted_label"), 0u);
}

// ---------------------------------------------------------------------------
// Scorer

// A linear learner binary classifier over features 1 and 4.
ModelArtifact BinaryModel(double threshold) {
  ModelArtifact model;
  model.hyperparameters.job = JobKind::kLinearLearner;
  model.hyperparameters.predictor_type = PredictorType::kBinaryClassifier;
  model.hyperparameters.threshold = threshold;
  model.features = {1, 4};
  model.weights = {0.5f, -2};
  model.bias = {0.25f};
  return model;
}

Batch Rows(const std::vector<std::vector<std::pair<uint64_t, float>>>& rows) {
  Batch batch;
  for (const auto& row : rows) {
    std::vector<uint64_t> indices;
    std::vector<float> values;
    for (const auto& [index, value] : row) {
      indices.push_back(index);
      values.push_back(value);
    }
    batch.AddRow(0, indices.data(), values.data(), indices.size());
  }
  return batch;
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Scorer, ABinaryClassifierScoresTheSigmoidOfItsLinearForm) {
  const ModelArtifact model = BinaryModel(0.7);
  const Scorer scorer(model, model.hyperparameters);
  Predictions predictions;
  scorer.Score(Rows({{{1, 2}}, {{4, 1}}, {{1, 1}, {4, 0.5f}}}), &predictions);
  EXPECT_EQ(predictions.kind, Predictions::Kind::kBinary);
  EXPECT_EQ(predictions.width, 1);
  ASSERT_EQ(predictions.records(), 3u);
  EXPECT_NEAR(predictions.scores[0], Sigmoid(0.5 * 2 + 0.25), 1e-6);
  EXPECT_NEAR(predictions.scores[1], Sigmoid(-2 + 0.25), 1e-6);
  EXPECT_NEAR(predictions.scores[2], Sigmoid(0.5 - 1 + 0.25), 1e-6);
}

TEST(Scorer, PredictsPositiveFromTheModelsThreshold) {
  // Scores 0.78, 0.68 and 0.15: only the first reaches 0.7; 0.5 takes two.
  const Batch batch = Rows({{{1, 2}}, {{1, 1}}, {{4, 1}}});
  Predictions predictions;
  const ModelArtifact strict = BinaryModel(0.7);
  Scorer(strict, strict.hyperparameters).Score(batch, &predictions);
  EXPECT_EQ(predictions.labels, (std::vector<int>{1, 0, 0}));
  const ModelArtifact lenient = BinaryModel(0.5);
  Scorer(lenient, lenient.hyperparameters).Score(batch, &predictions);
  EXPECT_EQ(predictions.labels, (std::vector<int>{1, 1, 0}));
}

TEST(Scorer, AFeatureTheModelHasNotSeenWeighsZeroAndIsCounted) {
  const ModelArtifact model = BinaryModel(0.5);
  const Scorer scorer(model, model.hyperparameters);
  Predictions predictions;
  uint64_t unseen = 5;
  scorer.Score(Rows({{{1, 2}, {9, 100}}, {{7, -3}}}), &predictions, &unseen);
  EXPECT_NEAR(predictions.scores[0], Sigmoid(0.5 * 2 + 0.25), 1e-6);
  EXPECT_NEAR(predictions.scores[1], Sigmoid(0.25), 1e-6);
  EXPECT_EQ(unseen, 5u + 2);
}

TEST(Scorer, UnseenCountsEveryOccurrenceOfAnUnseenFeature) {
  // The header: "increased by the feature occurrences the model has not seen".
  const ModelArtifact model = BinaryModel(0.5);
  const Scorer scorer(model, model.hyperparameters);
  Predictions predictions;
  uint64_t unseen = 0;
  scorer.Score(Rows({{{9, 1}}, {{9, 2}}, {{1, 1}, {9, 3}}}), &predictions, &unseen);
  EXPECT_EQ(unseen, 3u);
}

TEST(Scorer, AMulticlassClassifierPredictsTheMostProbableClass) {
  ModelArtifact model;
  model.hyperparameters.predictor_type = PredictorType::kMulticlassClassifier;
  model.hyperparameters.num_classes = 3;
  model.features = {0};
  model.weights = {1, 3, 2};
  model.bias = {0, 0, 0};
  const Scorer scorer(model, model.hyperparameters);
  Predictions predictions;
  scorer.Score(Rows({{{0, 1}}, {{0, -1}}}), &predictions);
  EXPECT_EQ(predictions.kind, Predictions::Kind::kMulticlass);
  EXPECT_EQ(predictions.width, 3);
  ASSERT_EQ(predictions.scores.size(), 6u);
  EXPECT_NEAR(predictions.scores[0] + predictions.scores[1] + predictions.scores[2], 1, 1e-6);
  EXPECT_EQ(predictions.labels, (std::vector<int>{1, 0}));
}

TEST(Scorer, ARegressorScoresItsLinearForm) {
  ModelArtifact model;
  model.hyperparameters.predictor_type = PredictorType::kRegressor;
  model.features = {0};
  model.weights = {2};
  model.bias = {1};
  const Scorer scorer(model, model.hyperparameters);
  Predictions predictions;
  scorer.Score(Rows({{{0, 3}}}), &predictions);
  EXPECT_EQ(predictions.kind, Predictions::Kind::kRegressor);
  ASSERT_EQ(predictions.scores.size(), 1u);
  EXPECT_NEAR(predictions.scores[0], 7, 1e-6);
}

TEST(Scorer, InputWidthIsTheFeatureDimWhenTheJobHadOne) {
  ModelArtifact model = BinaryModel(0.5);
  model.hyperparameters.feature_dim = 10;
  EXPECT_EQ(Scorer(model, model.hyperparameters).input().input_dim, 10u);
}

TEST(Scorer, InputWidthOfACsvModelIsItsLargestFeaturePlusOne) {
  ModelArtifact model = BinaryModel(0.5);
  model.data_format = DataFormat::kCsv;
  model.features = {0, 1, 2, 3, 4};
  model.weights = {1, 1, 1, 1, 1};
  EXPECT_EQ(Scorer(model, model.hyperparameters).input().input_dim, 5u);
}

TEST(Scorer, ALibsvmModelWithoutFeatureDimHasNoInputWidthAndKeepsItsIndexing) {
  ModelArtifact model = BinaryModel(0.5);
  model.data_format = DataFormat::kLibsvm;
  model.libsvm_zero_based = true;
  const Scorer scorer(model, model.hyperparameters);
  EXPECT_EQ(scorer.input().input_dim, 0u);
  EXPECT_TRUE(scorer.input().libsvm_zero_based);
}

TEST(Scorer, ScoresFromSeveralThreadsAtOnceEqualThoseFromOne) {
  const ModelArtifact model = BinaryModel(0.5);
  const Scorer scorer(model, model.hyperparameters);
  std::vector<std::vector<std::pair<uint64_t, float>>> rows;
  for (int r = 0; r < 300; ++r) {
    rows.push_back({{1, 0.01f * static_cast<float>(r)},
                    {4, 1.0f - 0.003f * static_cast<float>(r)},
                    {static_cast<uint64_t>(100 + r), 1}});
  }
  const Batch batch = Rows(rows);
  Predictions alone;
  uint64_t alone_unseen = 0;
  scorer.Score(batch, &alone, &alone_unseen);

  constexpr int kThreads = 4, kCalls = 25;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int call = 0; call < kCalls; ++call) {
        Predictions predictions;
        uint64_t unseen = 0;
        scorer.Score(batch, &predictions, &unseen);
        if (predictions.scores != alone.scores || predictions.labels != alone.labels ||
            unseen != alone_unseen) {
          ++mismatches[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(kThreads, 0));
}

}  // namespace
}  // namespace keel
