// Decimal numbers of the text formats (io/decimal.h).
#include "io/decimal.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace keel {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

// The digits make an integer below 2^24 and the power of ten is at most
// 10^10: both are exact floats, and one division rounds correctly.
const char* ParsePlainDecimal(const char* begin, const char* end, float* value) {
  static constexpr float kPowersOfTen[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                           1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
  const bool negative = begin != end && *begin == '-';
  uint32_t digits = 0;
  int digit_count = 0;
  int fraction_digits = -1;  // -1 until the point
  const char* p = begin + negative;
  for (; p != end && digit_count <= 7; ++p) {
    if (IsDigit(*p)) {
      digits = digits * 10 + static_cast<uint32_t>(*p - '0');
      ++digit_count;
      if (fraction_digits >= 0) ++fraction_digits;
    } else if (*p == '.' && fraction_digits < 0) {
      fraction_digits = 0;
    } else {
      break;
    }
  }
  if (digit_count == 0 || digits >= (uint32_t{1} << 24) || fraction_digits > 10) return nullptr;
  if (p != end && (IsDigit(*p) || *p == '.' || *p == 'e' || *p == 'E')) return nullptr;
  const float magnitude =
      static_cast<float>(digits) / kPowersOfTen[fraction_digits < 0 ? 0 : fraction_digits];
  *value = negative ? -magnitude : magnitude;
  return p;
}

bool ParseFloat(const char* begin, const char* end, float* value) {
  if (begin != end && *begin == '+') {
    ++begin;
    if (begin != end && *begin == '-') return false;
  }
  if (begin == end) return false;
  if (ParsePlainDecimal(begin, end, value) == end) return true;
  const std::from_chars_result result = std::from_chars(begin, end, *value);
  if (result.ec == std::errc() && result.ptr == end) return true;
  if (result.ec != std::errc::result_out_of_range) return false;
  // Rare: let strtof decide between overflow and underflow, on a terminated copy.
  const std::string copy(begin, end);
  char* parsed_end = nullptr;
  *value = std::strtof(copy.c_str(), &parsed_end);
  return parsed_end == copy.c_str() + copy.size();
}

}  // namespace keel
