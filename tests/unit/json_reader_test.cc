// ParseJson: the strict JSON reader of src/base/json_reader.h.
#include "base/json_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace keel {
namespace {

// The message ParseJson throws for `text`, or "" if it parses.
std::string ErrorFor(const std::string& text) {
  try {
    ParseJson(text, "dir/model.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonReader, ReadsEveryKindOfValue) {
  const JsonValue doc = ParseJson(
      R"( {"n": -12.5e1, "t": true, "f": false, "z": null, "s": "a\"b", "a": [1, [], {}]} )",
      "doc");
  EXPECT_EQ(doc.Find("n")->AsNumber(), -125.0);
  EXPECT_TRUE(doc.Find("t")->AsBool());
  EXPECT_FALSE(doc.Find("f")->AsBool());
  EXPECT_EQ(doc.Find("z")->type(), JsonValue::Type::kNull);
  EXPECT_EQ(doc.Find("s")->AsString(), "a\"b");
  ASSERT_EQ(doc.Find("a")->AsArray().size(), 3u);
  EXPECT_EQ(doc.Find("a")->AsArray()[0].AsNumber(), 1.0);
  EXPECT_TRUE(doc.Find("a")->AsArray()[1].AsArray().empty());
  EXPECT_TRUE(doc.Find("a")->AsArray()[2].AsObject().empty());
  EXPECT_EQ(doc.Find("missing"), nullptr);
}

TEST(JsonReader, KeepsMembersInDocumentOrder) {
  const JsonValue doc = ParseJson(R"({"b":1,"a":2})", "doc");
  ASSERT_EQ(doc.AsObject().size(), 2u);
  EXPECT_EQ(doc.AsObject()[0].first, "b");
  EXPECT_EQ(doc.AsObject()[1].first, "a");
}

TEST(JsonReader, DecodesEscapesToUtf8) {
  // é is U+00E9 (C3 A9); the pair D83D DE00 is U+1F600 (F0 9F 98 80).
  const JsonValue doc = ParseJson(R"("\n\t\/\\\u00e9\ud83d\ude00")", "doc");
  EXPECT_EQ(doc.AsString(), "\n\t/\\\xC3\xA9\xF0\x9F\x98\x80");
}

TEST(JsonReader, RecordsEachValuesOffset) {
  const JsonValue doc = ParseJson(R"({"a": [7]})", "doc");
  EXPECT_EQ(doc.offset(), 0u);
  EXPECT_EQ(doc.Find("a")->offset(), 6u);
  EXPECT_EQ(doc.Find("a")->AsArray()[0].offset(), 7u);
  EXPECT_EQ(doc.Find("a")->end(), 9u);  // [7] is bytes 6 to 8
  EXPECT_EQ(doc.end(), 10u);
}

TEST(JsonReader, ErrorsNameTheDocumentAndTheByteOffset) {
  EXPECT_EQ(ErrorFor(R"({"a" 1})"), "dir/model.json: byte 5: expected ':' but found '1'");
  EXPECT_EQ(ErrorFor(R"({"a":1,})"),
            "dir/model.json: byte 7: expected a member name in double quotes");
  EXPECT_EQ(ErrorFor("[1, 2"), "dir/model.json: byte 5: expected ']' but the document ends");
}

TEST(JsonReader, RefusesWhatStrictJsonDoesNotAllow) {
  for (const char* bad : {"",
                          "  ",
                          "{} {}",
                          "[1,]",
                          "01",
                          "1.",
                          "-",
                          ".5",
                          "1e",
                          "+1",
                          "'a'",
                          "tru",
                          "nul",
                          "\"a",
                          "\"\\x\"",
                          "\"\\u12\"",
                          "\"\\udc00\"",
                          "\"\\ud800\"",
                          "\"a\tb\"",
                          "{\"a\":1,\"a\":2}",
                          "[1 2]",
                          "{1:2}",
                          "// comment\n{}",
                          "NaN",
                          "Infinity"}) {
    EXPECT_NE(ErrorFor(bad), "") << "accepted: " << bad;
  }
}

TEST(JsonReader, NamesADuplicateMemberAtItsSecondOccurrence) {
  EXPECT_EQ(ErrorFor(R"({"a":1,"a":2})"), "dir/model.json: byte 7: member \"a\" appears twice");
}

TEST(JsonReader, RefusesDeepNestingInsteadOfOverflowingTheStack) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(ErrorFor(deep).find("nested more than"), std::string::npos);
  EXPECT_EQ(ErrorFor(std::string(200, '[') + std::string(200, ']')), "");
}

TEST(JsonReader, ReadsA64BitIntegerExactly) {
  // 2^64 - 1 and 2^53 + 1, which a double cannot hold.
  EXPECT_EQ(ParseJson("18446744073709551615", "doc").AsUint64(), 18446744073709551615u);
  EXPECT_EQ(ParseJson("9007199254740993", "doc").AsUint64(), 9007199254740993u);
  for (const char* not_one : {"18446744073709551616", "-1", "1.5", "1e3", "\"7\""}) {
    EXPECT_THROW(ParseJson(not_one, "doc").AsUint64(), Error) << not_one;
  }
}

TEST(JsonReader, AValueOfTheWrongTypeNamesItsOffsetAndBothTypes) {
  const JsonValue doc = ParseJson(R"({"a": "x"})", "doc");
  try {
    doc.Find("a")->AsNumber();
    FAIL() << "a string was read as a number";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "JSON value at byte 6 is a string, not a number");
  }
}

}  // namespace
}  // namespace keel
