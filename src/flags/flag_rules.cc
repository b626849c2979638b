#include "flags/flag_rules.h"

#include <cstdlib>

#include "base/utf8.h"

namespace keel {

bool ParseIntegerInRange(const std::string& text, long long low, long long high, long long* value) {
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || parsed < low || parsed > high) return false;
  *value = parsed;
  return true;
}

void RequireUtf8(const char* flag, const std::string& value) {
  if (!IsValidUtf8(value)) {
    throw MakeError("--", flag, " '", ValidUtf8(value), "' is not valid UTF-8");
  }
}

}  // namespace keel
