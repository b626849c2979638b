// The JSON writer of src/base/json.h: numbers in a given format, objects and
// arrays.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "base/json.h"

namespace keel {
namespace {

// printf's text of `value` with `format` (one conversion of a double).
std::string Printf(const char* format, double value) {
  char text[512];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// Numbers of every kind: zeros, integers, fractions, halves (rounding), and
// exponents small and large.
const double kSamples[] = {0,        -0.0,    1,        -1,        0.1,   2.0 / 3,
                           123456.5, 1234567, 1e-7,     -2.5e-12,  1e21,  6.02214076e23,
                           0.1f,     1 / 3e9, 999999.5, 9.9999995, 0.125, 12345678901234567.0};

TEST(JsonWriter, AppendJsonQuotedAppendsWhatJsonQuoteReturns) {
  std::string out = "x=";
  AppendJsonQuoted("a\"b\\c\n", &out);
  EXPECT_EQ(out, R"(x="a\"b\\c\u000a")");
  EXPECT_EQ(JsonQuote("a\"b\\c\n"), R"("a\"b\\c\u000a")");
}

TEST(JsonWriter, NumberOrNullWritesPrintfsSignificantDigits) {
  for (double value : kSamples) {
    EXPECT_EQ(JsonNumberOrNull(value), Printf("%.9g", value)) << value;
    EXPECT_EQ(JsonNumberOrNull(value, 6), Printf("%.6g", value)) << value;
    EXPECT_EQ(JsonNumberOrNull(value, 7), Printf("%.7g", value)) << value;
    EXPECT_EQ(JsonNumberOrNull(value, 17), Printf("%.17g", value)) << value;
  }
  EXPECT_EQ(JsonNumberOrNull(2.0 / 3, 6), "0.666667");
  EXPECT_EQ(JsonNumberOrNull(NAN, 6), "null");
  EXPECT_EQ(JsonNumberOrNull(-INFINITY, 17), "null");
}

TEST(JsonWriter, NumbersAgreeWithPrintfForDoublesOfEveryExponent) {
  std::mt19937_64 random(7);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t bits = random();
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    if (!std::isfinite(value)) continue;
    for (int digits : {6, 7, 9, 17}) {
      const std::string format = "%." + std::to_string(digits) + "g";
      ASSERT_EQ(JsonNumberOrNull(value, digits), Printf(format.c_str(), value)) << digits;
    }
    int exponent = 0;  // the moderate value keeps the mantissa, with an exponent in [-40, 40)
    const double moderate =
        std::ldexp(std::frexp(value, &exponent), static_cast<int>(bits % 80) - 40);
    for (int decimals : {0, 1, 3, 4, 6}) {
      const std::string format = "%." + std::to_string(decimals) + "f";
      ASSERT_EQ(JsonFixedOrNull(moderate, decimals), Printf(format.c_str(), moderate)) << decimals;
    }
  }
}

TEST(JsonWriter, FixedOrNullWritesPrintfsDecimals) {
  for (double value : kSamples) {
    EXPECT_EQ(JsonFixedOrNull(value, 0), Printf("%.0f", value)) << value;
    EXPECT_EQ(JsonFixedOrNull(value, 2), Printf("%.2f", value)) << value;
    EXPECT_EQ(JsonFixedOrNull(value, 6), Printf("%.6f", value)) << value;
  }
  EXPECT_EQ(JsonFixedOrNull(2.0 / 3, 4), "0.6667");
  EXPECT_EQ(JsonFixedOrNull(-1.7976931348623157e308, 1), Printf("%.1f", -1.7976931348623157e308));
  EXPECT_EQ(JsonFixedOrNull(INFINITY, 2), "null");
}

TEST(JsonWriter, ShortestReadsBackAsTheSameValueInItsType) {
  EXPECT_EQ(JsonShortestOrNull(0.01f), "0.01");
  EXPECT_EQ(JsonShortestOrNull(static_cast<double>(0.01f)), "0.009999999776482582");
  EXPECT_EQ(JsonShortestOrNull(0.1), "0.1");
  EXPECT_EQ(JsonShortestOrNull(1e-7), "1e-07");
  EXPECT_EQ(JsonShortestOrNull(NAN), "null");
  EXPECT_EQ(JsonShortestOrNull(INFINITY), "null");
}

TEST(JsonWriter, ObjectMembersWriteEachNumberInItsFormat) {
  EXPECT_EQ(JsonObject(JsonObject::Style::kCompact)
                .Number("g", 2.0 / 3)
                .Number("g6", 2.0 / 3, 6)
                .Fixed("f2", 2.0 / 3, 2)
                .Shortest("float", 0.01f)
                .Integer("negative", -3)
                .Count("count", 18446744073709551615ull)
                .Fixed("nan", NAN, 2)
                .Close(),
            R"({"g":0.666666667,"g6":0.666667,"f2":0.67,"float":0.01,"negative":-3,)"
            R"("count":18446744073709551615,"nan":null})");
}

TEST(JsonWriter, ArrayJoinsElementsAsAnObjectSeparatesMembers) {
  EXPECT_EQ(JsonArray({"1", "[2]", "{}"}), "[1, [2], {}]");
  EXPECT_EQ(JsonArray({"1", "[2]", "{}"}, JsonObject::Style::kCompact), "[1,[2],{}]");
  EXPECT_EQ(JsonArray({}), "[]");
  EXPECT_EQ(JsonArray({"\"a\""}, JsonObject::Style::kCompact), "[\"a\"]");
}

}  // namespace
}  // namespace keel
