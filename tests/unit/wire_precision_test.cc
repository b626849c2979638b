// The 16-bit wire forms (kv/wire_precision.h): rounding, saturation, NaN and
// infinities, subnormals, and frames checked against their declared size.
#include "kv/wire_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "kv/message.h"

namespace keel {
namespace {

// The float whose IEEE bits are `bits`.
float FloatOf(uint32_t bits) {
  float value;
  return *static_cast<float*>(std::memcpy(&value, &bits, sizeof(value)));
}
constexpr float kInfinity = std::numeric_limits<float>::infinity();

TEST(WirePrecisionTest, NamesParseAndUnknownNamesAreRefused) {
  for (auto precision : {proto::WIRE_FP32, proto::WIRE_BF16, proto::WIRE_FP16}) {
    EXPECT_EQ(ParseWirePrecision(WirePrecisionName(precision)), precision);
  }
  EXPECT_EQ(BytesPerValue(proto::WIRE_FP32), 4u);
  EXPECT_EQ(BytesPerValue(proto::WIRE_BF16), 2u);
  EXPECT_EQ(BytesPerValue(proto::WIRE_FP16), 2u);
  EXPECT_THROW(ParseWirePrecision("fp8"), Error);
  EXPECT_THROW(BytesPerValue(static_cast<proto::WirePrecision>(7)), Error);
}

TEST(WirePrecisionTest, Bf16RoundsToNearestTiesToEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even (1).
  EXPECT_EQ(FloatToBf16(FloatOf(0x3f808000)), 0x3f80);
  // 1 + 3 x 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(FloatToBf16(FloatOf(0x3f818000)), 0x3f82);
  // Just above halfway: up.
  EXPECT_EQ(FloatToBf16(FloatOf(0x3f808001)), 0x3f81);
  // A carry out of the significand moves into the exponent.
  EXPECT_EQ(FloatToBf16(FloatOf(0x3fffffff)), 0x4000);
  EXPECT_EQ(Bf16ToFloat(0x3f81), FloatOf(0x3f810000));
}

TEST(WirePrecisionTest, Bf16KeepsInfinitiesAndNanAndSaturatesFiniteOverflow) {
  EXPECT_EQ(FloatToBf16(kInfinity), 0x7f80);
  EXPECT_EQ(FloatToBf16(-kInfinity), 0xff80);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  // A NaN whose payload lies in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FloatOf(0x7f800001)))));
  // The largest float rounds past bfloat16's largest finite: saturated.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f7f);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::max()), 0xff7f);
  EXPECT_TRUE(std::isfinite(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::max()))));
}

TEST(WirePrecisionTest, Bf16KeepsSubnormalsAndSignedZero) {
  const float smallest = std::numeric_limits<float>::denorm_min();
  // 2^-149 is below bfloat16's smallest subnormal (2^-133) by far: zero.
  EXPECT_EQ(FloatToBf16(smallest), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  // bfloat16's smallest subnormal, 2^-133, survives the round trip.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(FloatOf(0x00010000))), FloatOf(0x00010000));
  // The largest float32 subnormal rounds up to the smallest normal.
  EXPECT_EQ(FloatToBf16(FloatOf(0x007fffff)), 0x0080);
}

TEST(WirePrecisionTest, Fp16RoundsToNearestTiesToEven) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFp16(0.5f), 0x3800);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 x 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(Fp16ToFloat(0x3c01), 1.0f + std::ldexp(1.0f, -10));
  // Every half widens and narrows back to itself (but NaNs, checked below).
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float wide = Fp16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(wide)) continue;
    ASSERT_EQ(FloatToFp16(wide), bits) << "half 0x" << std::hex << bits;
  }
}

TEST(WirePrecisionTest, Fp16SaturatesFiniteOverflowAndKeepsInfinitiesAndNan) {
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);
  // Between 65504 and the midpoint to the next step: rounds down to 65504.
  EXPECT_EQ(FloatToFp16(65519.0f), 0x7bff);
  // At and past the midpoint IEEE rounding would give infinity: saturated.
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(1e30f), 0x7bff);
  EXPECT_EQ(FloatToFp16(-1e30f), 0xfbff);
  EXPECT_EQ(FloatToFp16(kInfinity), 0x7c00);
  EXPECT_EQ(FloatToFp16(-kInfinity), 0xfc00);
  EXPECT_EQ(Fp16ToFloat(0x7c00), kInfinity);
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(FloatOf(0x7f800001)))));
  // A signalling NaN half widens to a quiet NaN, its payload kept.
  const float widened = Fp16ToFloat(0xfc01);
  uint32_t bits;
  std::memcpy(&bits, &widened, sizeof(bits));
  EXPECT_EQ(bits, 0xffc02000u);
}

