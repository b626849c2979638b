// Decimal numbers as the text formats write them: the one parser the
// training readers (libsvm, CSV) and the inference request formats share, so
// a value reads as the same float in training, `keel predict` and `keel serve`.
#ifndef KEEL_IO_DECIMAL_H_
#define KEEL_IO_DECIMAL_H_

namespace keel {

// Parses the plain decimal ("-12.345") at `begin` in the common case where
// the digits make an integer below 2^24 with at most 10 of them after the
// point (Clinger's fast path: exact, correctly rounded). Returns where the
// number stops, or null if it is not such a number (ParseFloat then decides).
const char* ParsePlainDecimal(const char* begin, const char* end, float* value);

// Parses all of [begin, end) as a decimal floating-point number ("+1",
// "-2.5e-3", "nan", "inf"), correctly rounded. Values beyond float's range
// become +-inf, values below it 0 or a denormal, as strtof does. False if
// [begin, end) is not a number.
bool ParseFloat(const char* begin, const char* end, float* value);

}  // namespace keel

#endif  // KEEL_IO_DECIMAL_H_
