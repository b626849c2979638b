#include "base/json_reader.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "base/error.h"
#include "base/utf8.h"

namespace keel {

bool JsonValue::AsBool() const {
  if (type_ != Type::kBool)
    throw MakeError("JSON value at byte ", offset_, " is ", TypeName(type_), ", not a boolean");
  return bool_;
}

double JsonValue::AsNumber() const {
  if (type_ != Type::kNumber)
    throw MakeError("JSON value at byte ", offset_, " is ", TypeName(type_), ", not a number");
  return number_;
}

const std::string& JsonValue::AsString() const {
  if (type_ != Type::kString)
    throw MakeError("JSON value at byte ", offset_, " is ", TypeName(type_), ", not a string");
  return string_;
}

uint64_t JsonValue::AsUint64() const {
  const double value = AsNumber();
  const bool digits_only = string_.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long exact = std::strtoull(string_.c_str(), nullptr, 10);
  if (!digits_only || errno == ERANGE) {
    throw MakeError("JSON value at byte ", offset_, " is ", value,
                    ", not a whole number from 0 to 2^64 - 1");
  }
  return exact;
}

const std::vector<JsonValue>& JsonValue::AsArray() const {
  if (type_ != Type::kArray)
    throw MakeError("JSON value at byte ", offset_, " is ", TypeName(type_), ", not an array");
  return array_;
}

const std::vector<std::pair<std::string, JsonValue>>& JsonValue::AsObject() const {
  if (type_ != Type::kObject)
    throw MakeError("JSON value at byte ", offset_, " is ", TypeName(type_), ", not an object");
  return object_;
}

const JsonValue* JsonValue::Find(const std::string& name) const {
  for (const auto& [member, value] : object_) {
    if (member == name) return &value;
  }
  return nullptr;
}

const char* JsonValue::TypeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "a boolean";
    case Type::kNumber:
      return "a number";
    case Type::kString:
      return "a string";
    case Type::kArray:
      return "an array";
    case Type::kObject:
      return "an object";
  }
  return "?";
}

// A recursive-descent parser over one document; `at_` is the next byte.
class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  JsonValue Document() {
    SkipWhitespace();
    JsonValue value = Value(0);
    SkipWhitespace();
    if (at_ != text_.size()) Fail("unexpected '", text_[at_], "' after the document");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 256;

  template <typename... Parts>
  [[noreturn]] void Fail(Parts&&... parts) const {
    throw MakeError(source_, ": byte ", at_, ": ", std::forward<Parts>(parts)...);
  }

