// A small, strict JSON reader (RFC 8259) for the documents Keel reads back,
// such as a model's model.json. Errors name the document and the byte offset.
#ifndef KEEL_BASE_JSON_READER_H_
#define KEEL_BASE_JSON_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace keel {

// One JSON value: null, true/false, a number, a string, an array or an
// object (its members in document order, no two with the same name).
class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type() const { return type_; }
  // The byte offset in its document where the value starts (for messages).
  size_t offset() const { return offset_; }
  // The byte offset just past the value: [offset(), end()) is its text.
  size_t end() const { return end_; }
  // The value of each type; each requires type() to be that type (checked:
  // throws Error naming the offset and both types).
  bool AsBool() const;
  double AsNumber() const;
  const std::string& AsString() const;
  // A number written as a non-negative integer (no fraction, no exponent)
  // that fits 64 bits, exactly (AsNumber rounds above 2^53); throws Error
  // naming the offset otherwise.
  uint64_t AsUint64() const;
  const std::vector<JsonValue>& AsArray() const;
  const std::vector<std::pair<std::string, JsonValue>>& AsObject() const;
  // The member called `name` of an object; nullptr when there is none or
  // this is not an object.
  const JsonValue* Find(const std::string& name) const;
  // "null", "a boolean", "a number", "a string", "an array", "an object".
  static const char* TypeName(Type type);

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  size_t offset_ = 0;
  size_t end_ = 0;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;  // a string's value; a number's text
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

// Parses `text`, which must be one complete JSON document (surrounding
// whitespace allowed, nothing else). Strict: no comments, no trailing commas,
// no duplicate member names, no leading zeros, no raw control characters in
// strings, nesting at most 256 deep. Throws Error "SOURCE: byte N: what is
// wrong", `source` naming the document (a file's path).
JsonValue ParseJson(const std::string& text, const std::string& source);

}  // namespace keel

#endif  // KEEL_BASE_JSON_READER_H_
