#include "kv/wire_precision.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/cpu_features.h"
#include "base/error.h"

#if KEEL_X86_VECTORS
#include <immintrin.h>
#endif

namespace keel {
namespace {

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FloatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

constexpr uint32_t kFloatExponent = 0x7f800000u;
constexpr uint16_t kBf16LargestFinite = 0x7f7f;
constexpr uint16_t kFp16LargestFinite = 0x7bff;  // 65504
constexpr uint16_t kFp16Infinity = 0x7c00;
// 65520: the midpoint between 65504 and the next step; from it up a value
// rounds past the largest finite half.
constexpr uint32_t kFp16OverflowBits = 0x477ff000u;
// 2^-25: half the smallest subnormal half; at or below it a value rounds to zero.
constexpr uint32_t kFp16UnderflowBits = 0x33000000u;
// 2^-14: the smallest normal half.
constexpr uint32_t kFp16SmallestNormalBits = 0x38800000u;

// Drops the low `shift` bits of `value`, rounding to nearest, ties to even.
uint32_t RoundShift(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

// The bytes of `array` (no copy).
template <typename T>
SharedArray<char> BytesOf(const SharedArray<T>& array) {
  using Mutable = std::remove_const_t<T>;
  return SharedArray<char>(
      array.owner(), reinterpret_cast<char*>(const_cast<Mutable*>(array.data())), array.bytes());
}

#if KEEL_X86_VECTORS
// Eight values at a time, with AVX2 (and F16C for halves), giving the scalar
// functions' bits exactly (wire_precision_test compares them). Each converts
// the whole eights of `count` and returns how many values that is; the caller
// converts the rest one at a time. With `stop_past_range`, NarrowFp16Vector
// stops at the first eight holding a finite value past fp16's range and
// returns SIZE_MAX (for a frame that goes as fp16 only if all of it fits).
KEEL_TARGET_AVX2_F16C size_t NarrowFp16Vector(const float* in, size_t count, uint16_t* out,
                                              bool stop_past_range = false) {
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff);
  // Finite values from 65520 up saturate, where the instruction gives an
  // infinity: an eight holding one goes through FloatToFp16.
  const __m256i below_overflow = _mm256_set1_epi32(static_cast<int>(kFp16OverflowBits - 1));
  const __m256i below_infinity = _mm256_set1_epi32(static_cast<int>(kFloatExponent - 1));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 values = _mm256_loadu_ps(in + i);
    const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(values), magnitude_mask);
    const __m256i finite_big = _mm256_andnot_si256(_mm256_cmpgt_epi32(magnitude, below_infinity),
                                                   _mm256_cmpgt_epi32(magnitude, below_overflow));
    if (_mm256_movemask_epi8(finite_big) != 0) {
      if (stop_past_range) return SIZE_MAX;
      for (size_t j = i; j < i + 8; ++j) out[j] = FloatToFp16(in[j]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

KEEL_TARGET_AVX2_F16C size_t WidenFp16Vector(const char* data, size_t count, float* out) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  return i;
}

KEEL_TARGET_AVX2_F16C size_t NarrowBf16Vector(const float* in, size_t count, uint16_t* out) {
  const __m256i exponent = _mm256_set1_epi32(static_cast<int>(kFloatExponent));
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i round = _mm256_set1_epi32(0x7fff);
  const __m256i bf16_exponent = _mm256_set1_epi32(0x7f80);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, round),
                                           _mm256_and_si256(_mm256_srli_epi32(bits, 16), one)),
                          16);
    const __m256i special = _mm256_cmpeq_epi32(_mm256_and_si256(bits, exponent), exponent);
    const __m256i overflows =
        _mm256_cmpeq_epi32(_mm256_and_si256(rounded, bf16_exponent), bf16_exponent);
    if (_mm256_movemask_epi8(_mm256_or_si256(special, overflows)) != 0) {
      for (size_t j = i; j < i + 8; ++j) out[j] = FloatToBf16(in[j]);
      continue;
    }
    // 32-bit lanes of at most 0xffff packed to 16 bits, the 128-bit halves in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  return i;
}

