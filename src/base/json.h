// Writing JSON: JsonQuote (a string as a JSON string literal; AppendJsonQuoted
// appends one to a string), JsonNumberOrNull (a number as Keel's JSON lines
// write it, or to a given number of significant digits), JsonFixedOrNull (to
// a given number of decimals), JsonShortestOrNull (the shortest text that
// reads back as the same float or double), JsonObject (an object written
// member by member) and JsonArray (values joined into an array), for the JSON
// lines and documents Keel writes (event and membership logs, timelines,
// progress records, the status page, model.json, exact_sum.json, the
// benchmarks' records; the inference service's answers alone are written by
// hand, io/inference_format.cc says why). Every number is null when it is not
// finite: JSON has no NaN or infinity. Reading JSON: base/json_reader.h.
#ifndef KEEL_BASE_JSON_H_
#define KEEL_BASE_JSON_H_

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

namespace keel {

// Appends `text` in double quotes to *out, with quotes, backslashes and
// control characters escaped.
inline void AppendJsonQuoted(const std::string& text, std::string* out) {
  *out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      *out += escaped;
    } else {
      *out += c;
    }
  }
  *out += '"';
}

// `text` in double quotes, escaped as AppendJsonQuoted does.
inline std::string JsonQuote(const std::string& text) {
  std::string quoted;
  quoted.reserve(text.size() + 2);
  AppendJsonQuoted(text, &quoted);
  return quoted;
}

// `value` with `significant_digits` significant digits (printf's "%.*g"; at
// most 17, all a double holds), or null when it is not finite. The default, 9,
// reads back as the same float.
inline std::string JsonNumberOrNull(double value, int significant_digits = 9) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  const int digits = std::clamp(significant_digits, 1, 17);
  const auto end =
      std::to_chars(text, text + sizeof(text), value, std::chars_format::general, digits).ptr;
  return std::string(text, end);
}

// `value` with `decimals` digits after the point (printf's "%.*f"), or null
// when it is not finite.
inline std::string JsonFixedOrNull(double value, int decimals) {
  if (!std::isfinite(value)) return "null";
  decimals = std::max(decimals, 0);
  std::string text(312 + static_cast<size_t>(decimals), '\0');  // 1e308 has 309 digits
  const auto end = std::to_chars(text.data(), text.data() + text.size(), value,
                                 std::chars_format::fixed, decimals)
                       .ptr;
  text.resize(static_cast<size_t>(end - text.data()));
  return text;
}

// The shortest text that reads back as `value` in its own type (0.01f is
// "0.01", not "0.0099999998"), or null when it is not finite.
template <typename Real>
std::string JsonShortestOrNull(Real value) {
  static_assert(std::is_floating_point_v<Real>, "a float or a double");
  if (!std::isfinite(value)) return "null";
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  return std::string(text, end);
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
    if (text_.empty()) text_.reserve(64);  // most objects: one allocation
    text_ += text_.empty() ? "{" : (compact ? "," : ", ");
    AppendJsonQuoted(name, &text_);
    text_ += compact ? ":" : ": ";
    text_ += json;
    return *this;
  }
  JsonObject& Number(const std::string& name, double value, int significant_digits = 9) {
    return Add(name, JsonNumberOrNull(value, significant_digits));
  }
  JsonObject& Fixed(const std::string& name, double value, int decimals) {
    return Add(name, JsonFixedOrNull(value, decimals));
  }
  template <typename Real>
  JsonObject& Shortest(const std::string& name, Real value) {
    return Add(name, JsonShortestOrNull(value));
  }
  JsonObject& Count(const std::string& name, uint64_t value) {
    return Add(name, std::to_string(value));
  }
  // A whole number that may be negative.
  JsonObject& Integer(const std::string& name, int64_t value) {
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

// `elements` (JSON already) as an array: [1, [2]] (kSpaced) or [1,[2]]
// (kCompact), as JsonObject separates its members.
inline std::string JsonArray(const std::vector<std::string>& elements,
                             JsonObject::Style style = JsonObject::Style::kSpaced) {
  const char* separator = style == JsonObject::Style::kCompact ? "," : ", ";
  std::string text = "[";
  for (size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) text += separator;
    text += elements[i];
  }
  return text + "]";
}

}  // namespace keel

#endif  // KEEL_BASE_JSON_H_
