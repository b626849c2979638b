// JsonQuote: a string as a JSON string literal, for the JSON lines Keel writes
// (event logs, membership logs).
#ifndef KEEL_BASE_JSON_H_
#define KEEL_BASE_JSON_H_

#include <cstdio>
#include <string>

namespace keel {

// `text` in double quotes, with quotes, backslashes and control characters escaped.
inline std::string JsonQuote(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

}  // namespace keel

#endif  // KEEL_BASE_JSON_H_
