#include "flags/flag_rules.h"

#include "base/utf8.h"

namespace keel {

void RequireUtf8(const char* flag, const std::string& value) {
  if (!IsValidUtf8(value)) {
    throw MakeError("--", flag, " '", ValidUtf8(value), "' is not valid UTF-8");
  }
}

}  // namespace keel
