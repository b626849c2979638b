// Error texts made valid UTF-8 before they go into a proto3 string field.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

#include "kv/message.h"

namespace keel {
namespace {

TEST(ValidUtf8, LeavesValidTextAsItIs) {
  const std::string text = "data.libsvm:3: feature 'é€𝄞' is not an integer";
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(ValidUtf8(text), text);
}

TEST(ValidUtf8, WritesEachInvalidByteAsAnEscape) {
  EXPECT_EQ(ValidUtf8("a\xFF\xFE:b"), "a\\xFF\\xFE:b");
}

TEST(ValidUtf8, EscapesATruncatedSequenceButKeepsTheNextCharacter) {
  // 0xE2 0x82 starts a three-byte character (U+20AC is E2 82 AC) cut short.
  EXPECT_EQ(ValidUtf8("\xE2\x82x"), "\\xE2\\x82x");
}

TEST(ValidUtf8, RefusesOverlongFormsSurrogatesAndCodePointsAboveTheLast) {
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // '/' in two bytes
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // '/' in three bytes
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800, a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");
}

TEST(ValidUtf8, KeepsTheEdgesOfTheValidRanges) {
  EXPECT_TRUE(IsValidUtf8("\x7F\xC2\x80\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF"));
}

TEST(ValidUtf8, AReportOfBinaryJunkSurvivesTheWire) {
  Message report;
  report.meta.set_command(proto::WORKER_DONE);
  report.meta.set_error(ValidUtf8("train.libsvm:2: missing label: feature '\xFF\xFE:\x80'"));
  const Message received = Decode(Encode(report));
  EXPECT_EQ(received.meta.error(), "train.libsvm:2: missing label: feature '\\xFF\\xFE:\\x80'");
}

TEST(AppendUtf8, WritesEachLengthOfSequence) {
  std::string out;
  for (uint32_t code : {0x24u, 0xA2u, 0x20ACu, 0x10348u, 0x10FFFFu}) AppendUtf8(code, &out);
  EXPECT_EQ(out, "$\xC2\xA2\xE2\x82\xAC\xF0\x90\x8D\x88\xF4\x8F\xBF\xBF");
  EXPECT_TRUE(IsValidUtf8(out));
}

}  // namespace
}  // namespace keel