TEST(WirePrecisionTest, Fp16SubnormalsRoundAndUnderflowToSignedZero) {
  const float smallest = std::ldexp(1.0f, -24);  // the smallest subnormal half
  EXPECT_EQ(FloatToFp16(smallest), 0x0001);
  EXPECT_EQ(Fp16ToFloat(0x0001), smallest);
  EXPECT_EQ(Fp16ToFloat(0x8001), -smallest);
  // Half of it is a tie between 0 and 0x0001: to even (zero), sign kept.
  EXPECT_EQ(FloatToFp16(smallest / 2), 0x0000);
  EXPECT_EQ(FloatToFp16(-smallest / 2), 0x8000);
  // Just above half: up to the smallest subnormal.
  EXPECT_EQ(FloatToFp16(std::nextafter(smallest / 2, 1.0f)), 0x0001);
  // 1.5 x 2^-24: a tie between 1 and 2 units, to even (2).
  EXPECT_EQ(FloatToFp16(1.5f * smallest), 0x0002);
  // The largest subnormal half and the carry into the smallest normal.
  EXPECT_EQ(FloatToFp16(1023 * smallest), 0x03ff);
  EXPECT_EQ(FloatToFp16(1023.75f * smallest), 0x0400);
  EXPECT_EQ(Fp16ToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(WirePrecisionTest, NarrowAndWidenRoundTripAFrame) {
  auto values = SharedArray<float>::Allocate(4);
  values[0] = 1.0f;
  values[1] = -0.333333f;
  values[2] = 1e-3f;
  values[3] = 70000.0f;
  const SharedArray<const float> input = values;
  for (auto precision : {proto::WIRE_BF16, proto::WIRE_FP16}) {
    const Bytes frame = NarrowValues(input, precision);
    ASSERT_EQ(frame.size(), 8u);
    const SharedArray<const float> wide = WidenValues(frame, 4, precision, "test frame");
    ASSERT_EQ(wide.size(), 4u);
    EXPECT_EQ(wide[0], 1.0f);
    EXPECT_NEAR(wide[1], -0.333333f, precision == proto::WIRE_BF16 ? 2e-3 : 2e-4);
    EXPECT_NEAR(wide[2], 1e-3f, precision == proto::WIRE_BF16 ? 1e-5 : 1e-6);
    EXPECT_EQ(wide[3], precision == proto::WIRE_BF16 ? 70144.0f : 65504.0f);
  }
  // float32: the values themselves, not a copy.
  const Bytes same = NarrowValues(input, proto::WIRE_FP32);
  EXPECT_EQ(same.data(), reinterpret_cast<const char*>(input.data()));
  EXPECT_EQ(WidenValues(same, 4, proto::WIRE_FP32, "test frame").data(), input.data());
}

// The bits of frames converted eight at a time against the functions of one
// value: every half and bfloat16 widened, and narrowed values of every kind
// (random bits, each class of special value and the boundaries of rounding,
// saturation and underflow) in frames of every length up to 40, so that
// eights of values and the values after them are both converted.
TEST(WirePrecisionTest, FramesConvertedEightAtATimeGiveTheBitsOfOneAtATime) {
  if (!WideWireConversionAvailable()) {
    GTEST_SKIP() << "this CPU has no AVX2 and F16C: frames convert one value at a time alone";
  }
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(halves.size());
  for (auto precision : {proto::WIRE_BF16, proto::WIRE_FP16}) {
    WidenInto(reinterpret_cast<const char*>(halves.data()), halves.size(), precision, wide.data());
    for (size_t i = 0; i < halves.size(); ++i) {
      const float one =
          precision == proto::WIRE_BF16 ? Bf16ToFloat(halves[i]) : Fp16ToFloat(halves[i]);
      ASSERT_EQ(std::memcmp(&one, &wide[i], sizeof(float)), 0)
          << WirePrecisionName(precision) << " " << std::hex << halves[i];
    }
  }
  // Frames of every length up to 40 (eights and the values after them), at
  // every class of half: from NaNs (0x7e00-) down through infinities,
  // normal, subnormal and zero halves.
  for (size_t length = 0; length <= 40; ++length) {
    for (size_t start :
         {size_t{0x7bf0}, size_t{0x7c00 - 20}, size_t{0x03f0}, size_t{0xfff0 - 40}}) {
      std::vector<float> out(length + 1, -1.0f);
      for (auto precision : {proto::WIRE_BF16, proto::WIRE_FP16}) {
        WidenInto(reinterpret_cast<const char*>(halves.data() + start), length, precision,
                  out.data());
        for (size_t i = 0; i < length; ++i) {
          const float one = precision == proto::WIRE_BF16 ? Bf16ToFloat(halves[start + i])
                                                          : Fp16ToFloat(halves[start + i]);
          ASSERT_EQ(std::memcmp(&one, &out[i], sizeof(float)), 0)
              << WirePrecisionName(precision) << " frame of " << length << " at " << i;
        }
        ASSERT_EQ(out[length], -1.0f) << "written past a frame of " << length;
      }
    }
  }
  std::vector<uint32_t> bits = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0xffffffff,
      0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000,
      0x33000000, 0x33000001, 0xb3000000, 0x38800000, 0x387fffff, 0x00000001, 0x3f808000,
      0x3f818000, 0x3f808001, 0x3fffffff, 0x3f800fff, 0x3f801000, 0x3f803000};
  std::mt19937 random(11);
  for (int i = 0; i < 20000; ++i) bits.push_back(static_cast<uint32_t>(random()));
  std::uniform_real_distribution<float> exponent(-30.0f, 20.0f);
  for (int i = 0; i < 20000; ++i) {
    const float value = std::exp2(exponent(random)) * (i % 2 ? -1.0f : 1.0f);
    uint32_t value_bits;
    std::memcpy(&value_bits, &value, sizeof(value_bits));
    bits.push_back(value_bits);
  }
  const auto expect_frame = [](const std::vector<uint32_t>& frame_bits) {
    auto values = SharedArray<float>::Allocate(frame_bits.size());
    if (!frame_bits.empty()) {
      std::memcpy(values.data(), frame_bits.data(), frame_bits.size() * sizeof(float));
    }
    const SharedArray<const float> input = values;
    for (auto precision : {proto::WIRE_BF16, proto::WIRE_FP16}) {
      const Bytes frame = NarrowValues(input, precision);
      ASSERT_EQ(frame.size(), 2 * frame_bits.size());
      for (size_t i = 0; i < frame_bits.size(); ++i) {
        uint16_t narrow;
        std::memcpy(&narrow, frame.data() + 2 * i, sizeof(narrow));
        const uint16_t one =
            precision == proto::WIRE_BF16 ? FloatToBf16(input[i]) : FloatToFp16(input[i]);
        ASSERT_EQ(narrow, one) << WirePrecisionName(precision) << " of " << std::hex
                               << frame_bits[i] << " at " << std::dec << i << " of "
                               << frame_bits.size();
      }
    }
  };
  expect_frame(bits);
  for (size_t length = 0; length <= 40; ++length) {
    // Each special value at each position of a frame of this length.
    for (size_t start = 0; start < 27; ++start) {
      std::vector<uint32_t> frame(length, 0x3f800000);
      for (size_t i = 0; i < length; ++i) frame[i] = bits[(start + i) % 27];
      expect_frame(frame);
    }
  }
}

TEST(WirePrecisionTest, Fp16IsSentAsFloat32WhenAFiniteValueLiesPastItsRange) {
  const float largest = 65504.0f, below_midpoint = std::nextafter(65520.0f, 0.0f);
  std::vector<float> values = {1.0f, -largest, below_midpoint, kInfinity, std::nanf("")};
  for (size_t i = 0; i < 20; ++i) values.push_back(0.5f * static_cast<float>(i));
  EXPECT_EQ(PrecisionToSend(values.data(), values.size(), proto::WIRE_FP16), proto::WIRE_FP16);
  for (float past : {65520.0f, -65520.0f, 1e30f, std::numeric_limits<float>::max()}) {
    for (size_t at : {size_t{0}, size_t{7}, values.size() - 1}) {
      std::vector<float> with = values;
      with[at] = past;
      EXPECT_EQ(PrecisionToSend(with.data(), with.size(), proto::WIRE_FP16), proto::WIRE_FP32)
          << past << " at " << at;
    }
  }
  // Other precisions are sent as asked (bfloat16 has float32's range).
  const float big[1] = {1e30f};
  EXPECT_EQ(PrecisionToSend(big, 1, proto::WIRE_BF16), proto::WIRE_BF16);
  EXPECT_EQ(PrecisionToSend(big, 1, proto::WIRE_FP32), proto::WIRE_FP32);
  EXPECT_EQ(PrecisionToSend(nullptr, 0, proto::WIRE_FP16), proto::WIRE_FP16);
}

TEST(WirePrecisionTest, NarrowToSendSendsFp16AsAskedOrTheValuesThemselvesPastItsRange) {
  auto values = SharedArray<float>::Allocate(9);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i);
  const SharedArray<const float> small = values;
  const OutgoingFrame narrow = NarrowToSend(small, proto::WIRE_FP16);
  EXPECT_EQ(narrow.precision, proto::WIRE_FP16);
  const Bytes expected = NarrowValues(small, proto::WIRE_FP16);
  ASSERT_EQ(narrow.bytes.size(), expected.size());
  EXPECT_EQ(0, std::memcmp(narrow.bytes.data(), expected.data(), expected.size()));
  values[4] = 70000.0f;  // past fp16's range: the floats themselves go
  const OutgoingFrame wide = NarrowToSend(small, proto::WIRE_FP16);
  EXPECT_EQ(wide.precision, proto::WIRE_FP32);
  EXPECT_EQ(wide.bytes.data(), reinterpret_cast<const char*>(small.data()));
  const OutgoingFrame brain = NarrowToSend(small, proto::WIRE_BF16);  // bf16 has the range
  EXPECT_EQ(brain.precision, proto::WIRE_BF16);
  EXPECT_EQ(brain.bytes.size(), 2 * small.size());
}

