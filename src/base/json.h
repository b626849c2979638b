// Writing JSON: JsonQuote (a string as a JSON string literal), JsonNumberOrNull
// (a number as Keel's JSON lines write it), and JsonObject (an object written
// member by member), for the JSON lines and documents Keel writes (event and
// membership logs, timelines, progress records, the status page). Reading
// JSON: base/json_reader.h.
#ifndef KEEL_BASE_JSON_H_
#define KEEL_BASE_JSON_H_

#include <cmath>
#include <cstdint>
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

// `value` with 9 significant digits ("%.9g": a float read back is the same
// float), or null when it is not finite (JSON has no NaN or infinity).
inline std::string JsonNumberOrNull(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

// A JSON object written member by member: Add("a", "1").Add("b", "[2]") then
// Close() gives {"a": 1, "b": [2]} (kSpaced) or {"a":1,"b":[2]} (kCompact: one
// line a record, as the progress records on standard output). Values given to
// Add are JSON already; the typed members write theirs. Not thread-safe.
class JsonObject {
 public:
  enum class Style { kSpaced, kCompact };
  explicit JsonObject(Style style = Style::kSpaced) : style_(style) {}

  JsonObject& Add(const std::string& name, const std::string& json) {
    const bool compact = style_ == Style::kCompact;
    text_ += text_.empty() ? "{" : (compact ? "," : ", ");
    text_ += JsonQuote(name) + (compact ? ":" : ": ") + json;
    return *this;
  }
  JsonObject& Number(const std::string& name, double value) {
    return Add(name, JsonNumberOrNull(value));
  }
  JsonObject& Count(const std::string& name, uint64_t value) {
    return Add(name, std::to_string(value));
  }
  JsonObject& String(const std::string& name, const std::string& value) {
    return Add(name, JsonQuote(value));
  }
  JsonObject& Bool(const std::string& name, bool value) {
    return Add(name, value ? "true" : "false");
  }
  // The object's text; {} when no member was added.
  std::string Close() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  Style style_;
  std::string text_;
};

}  // namespace keel

#endif  // KEEL_BASE_JSON_H_