KEEL_TARGET_AVX2_F16C size_t WidenBf16Vector(const char* data, size_t count, float* out) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 2 * i));
    const __m256i wide = _mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), wide);
  }
  return i;
}
#endif  // KEEL_X86_VECTORS

}  // namespace

std::string WirePrecisionName(proto::WirePrecision precision) {
  switch (precision) {
    case proto::WIRE_FP32:
      return "fp32";
    case proto::WIRE_BF16:
      return "bf16";
    case proto::WIRE_FP16:
      return "fp16";
    default:
      return "precision " + std::to_string(static_cast<int>(precision));
  }
}

proto::WirePrecision ParseWirePrecision(const std::string& text) {
  for (proto::WirePrecision precision : {proto::WIRE_FP32, proto::WIRE_BF16, proto::WIRE_FP16}) {
    if (text == WirePrecisionName(precision)) return precision;
  }
  throw MakeError("wire precision '", text, "' is not fp32, bf16 or fp16");
}

size_t BytesPerValue(proto::WirePrecision precision) {
  switch (precision) {
    case proto::WIRE_FP32:
      return sizeof(float);
    case proto::WIRE_BF16:
    case proto::WIRE_FP16:
      return sizeof(uint16_t);
    default:
      throw MakeError("unknown wire precision ", static_cast<int>(precision));
  }
}

uint16_t FloatToBf16(float value) {
  const uint32_t bits = BitsOf(value);
  if ((bits & kFloatExponent) == kFloatExponent) {
    // Infinity keeps its bits; a NaN stays one (quiet), whatever its payload.
    return static_cast<uint16_t>(bits >> 16) | ((bits & 0x7fffffu) ? 0x0040 : 0);
  }
  const uint16_t rounded = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
  if ((rounded & 0x7f80) == 0x7f80) {
    return static_cast<uint16_t>((bits >> 16) & 0x8000) | kBf16LargestFinite;
  }
  return rounded;
}

float Bf16ToFloat(uint16_t bits) { return FloatOf(uint32_t{bits} << 16); }

bool WideWireConversionAvailable() { return KEEL_X86_VECTORS && CpuHasAvx2AndF16c(); }

uint16_t FloatToFp16(float value) {
  const uint32_t bits = BitsOf(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= kFloatExponent) {
    if (magnitude == kFloatExponent) return sign | kFp16Infinity;
    return sign | kFp16Infinity | 0x0200 | static_cast<uint16_t>((magnitude >> 13) & 0x3ff);
  }
  if (magnitude >= kFp16OverflowBits) return sign | kFp16LargestFinite;
  if (magnitude >= kFp16SmallestNormalBits) {
    // Rebias the exponent (127 -> 15) and round the significand to 10 bits;
    // a carry moves into the exponent, as it should.
    return sign | static_cast<uint16_t>(RoundShift(magnitude - ((127u - 15u) << 23), 13));
  }
  if (magnitude <= kFp16UnderflowBits) return sign;
  // Subnormal half: the significand (with its leading 1) in units of 2^-24.
  const uint32_t exponent = magnitude >> 23;  // 102..112
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  return sign | static_cast<uint16_t>(RoundShift(significand, static_cast<int>(126 - exponent)));
}

float Fp16ToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t significand = bits & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: significand x 2^-24, exact in float32.
    const float magnitude = static_cast<float>(significand) * 5.9604644775390625e-8f;
    return FloatOf(sign | BitsOf(magnitude));
  }
  if (exponent == 0x1f) {
    // A NaN widens quiet (as the CPU's conversion widens it), whatever its payload.
    const uint32_t quiet = significand != 0 ? 0x400000u : 0;
    return FloatOf(sign | kFloatExponent | quiet | (significand << 13));
  }
  return FloatOf(sign | ((exponent + 127 - 15) << 23) | (significand << 13));
}