// The check and the narrowing are one pass, eight values at a time where the
// CPU can: a value past the range in an eight or in the tail after the last
// eight, or none, gives what the check and a separate narrowing give.
TEST(WirePrecisionTest, NarrowToSendGivesWhatTheRangeCheckAndNarrowingGiveWhereverTheValueLies) {
  for (size_t count : {size_t{1}, size_t{8}, size_t{20}, size_t{1003}}) {
    for (size_t at : {count, size_t{0}, count / 2, count - 1}) {
      for (float past : {65520.0f, -1e30f}) {
        auto values = SharedArray<float>::Allocate(count);
        for (size_t i = 0; i < count; ++i) {
          values[i] = std::ldexp(static_cast<float>(i % 13) - 6.0f, static_cast<int>(i % 31) - 20);
        }
        values[count - 1] = std::numeric_limits<float>::infinity();  // sent as fp16: inf
        if (at < count) values[at] = past;
        const SharedArray<const float> frame = values;
        const proto::WirePrecision expected =
            PrecisionToSend(frame.data(), frame.size(), proto::WIRE_FP16);
        EXPECT_EQ(expected, at < count ? proto::WIRE_FP32 : proto::WIRE_FP16);
        const OutgoingFrame sent = NarrowToSend(frame, proto::WIRE_FP16);
        ASSERT_EQ(sent.precision, expected) << count << " values, " << past << " at " << at;
        const Bytes bytes = NarrowValues(frame, expected);
        ASSERT_EQ(sent.bytes.size(), bytes.size());
        EXPECT_EQ(0, std::memcmp(sent.bytes.data(), bytes.data(), bytes.size()))
            << count << " values, " << past << " at " << at;
      }
    }
  }
}

TEST(WirePrecisionTest, AFrameOfTheWrongSizeForItsPrecisionIsRefused) {
  auto values = SharedArray<float>::Allocate(4);
  const Bytes fp32 = AsBytes(SharedArray<const float>(values));
  // 16 bytes are 4 floats, or 8 halves, not 4.
  try {
    WidenValues(fp32, 4, proto::WIRE_BF16, "value frame");
    FAIL() << "a 16-byte frame of 4 bf16 values was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("value frame has 16 bytes; 4 values of bf16 need 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(WidenValues(fp32, 3, proto::WIRE_FP32, "value frame"), Error);
  EXPECT_THROW(WidenValues(fp32, 8, static_cast<proto::WirePrecision>(9), "value frame"), Error);
  EXPECT_EQ(WidenValues(fp32, 8, proto::WIRE_FP16, "value frame").size(), 8u);
}

}  // namespace
}  // namespace keel
