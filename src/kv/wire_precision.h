// Wire precision: the 16-bit forms gradients and weights may travel in
// (Meta.precision), and their conversion to and from float32.
//
// bfloat16 keeps float32's exponent (its range) and 8 bits of significand;
// IEEE half keeps 11 bits of significand and a range of +-65504 (normal
// values from 2^-14, subnormal ones down to 2^-24). Both round to nearest,
// ties to even. A finite value past the largest finite 16-bit value becomes
// that value with its sign (saturation), never an infinity: a server refuses
// a push with a non-finite value, and a large finite gradient must not turn
// into one. Infinities stay infinities; NaN stays a (quiet) NaN; values below
// the smallest subnormal become zero of their sign. Widening to float32 is
// exact (an fp16 NaN widens quiet), so every node that widens the same 16-bit frame
// gets the same floats. Frames convert eight values at a time where the CPU
// has AVX2 and F16C, with the same bits as the functions below.
//
// Thread-safe: pure functions.
#ifndef KEEL_KV_WIRE_PRECISION_H_
#define KEEL_KV_WIRE_PRECISION_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "keel.pb.h"
#include "kv/shared_array.h"

namespace keel {

// "fp32", "bf16" or "fp16".
std::string WirePrecisionName(proto::WirePrecision precision);
// Parses a WirePrecisionName. Throws Error naming `text` and the choices.
proto::WirePrecision ParseWirePrecision(const std::string& text);
// Bytes one value takes on the wire; throws Error for an unknown precision.
size_t BytesPerValue(proto::WirePrecision precision);

uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t bits);
uint16_t FloatToFp16(float value);
float Fp16ToFloat(uint16_t bits);
// Whether NarrowValues and the widening below convert eight values at a time.
bool WideWireConversionAvailable();

// The precision a frame of `values` travels in when `asked` is asked for: fp16
// unless a finite value lies past its range (at or above 65520 in magnitude,
// which FloatToFp16 would saturate), then fp32, so that no value is clipped;
// `asked` itself otherwise.
proto::WirePrecision PrecisionToSend(const float* values, size_t count, proto::WirePrecision asked);

// `values` as the bytes of a frame of `precision` (float32: the floats
// themselves, not copied; 16-bit: a new array of converted values).
SharedArray<char> NarrowValues(const SharedArray<const float>& values,
                               proto::WirePrecision precision);

// A frame as it goes out: its values' bytes in the precision they travel in.
struct OutgoingFrame {
  proto::WirePrecision precision;
  SharedArray<char> bytes;
};
// `values` narrowed to the precision PrecisionToSend gives for `asked`: what
// a push part and a pull answer send (the precision goes in their Meta).
OutgoingFrame NarrowToSend(const SharedArray<const float>& values, proto::WirePrecision asked);

// A frame of `count` values of `precision` widened to float32 (float32: the
// frame itself, not copied). Throws Error, naming `what`, if the frame is not
// count values of that precision, or the precision is unknown.
SharedArray<const float> WidenValues(const SharedArray<char>& frame, uint64_t count,
                                     proto::WirePrecision precision, const std::string& what);
// Widens `count` values of `precision` at `data` into `out`.
void WidenInto(const char* data, size_t count, proto::WirePrecision precision, float* out);

}  // namespace keel

#endif  // KEEL_KV_WIRE_PRECISION_H_