namespace {

// Whether `value` is finite and at or past 65520 in magnitude, which
// FloatToFp16 would saturate.
uint32_t PastFp16Range(float value) {
  const uint32_t magnitude = BitsOf(value) & 0x7fffffffu;
  return static_cast<uint32_t>(magnitude >= kFp16OverflowBits) &
         static_cast<uint32_t>(magnitude < kFloatExponent);
}

// Narrows `values` to fp16 into `out` if every one lies within fp16's range;
// returns false (`out` partly written) at the first that does not.
bool NarrowFp16InRange(const float* values, size_t count, uint16_t* out) {
  size_t done = 0;
#if KEEL_X86_VECTORS
  if (WideWireConversionAvailable()) {
    done = NarrowFp16Vector(values, count, out, /*stop_past_range=*/true);
    if (done == SIZE_MAX) return false;
  }
#endif
  for (size_t i = done; i < count; ++i) {
    if (PastFp16Range(values[i])) return false;
    out[i] = FloatToFp16(values[i]);
  }
  return true;
}

}  // namespace

proto::WirePrecision PrecisionToSend(const float* values, size_t count,
                                     proto::WirePrecision asked) {
  if (asked != proto::WIRE_FP16) return asked;
  // One pass the compiler vectorizes: no branch, the verdicts or-ed together.
  uint32_t past_range = 0;
  for (size_t i = 0; i < count; ++i) past_range |= PastFp16Range(values[i]);
  return past_range != 0 ? proto::WIRE_FP32 : proto::WIRE_FP16;
}

SharedArray<char> NarrowValues(const SharedArray<const float>& values,
                               proto::WirePrecision precision) {
  if (precision == proto::WIRE_FP32) return BytesOf(values);
  BytesPerValue(precision);  // throws for an unknown one
  auto narrow = SharedArray<uint16_t>::Allocate(values.size());
  const float* in = values.data();
  uint16_t* out = narrow.data();
  const bool bf16 = precision == proto::WIRE_BF16;
  size_t done = 0;
#if KEEL_X86_VECTORS
  if (WideWireConversionAvailable()) {
    done =
        bf16 ? NarrowBf16Vector(in, values.size(), out) : NarrowFp16Vector(in, values.size(), out);
  }
#endif
  for (size_t i = done; i < values.size(); ++i) {
    out[i] = bf16 ? FloatToBf16(in[i]) : FloatToFp16(in[i]);
  }
  return BytesOf(narrow);
}

OutgoingFrame NarrowToSend(const SharedArray<const float>& values, proto::WirePrecision asked) {
  if (asked != proto::WIRE_FP16) return {asked, NarrowValues(values, asked)};
  // The range check and the narrowing in one pass (the check's own pass had
  // been 1.9% of a training job's samples): a frame rarely holds a value past
  // the range, and then only the narrowing done so far is wasted.
  auto narrow = SharedArray<uint16_t>::Allocate(values.size());
  if (!NarrowFp16InRange(values.data(), values.size(), narrow.data())) {
    return {proto::WIRE_FP32, BytesOf(values)};
  }
  return {proto::WIRE_FP16, BytesOf(narrow)};
}

void WidenInto(const char* data, size_t count, proto::WirePrecision precision, float* out) {
  if (precision == proto::WIRE_FP32) {
    std::memcpy(out, data, count * sizeof(float));
    return;
  }
  BytesPerValue(precision);  // throws for an unknown one
  size_t done = 0;
#if KEEL_X86_VECTORS
  if (WideWireConversionAvailable()) {
    done = precision == proto::WIRE_BF16 ? WidenBf16Vector(data, count, out)
                                         : WidenFp16Vector(data, count, out);
  }
#endif
  for (size_t i = done; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, data + i * sizeof(bits), sizeof(bits));
    out[i] = precision == proto::WIRE_BF16 ? Bf16ToFloat(bits) : Fp16ToFloat(bits);
  }
}

SharedArray<const float> WidenValues(const SharedArray<char>& frame, uint64_t count,
                                     proto::WirePrecision precision, const std::string& what) {
  if (!proto::WirePrecision_IsValid(precision)) {
    throw MakeError(what, ": unknown wire precision ", static_cast<int>(precision));
  }
  const uint64_t expected = count * BytesPerValue(precision);
  if (frame.size() != expected) {
    throw MakeError(what, " has ", frame.size(), " bytes; ", count, " values of ",
                    WirePrecisionName(precision), " need ", expected);
  }
  if (precision == proto::WIRE_FP32) return frame.As<const float>();
  auto wide = SharedArray<float>::Allocate(count);
  WidenInto(frame.data(), count, precision, wide.data());
  return wide;
}

}  // namespace keel