  bool AtEnd() const { return at_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[at_]; }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) ++at_;
  }

  void Expect(char c) {
    if (AtEnd()) Fail("expected '", c, "' but the document ends");
    if (Peek() != c) Fail("expected '", c, "' but found '", Peek(), "'");
    ++at_;
  }

  JsonValue Value(int depth) {
    if (depth > kMaxDepth) Fail("nested more than ", kMaxDepth, " deep");
    JsonValue value;
    value.offset_ = at_;
    if (AtEnd()) Fail("expected a value but the document ends");
    const char c = Peek();
    if (c == '{') {
      value.type_ = JsonValue::Type::kObject;
      Object(depth, &value);
    } else if (c == '[') {
      value.type_ = JsonValue::Type::kArray;
      Array(depth, &value);
    } else if (c == '"') {
      value.type_ = JsonValue::Type::kString;
      value.string_ = String();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value.type_ = JsonValue::Type::kNumber;
      const size_t start = at_;
      value.number_ = Number();
      value.string_ = text_.substr(start, at_ - start);
    } else if (Literal("true")) {
      value.type_ = JsonValue::Type::kBool;
      value.bool_ = true;
    } else if (Literal("false")) {
      value.type_ = JsonValue::Type::kBool;
    } else if (Literal("null")) {
      value.type_ = JsonValue::Type::kNull;
    } else {
      Fail("unexpected '", c, "' where a value should start");
    }
    value.end_ = at_;
    return value;
  }

  bool Literal(const char* word) {
    const std::string literal(word);
    if (text_.compare(at_, literal.size(), literal) != 0) return false;
    at_ += literal.size();
    return true;
  }

  void Object(int depth, JsonValue* object) {
    Expect('{');
    SkipWhitespace();
    if (Peek() == '}') {
      ++at_;
      return;
    }
    while (true) {
      SkipWhitespace();
      const size_t name_at = at_;
      if (Peek() != '"') Fail("expected a member name in double quotes");
      std::string name = String();
      if (object->Find(name) != nullptr) {
        at_ = name_at;
        Fail("member \"", name, "\" appears twice");
      }
      SkipWhitespace();
      Expect(':');
      SkipWhitespace();
      object->object_.emplace_back(std::move(name), Value(depth + 1));
      SkipWhitespace();
      if (Peek() == ',') {
        ++at_;
        continue;
      }
      Expect('}');
      return;
    }
  }

  void Array(int depth, JsonValue* array) {
    Expect('[');
    SkipWhitespace();
    if (Peek() == ']') {
      ++at_;
      return;
    }
    while (true) {
      SkipWhitespace();
      array->array_.push_back(Value(depth + 1));
      SkipWhitespace();
      if (Peek() == ',') {
        ++at_;
        continue;
      }
      Expect(']');
      return;
    }
  }

  // The digits of a number, as RFC 8259 spells them, converted by strtod.
  double Number() {
    const size_t start = at_;
    if (Peek() == '-') ++at_;
    if (Peek() == '0') {
      ++at_;
      if (IsDigit(Peek())) Fail("a number may not start with 0");
    } else if (!Digits()) {
      Fail("expected a digit");
    }
    if (Peek() == '.') {
      ++at_;
      if (!Digits()) Fail("expected a digit after '.'");
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++at_;
      if (Peek() == '+' || Peek() == '-') ++at_;
      if (!Digits()) Fail("expected a digit in the exponent");
    }
    return std::strtod(text_.substr(start, at_ - start).c_str(), nullptr);
  }

  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  bool Digits() {
    const size_t start = at_;
    while (IsDigit(Peek())) ++at_;
    return at_ > start;
  }

  std::string String() {
    Expect('"');
    std::string out;
    while (true) {
      if (AtEnd()) Fail("the string does not end");
      const char c = text_[at_];
      if (c == '"') {
        ++at_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) Fail("a control character inside a string");
      if (c != '\\') {
        out += c;
        ++at_;
        continue;
      }
      ++at_;
      Escape(&out);
    }
  }

  // The escape after a backslash (at_ is past it), appended to *out as UTF-8.
  void Escape(std::string* out) {
    if (AtEnd()) Fail("the string does not end");
    const char c = text_[at_++];
    switch (c) {
      case '"':
      case '\\':
      case '/':
        *out += c;
        return;
      case 'b':
        *out += '\b';
        return;
      case 'f':
        *out += '\f';
        return;
      case 'n':
        *out += '\n';
        return;
      case 'r':
        *out += '\r';
        return;
      case 't':
        *out += '\t';
        return;
      case 'u':
        AppendUtf8(CodePoint(), out);
        return;
      default:
        --at_;
        Fail("unknown escape '\\", c, "'");
    }
  }

  // The code point of \uXXXX (at_ past the 'u'), joining a surrogate pair.
  uint32_t CodePoint() {
    uint32_t unit = Hex4();
    if (unit >= 0xDC00 && unit <= 0xDFFF) Fail("a lone low surrogate");
    if (unit < 0xD800 || unit > 0xDBFF) return unit;
    if (!Literal("\\u")) Fail("a high surrogate without its low surrogate");
    const uint32_t low = Hex4();
    if (low < 0xDC00 || low > 0xDFFF) Fail("a high surrogate without its low surrogate");
    return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
  }

  uint32_t Hex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = Peek();
      uint32_t digit;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        Fail("expected four hexadecimal digits after \\u");
      }
      value = value * 16 + digit;
      ++at_;
    }
    return value;
  }

  const std::string& text_;
  const std::string& source_;
  size_t at_ = 0;
};

JsonValue ParseJson(const std::string& text, const std::string& source) {
  return JsonParser(text, source).Document();
}

}  // namespace keel
