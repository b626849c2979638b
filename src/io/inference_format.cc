// Inference request decoding and response encoding (io/inference_format.h).
#include "io/inference_format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <utility>

#include "io/decimal.h"
#include "io/recordio.h"
#include "record.pb.h"

namespace keel {
namespace {

constexpr const char* kSupportedRequestTypes =
    "text/csv, text/libsvm, application/json, application/jsonlines, "
    "application/x-recordio-protobuf";
constexpr const char* kSupportedResponseTypes =
    "application/json, application/jsonlines, application/x-recordio-protobuf, text/csv";

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// Not std::isspace: a call into the C library per character, locale-bound.
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

// The media type of a header element without its parameters, lower case.
std::string MediaType(std::string_view element) {
  return Lower(Trim(element.substr(0, element.find(';'))));
}

// The format a media type names; false if none.
bool FormatOfType(const std::string& type, InferenceFormat* format) {
  static const std::pair<const char*, InferenceFormat> kTypes[] = {
      {"text/csv", InferenceFormat::kCsv},
      {"text/libsvm", InferenceFormat::kLibsvm},
      {"text/x-libsvm", InferenceFormat::kLibsvm},
      {"application/json", InferenceFormat::kJson},
      {"application/jsonlines", InferenceFormat::kJsonLines},
      {"application/x-jsonlines", InferenceFormat::kJsonLines},
      {"application/jsonl", InferenceFormat::kJsonLines},
      {"application/x-recordio-protobuf", InferenceFormat::kRecordIO},
  };
  for (const auto& [name, value] : kTypes) {
    if (type == name) {
      *format = value;
      return true;
    }
  }
  return false;
}

[[noreturn]] void BadRecord(size_t record, const std::string& problem) {
  throw InferenceRequestError(400, "record " + std::to_string(record) + ": " + problem);
}

// Runs `decode` for record `record` on line `line` of a line format, so that
// its refusal ("record N: ...") names the line too ("record N (line L): ...").
template <typename DecodeFunction>
void OnLine(size_t record, size_t line, DecodeFunction decode) {
  try {
    decode();
  } catch (const InferenceRequestError& e) {
    const std::string prefix = "record " + std::to_string(record) + ": ";
    const std::string message = e.what();
    if (message.compare(0, prefix.size(), prefix) != 0) throw;
    throw InferenceRequestError(e.status(), "record " + std::to_string(record) + " (line " +
                                                std::to_string(line) +
                                                "): " + message.substr(prefix.size()));
  }
}

std::string Quote(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  if (text.size() > kMaxShown) return "'" + std::string(text.substr(0, kMaxShown)) + "...'";
  return "'" + std::string(text) + "'";
}

// A finite float from the whole of `text` (spaces around it allowed), read
// as the training readers read it (io/decimal.h).
bool ParseValue(std::string_view text, float* value) {
  text = Trim(text);
  return ParseFloat(text.data(), text.data() + text.size(), value) && std::isfinite(*value);
}

// Collects one record's features, checked against the model's input width,
// then adds them to the batch as a row.
class RecordBuilder {
 public:
  RecordBuilder(const InferenceInput& input, Batch* batch) : input_(input), batch_(batch) {
    if (batch_->rows() == 0) batch_->label_width = 1;
    if (batch_->label_width != 1) {
      throw MakeError("inference records: cannot add rows to a batch of ", batch_->label_width,
                      " labels per row");
    }
  }

  void Dense(size_t record, const std::vector<float>& values) {
    if (input_.input_dim > 0 && values.size() != input_.input_dim) {
      BadRecord(record, std::to_string(values.size()) + " features, the model takes " +
                            std::to_string(input_.input_dim));
    }
    indices_.resize(values.size());
    for (size_t j = 0; j < values.size(); ++j) indices_[j] = j;
    batch_->AddRow(0.0f, indices_.data(), values.data(), values.size());
  }

  // `shape` 0: none given. `base` is added to indices in messages: the
  // client's numbering (libsvm's 1-based indices), not the 0-based one.
  void Sparse(size_t record, const std::vector<uint64_t>& keys, const std::vector<float>& values,
              uint64_t shape, uint64_t base = 0) {
    if (keys.size() != values.size()) {
      BadRecord(record, std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) +
                            " values");
    }
    if (shape > 0 && input_.input_dim > 0 && shape != input_.input_dim) {
      BadRecord(record, "shape " + std::to_string(shape) + ", the model takes " +
                            std::to_string(input_.input_dim) + " features");
    }
    const uint64_t bound = shape > 0 ? shape : input_.input_dim;
    for (uint64_t key : keys) {
      if (bound > 0 && key >= bound) {
        BadRecord(record, "feature index " + std::to_string(key + base) +
                              " is out of range: the model takes indices " + std::to_string(base) +
                              " to " + std::to_string(bound - 1 + base));
      }
    }
    batch_->AddRow(0.0f, keys.data(), values.data(), keys.size());
  }

 private:
  const InferenceInput& input_;
  Batch* batch_;
  std::vector<uint64_t> indices_;
};

// Calls `line(number, text)` for each line of `body` that is not blank
// (without its "\n" or "\r\n"), numbering lines from 1.
template <typename LineFunction>
void ForEachLine(std::string_view body, LineFunction line) {
  size_t number = 0;
  while (!body.empty()) {
    const size_t newline = body.find('\n');
    std::string_view text = body.substr(0, newline);
    body.remove_prefix(newline == std::string_view::npos ? body.size() : newline + 1);
    ++number;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (Trim(text).empty()) continue;
    line(number, text);
  }
}

void DecodeCsv(std::string_view body, RecordBuilder* builder) {
  size_t record = 0;
  std::vector<float> values;
  ForEachLine(body, [&](size_t line, std::string_view text) {
    ++record;
    OnLine(record, line, [&] {
      values.clear();
      size_t column = 0;
      for (;;) {
        const size_t comma = text.find(',');
        const std::string_view field = text.substr(0, comma);
        ++column;
        float value;
        if (!ParseValue(field, &value)) {
          BadRecord(record, "column " + std::to_string(column) + ": " + Quote(Trim(field)) +
                                " is not a finite number");
        }
        values.push_back(value);
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
      }
      builder->Dense(record, values);
    });
  });
}

void DecodeLibsvm(std::string_view body, const InferenceInput& input, RecordBuilder* builder) {
  size_t record = 0;
  std::vector<uint64_t> keys;
  std::vector<float> values;
  const uint64_t first = input.libsvm_zero_based ? 0 : 1;
  ForEachLine(body, [&](size_t line, std::string_view text) {
    const size_t comment = text.find('#');
    if (comment != std::string_view::npos) text = text.substr(0, comment);
    if (Trim(text).empty()) return;
    ++record;
    OnLine(record, line, [&] {
      keys.clear();
      values.clear();
      bool first_token = true;
      while (!(text = Trim(text)).empty()) {
        size_t end = 0;
        while (end < text.size() && !IsSpace(text[end])) ++end;
        const std::string_view token = text.substr(0, end);
        text.remove_prefix(end);
        const size_t colon = token.find(':');
        if (colon == std::string_view::npos) {
          float label;
          if (first_token && ParseValue(token, &label)) {  // a label: ignored
            first_token = false;
            continue;
          }
          BadRecord(record, "feature " + Quote(token) + " has no ':' (expected index:value)");
        }
        first_token = false;
        if (token.substr(0, colon) == "qid") continue;
        uint64_t index = 0;
        const std::from_chars_result parsed =
            std::from_chars(token.data(), token.data() + colon, index);
        if (colon == 0 || parsed.ec != std::errc() || parsed.ptr != token.data() + colon) {
          BadRecord(record, "feature index " + Quote(token.substr(0, colon)) +
                                " is not a non-negative integer");
        }
        if (index < first) {
          BadRecord(record, "feature index 0 is below 1, the model's first index");
        }
        float value;
        if (!ParseValue(token.substr(colon + 1), &value)) {
          BadRecord(record,
                    "feature value " + Quote(token.substr(colon + 1)) + " is not a finite number");
        }
        keys.push_back(index - first);
        values.push_back(value);
      }
      builder->Sparse(record, keys, values, 0, first);
    });
  });
}

// A cursor over a JSON request, decoding as it goes: no document tree, so a
// body costs a few bytes per value beyond itself (a tree costs ~120 bytes a
// value: a 6 MiB body of numbers would take ~400 MB). Strict RFC 8259 syntax;
// errors are InferenceRequestError 400 "SOURCE: byte N: what is wrong".
class JsonCursor {
 public:
  JsonCursor(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  [[noreturn]] void Fail(const std::string& what) const {
    throw InferenceRequestError(400, source_ + ": byte " + std::to_string(at_) + ": " + what);
  }

  // The next character after whitespace, not consumed; '\0' at the end.
  char Peek() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
    return at_ < text_.size() ? text_[at_] : '\0';
  }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++at_;
    return true;
  }
  void Expect(char c) {
    if (!Consume(c)) Fail(std::string("expected '") + c + "' but found " + Found());
  }
  void ExpectEnd() {
    if (Peek() != '\0') Fail("text after the JSON value: " + Found());
  }

  // The kind of the next value, for messages: "a number", "a string", ...
  const char* KindOfNext() {
    switch (Peek()) {
      case '{':
        return "an object";
      case '[':
        return "an array";
      case '"':
        return "a string";
      case 't':
      case 'f':
        return "a boolean";
      case 'n':
        return "null";
      default:
        return "a number";
    }
  }

  // A string's value (escapes decoded; \u escapes as UTF-8).
  std::string String() {
    Expect('"');
    std::string value;
    for (;;) {
      if (at_ >= text_.size()) Fail("unterminated string");
      const char c = text_[at_++];
      if (c == '"') return value;
      if (static_cast<unsigned char>(c) < 0x20) Fail("a control character in a string");
      if (c != '\\') {
        value += c;
        continue;
      }
      if (at_ >= text_.size()) Fail("unterminated string");
      const char escaped = text_[at_++];
      switch (escaped) {
        case '"':
        case '\\':
        case '/':
          value += escaped;
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'u': {
          if (text_.size() - at_ < 4) Fail("a \\u escape needs 4 hex digits");
          unsigned code = 0;
          const std::from_chars_result parsed =
              std::from_chars(text_.data() + at_, text_.data() + at_ + 4, code, 16);
          if (parsed.ptr != text_.data() + at_ + 4) Fail("a \\u escape needs 4 hex digits");
          at_ += 4;
          // Names are matched against ASCII ones: any other code point only
          // needs to differ from them.
          value += code < 0x80 ? static_cast<char>(code) : '\x7f';
          break;
        }
        default:
          Fail(std::string("unknown escape \\") + escaped);
      }
    }
  }

  // A number's text, checked against JSON's grammar.
  std::string_view Number() {
    Peek();
    const size_t start = at_;
    auto digits = [&] {
      const size_t first = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      return at_ - first;
    };
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    const size_t integer_start = at_;
    const size_t integer_digits = digits();
    if (integer_digits == 0) Fail("expected a value but found " + Found());
    if (integer_digits > 1 && text_[integer_start] == '0') Fail("a number with a leading zero");
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      if (digits() == 0) Fail("a number without digits after its point");
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (digits() == 0) Fail("a number without digits in its exponent");
    }
    return text_.substr(start, at_ - start);
  }

  // Skips any value, nested at most kMaxDepth deep.
  void Skip(int depth = 0) {
    if (depth > kMaxDepth) Fail("nested more than " + std::to_string(kMaxDepth) + " deep");
    const char c = Peek();
    if (c == '{') {
      ++at_;
      if (Consume('}')) return;
      do {
        String();
        Expect(':');
        Skip(depth + 1);
      } while (Consume(','));
      Expect('}');
    } else if (c == '[') {
      ++at_;
      if (Consume(']')) return;
      do {
        Skip(depth + 1);
      } while (Consume(','));
      Expect(']');
    } else if (c == '"') {
      String();
    } else if (c == 't' || c == 'f' || c == 'n') {
      const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      if (text_.substr(at_, word.size()) != word) Fail("expected a value but found " + Found());
      at_ += word.size();
    } else {
      Number();
    }
  }

 private:
  static constexpr int kMaxDepth = 64;

  std::string Found() {
    if (Peek() == '\0') return "the end";
    return "'" + std::string(1, text_[at_]) + "'";
  }

  std::string_view text_;
  std::string source_;
  size_t at_ = 0;
};

// Reads the elements of a JSON array with `element(index)`.
template <typename ElementFunction>
void ReadArray(JsonCursor* json, ElementFunction element) {
  json->Expect('[');
  if (json->Consume(']')) return;
  size_t index = 0;
  do {
    element(index++);
  } while (json->Consume(','));
  json->Expect(']');
}

// Reads the members of a JSON object with `member(name)`, which reads or
// skips the value.
template <typename MemberFunction>
void ReadObject(JsonCursor* json, MemberFunction member) {
  json->Expect('{');
  if (json->Consume('}')) return;
  do {
    const std::string name = json->String();
    json->Expect(':');
    member(name);
  } while (json->Consume(','));
  json->Expect('}');
}

// An array of finite numbers, named `what` in messages.
std::vector<float> ReadNumbers(JsonCursor* json, size_t record, const std::string& what) {
  if (json->Peek() != '[') {
    BadRecord(record, what + " is " + json->KindOfNext() + ", not an array of numbers");
  }
  std::vector<float> numbers;
  ReadArray(json, [&](size_t i) {
    const char* kind = json->KindOfNext();
    if (std::strcmp(kind, "a number") != 0) {
      BadRecord(record, what + "[" + std::to_string(i) + "] is " + kind + ", not a number");
    }
    const std::string_view text = json->Number();
    float value;
    if (!ParseValue(text, &value)) {
      BadRecord(record, what + "[" + std::to_string(i) + "] is " + Quote(text) +
                            ", beyond float32's range");
    }
    numbers.push_back(value);
  });
  return numbers;
}

// An array of non-negative integers (indices, a shape), named `what`.
std::vector<uint64_t> ReadIndices(JsonCursor* json, size_t record, const std::string& what) {
  if (json->Peek() != '[') {
    BadRecord(record, what + " is " + json->KindOfNext() + ", not an array of indices");
  }
  std::vector<uint64_t> indices;
  ReadArray(json, [&](size_t i) {
    const bool number = std::strcmp(json->KindOfNext(), "a number") == 0;
    uint64_t index = 0;
    bool whole = false;
    if (number) {
      const std::string_view text = json->Number();
      const std::from_chars_result parsed =
          std::from_chars(text.data(), text.data() + text.size(), index);
      whole = parsed.ec == std::errc() && parsed.ptr == text.data() + text.size();
    }
    if (!whole) {
      BadRecord(record, what + "[" + std::to_string(i) + "] is not a non-negative integer");
    }
    indices.push_back(index);
  });
  return indices;
}

// The members of a features object or instance that make a record.
struct JsonRecord {
  bool has_values = false, has_keys = false;
  std::vector<float> values;
  std::vector<uint64_t> keys;
  uint64_t shape = 0;  // 0: none given
  bool added = false;  // the record was added through "features" or "data"
};

void ReadShape(JsonCursor* json, size_t record, JsonRecord* parts) {
  const std::vector<uint64_t> sizes = ReadIndices(json, record, "features.shape");
  if (sizes.size() > 1) BadRecord(record, "features.shape has more than one dimension");
  if (!sizes.empty() && sizes[0] == 0) BadRecord(record, "features.shape is [0]");
  if (!sizes.empty()) parts->shape = sizes[0];
}

// Adds the record of a sparse-form object's members (values, keys, shape).
void AddParts(size_t record, const JsonRecord& parts, RecordBuilder* builder) {
  if (!parts.has_values) BadRecord(record, "features has no \"values\"");
  if (!parts.has_keys) {
    if (parts.shape > 0 && parts.values.size() != parts.shape) {
      BadRecord(record, "dense features.values has " + std::to_string(parts.values.size()) +
                            " values but its shape holds " + std::to_string(parts.shape));
    }
    builder->Dense(record, parts.values);
    return;
  }
  builder->Sparse(record, parts.keys, parts.values, parts.shape);
}

// Reads one member of an object that may hold a features object's parts;
// false if `name` is not one of them.
bool ReadPart(JsonCursor* json, size_t record, const std::string& name, JsonRecord* parts) {
  if (name == "values") {
    parts->values = ReadNumbers(json, record, "features.values");
    parts->has_values = true;
  } else if (name == "keys") {
    parts->keys = ReadIndices(json, record, "features.keys");
    parts->has_keys = true;
  } else if (name == "shape") {
    ReadShape(json, record, parts);
  } else {
    return false;
  }
  return true;
}

// FEATURES: a dense array or the sparse {"keys", "values", "shape"} form.
void ReadFeatures(JsonCursor* json, size_t record, RecordBuilder* builder) {
  if (json->Peek() == '[') {
    builder->Dense(record, ReadNumbers(json, record, "features"));
    return;
  }
  if (json->Peek() != '{') {
    BadRecord(record, std::string("features is ") + json->KindOfNext() +
                          ", not an array or {\"keys\", \"values\", \"shape\"}");
  }
  JsonRecord parts;
  ReadObject(json, [&](const std::string& name) {
    if (!ReadPart(json, record, name, &parts)) json->Skip();
  });
  AddParts(record, parts, builder);
}

// {"features": F} inside "data".
void ReadData(JsonCursor* json, size_t record, RecordBuilder* builder, JsonRecord* parts) {
  if (json->Peek() != '{') BadRecord(record, "\"data\" is not an object");
  ReadObject(json, [&](const std::string& name) {
    if (name == "features" && !parts->added) {
      ReadFeatures(json, record, builder);
      parts->added = true;
    } else {
      json->Skip();
    }
  });
  if (!parts->added) BadRecord(record, "\"data\" has no \"features\"");
}

// The members of an instance object after its '{': {"features": F},
// {"data": {"features": F}} or the sparse form's members; at the top level
// (`instances` not null) "instances" too, whose records it reads instead.
void ReadInstanceMembers(JsonCursor* json, size_t record, RecordBuilder* builder, bool* instances);

void ReadInstances(JsonCursor* json, RecordBuilder* builder);

// INSTANCE: an object as above, or FEATURES.
void ReadInstance(JsonCursor* json, size_t record, RecordBuilder* builder) {
  if (json->Peek() != '{') {
    ReadFeatures(json, record, builder);
    return;
  }
  ReadInstanceMembers(json, record, builder, nullptr);
}

void ReadInstanceMembers(JsonCursor* json, size_t record, RecordBuilder* builder, bool* instances) {
  JsonRecord parts;
  ReadObject(json, [&](const std::string& name) {
    if (instances != nullptr && name == "instances" && !*instances) {
      ReadInstances(json, builder);
      *instances = true;
    } else if (name == "features" && !parts.added) {
      ReadFeatures(json, record, builder);
      parts.added = true;
    } else if (name == "data" && !parts.added) {
      ReadData(json, record, builder, &parts);
    } else if (!ReadPart(json, record, name, &parts)) {
      json->Skip();
    }
  });
  if (instances != nullptr && *instances) {
    if (parts.added || parts.has_values || parts.has_keys) {
      throw InferenceRequestError(
          400,
          "the request has \"instances\" and also a record's own \"features\", "
          "\"data\" or \"values\": put every record in \"instances\"");
    }
    return;
  }
  if (parts.added) return;
  if (parts.has_values || parts.has_keys) {
    AddParts(record, parts, builder);
    return;
  }
  BadRecord(record, "the instance has neither \"features\" nor \"data\"");
}

void ReadInstances(JsonCursor* json, RecordBuilder* builder) {
  if (json->Peek() != '[') {
    throw InferenceRequestError(
        400, std::string("\"instances\" is ") + json->KindOfNext() + ", not an array");
  }
  ReadArray(json, [&](size_t i) { ReadInstance(json, i + 1, builder); });
}

void DecodeJson(std::string_view body, RecordBuilder* builder) {
  if (Trim(body).empty()) return;
  JsonCursor json(body, "the request's JSON");
  if (json.Peek() == '{') {
    bool instances = false;
    ReadInstanceMembers(&json, 1, builder, &instances);
  } else if (json.Peek() == '[') {
    // A bare array of numbers is one dense record; else an array of instances.
    JsonCursor ahead = json;
    ahead.Expect('[');
    const bool numbers = std::strcmp(ahead.KindOfNext(), "a number") == 0 && ahead.Peek() != ']';
    if (numbers) {
      builder->Dense(1, ReadNumbers(&json, 1, "features"));
    } else {
      ReadInstances(&json, builder);
    }
  } else {
    json.Fail(std::string("expected {\"instances\": [...]} but found ") + json.KindOfNext());
  }
  json.ExpectEnd();
}

void DecodeJsonLines(std::string_view body, RecordBuilder* builder) {
  size_t record = 0;
  ForEachLine(body, [&](size_t line, std::string_view text) {
    ++record;
    OnLine(record, line, [&] {
      JsonCursor json(text,
                      "record " + std::to_string(record) + " (line " + std::to_string(line) + ")");
      ReadInstance(&json, record, builder);
      json.ExpectEnd();
    });
  });
}

// The payloads of the RecordIO records in `body`, multi-part ones joined.
std::vector<std::string> RecordIOPayloads(std::string_view body) {
  std::vector<std::string> payloads;
  std::string joined;
  bool in_parts = false;
  size_t at = 0;
  while (at < body.size()) {
    const size_t record = payloads.size() + 1;
    if (body.size() - at < 8)
      BadRecord(record, "truncated RecordIO header at byte " + std::to_string(at));
    uint32_t magic, lrecord;
    std::memcpy(&magic, body.data() + at, 4);
    std::memcpy(&lrecord, body.data() + at + 4, 4);
    if (magic != kRecordIOMagic) {
      BadRecord(record, "no RecordIO magic at byte " + std::to_string(at));
    }
    const uint32_t flag = lrecord >> 29;
    const size_t length = lrecord & ((1u << 29) - 1);
    const size_t padded = (length + 3) / 4 * 4;
    if (body.size() - at - 8 < length) {
      BadRecord(record, "RecordIO record at byte " + std::to_string(at) + " holds " +
                            std::to_string(length) + " bytes, past the body's end");
    }
    const std::string_view part = body.substr(at + 8, length);
    at += 8 + std::min(padded, body.size() - at - 8);
    if (flag == 0 && !in_parts) {
      payloads.emplace_back(part);
    } else if (flag == 1 && !in_parts) {
      joined.assign(part);
      in_parts = true;
    } else if ((flag == 2 || flag == 3) && in_parts) {
      const uint32_t restored = kRecordIOMagic;
      joined.append(reinterpret_cast<const char*>(&restored), 4);
      joined.append(part);
      if (flag == 3) {
        payloads.push_back(std::move(joined));
        joined.clear();
        in_parts = false;
      }
    } else {
      BadRecord(record, "RecordIO part with flag " + std::to_string(flag) + " out of order");
    }
  }
  if (in_parts) BadRecord(payloads.size() + 1, "the body ends inside a multi-part record");
  return payloads;
}

void DecodeRecordIO(std::string_view body, RecordBuilder* builder) {
  const std::vector<std::string> payloads = RecordIOPayloads(body);
  aialgs::data::Record record;
  for (size_t i = 0; i < payloads.size(); ++i) {
    const size_t number = i + 1;
    if (payloads[i].size() > INT_MAX || !record.ParseFromString(payloads[i])) {
      BadRecord(number, "the payload is not a valid aialgs.data.Record protobuf");
    }
    const auto found = record.features().find("values");
    if (found == record.features().end())
      BadRecord(number, "the record has no features[\"values\"]");
    if (!found->second.has_float32_tensor()) {
      BadRecord(number, "features[\"values\"] is not a float32_tensor");
    }
    const aialgs::data::Float32Tensor& tensor = found->second.float32_tensor();
    std::vector<float> values(tensor.values().begin(), tensor.values().end());
    for (size_t j = 0; j < values.size(); ++j) {
      if (!std::isfinite(values[j])) {
        BadRecord(number, "features[\"values\"][" + std::to_string(j) + "] is not finite");
      }
    }
    uint64_t shape = 0;
    if (tensor.shape_size() > 1)
      BadRecord(number, "the features' shape has more than one dimension");
    if (tensor.shape_size() == 1) shape = tensor.shape(0);
    if (tensor.keys_size() == 0 && !values.empty()) {
      if (shape > 0 && !values.empty() && shape != values.size()) {
        BadRecord(number, "dense features[\"values\"] has " + std::to_string(values.size()) +
                              " values but its shape holds " + std::to_string(shape));
      }
      builder->Dense(number, values);
    } else {
      builder->Sparse(number, std::vector<uint64_t>(tensor.keys().begin(), tensor.keys().end()),
                      values, shape);
    }
  }
}

void AppendScore(float score, std::string* out);

// A score in JSON: a non-finite one (a regressor's overflow) is null, which
// JSON has for it.
void AppendJsonScore(float score, std::string* out) {
  if (std::isfinite(score)) {
    AppendScore(score, out);
  } else {
    out->append("null");
  }
}

void AppendScore(float score, std::string* out) {
  // The text of printf's "%.7g" (to_chars with a precision is specified as
  // printf), at a quarter of snprintf's time: a multiclass model writes every
  // class's score of every record.
  char text[32];
  const std::to_chars_result end =
      std::to_chars(text, text + sizeof(text), score, std::chars_format::general, 7);
  out->append(text, static_cast<size_t>(end.ptr - text));
}

// P of the JSON formats: {"score": ..., "predicted_label": ...}. Written by
// hand rather than through base/json.h's JsonObject: it runs for every scored
// record, and a JsonObject's temporary strings made encoding 1.7-2.8 times as
// slow (10^6 binary and 2x10^5 10-class predictions, the encoder alone).
void AppendJsonPrediction(const Predictions& p, size_t r, std::string* out) {
  const float* scores = p.scores.data() + r * p.width;
  out->append("{\"score\":");
  if (p.kind == Predictions::Kind::kMulticlass) {
    out->push_back('[');
    for (int c = 0; c < p.width; ++c) {
      if (c > 0) out->push_back(',');
      AppendJsonScore(scores[c], out);
    }
    out->push_back(']');
  } else {
    AppendJsonScore(scores[0], out);
  }
  if (p.kind != Predictions::Kind::kRegressor) {
    out->append(",\"predicted_label\":");
    out->append(std::to_string(p.labels[r]));
  }
  out->push_back('}');
}

void AppendCsvPrediction(const Predictions& p, size_t r, std::string* out) {
  const float* scores = p.scores.data() + r * p.width;
  if (p.kind != Predictions::Kind::kRegressor) {
    out->append(std::to_string(p.labels[r]));
    out->push_back(',');
  }
  for (int c = 0; c < p.width; ++c) {
    if (c > 0) out->push_back(',');
    AppendScore(scores[c], out);
  }
  out->push_back('\n');
}

// Writes record `r`'s prediction as a recordIO Record with `writer`.
void WriteRecordIOPrediction(const Predictions& p, size_t r, aialgs::data::Record* record,
                             RecordIOWriter* writer) {
  record->Clear();
  auto& score = *(*record->mutable_label())["score"].mutable_float32_tensor();
  for (int c = 0; c < p.width; ++c) score.add_values(p.scores[r * p.width + c]);
  if (p.kind != Predictions::Kind::kRegressor) {
    (*record->mutable_label())["predicted_label"].mutable_float32_tensor()->add_values(
        static_cast<float>(p.labels[r]));
  }
  writer->Write(*record);
}

void AppendRecordIOPredictions(const Predictions& p, std::string* out) {
  std::ostringstream stream;
  RecordIOWriter writer(&stream);
  aialgs::data::Record record;
  for (size_t r = 0; r < p.records(); ++r) WriteRecordIOPrediction(p, r, &record, &writer);
  writer.Flush();
  out->append(stream.str());
}

}  // namespace

const char* ContentTypeOf(InferenceFormat format) {
  switch (format) {
    case InferenceFormat::kCsv:
      return "text/csv";
    case InferenceFormat::kLibsvm:
      return "text/libsvm";
    case InferenceFormat::kJson:
      return "application/json";
    case InferenceFormat::kJsonLines:
      return "application/jsonlines";
    case InferenceFormat::kRecordIO:
      return "application/x-recordio-protobuf";
  }
  return "?";
}

InferenceFormat ParseContentType(const std::string& content_type) {
  InferenceFormat format;
  if (FormatOfType(MediaType(content_type), &format)) return format;
  throw InferenceRequestError(
      415, (content_type.empty() ? std::string("no Content-Type given")
                                 : "unsupported Content-Type " + Quote(content_type)) +
               ": supported are " + kSupportedRequestTypes);
}

InferenceFormat ParseAccept(const std::string& accept, InferenceFormat fallback) {
  if (Trim(accept).empty()) return fallback;
  struct Choice {
    double q;
    size_t order;
    std::string type;
  };
  std::vector<Choice> choices;
  std::string_view rest = accept;
  for (size_t order = 0; !rest.empty(); ++order) {
    const size_t comma = rest.find(',');
    const std::string_view element = rest.substr(0, comma);
    rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    double q = 1;
    for (std::string_view rest_of = element.substr(std::min(element.size(), element.find(';')));
         !rest_of.empty();) {
      rest_of.remove_prefix(1);  // the ';'
      const std::string_view parameter = Trim(rest_of.substr(0, rest_of.find(';')));
      rest_of.remove_prefix(std::min(rest_of.size(), rest_of.find(';')));
      if (parameter.size() > 2 && (parameter[0] == 'q' || parameter[0] == 'Q') &&
          Trim(parameter.substr(1)).front() == '=') {
        const std::string text(Trim(Trim(parameter.substr(1)).substr(1)));
        char* end = nullptr;
        const double parsed = std::strtod(text.c_str(), &end);
        if (end != text.c_str()) q = parsed;
      }
    }
    if (q > 0) choices.push_back({q, order, MediaType(element)});
  }
  std::stable_sort(choices.begin(), choices.end(),
                   [](const Choice& a, const Choice& b) { return a.q > b.q; });
  for (const Choice& choice : choices) {
    if (choice.type == "*/*" || choice.type == "application/*") return fallback;
    if (choice.type == "text/*") return InferenceFormat::kCsv;
    InferenceFormat format;
    if (FormatOfType(choice.type, &format) && format != InferenceFormat::kLibsvm) return format;
  }
  throw InferenceRequestError(406, "no supported response type in Accept " + Quote(accept) +
                                       ": supported are " + kSupportedResponseTypes);
}

InferenceFormat ParseFormatName(const std::string& name) {
  const std::string lower = Lower(name);
  if (lower == "csv") return InferenceFormat::kCsv;
  if (lower == "libsvm") return InferenceFormat::kLibsvm;
  if (lower == "json") return InferenceFormat::kJson;
  if (lower == "jsonlines") return InferenceFormat::kJsonLines;
  if (lower == "recordio" || lower == "recordio-protobuf") return InferenceFormat::kRecordIO;
  InferenceFormat format;
  if (FormatOfType(MediaType(lower), &format)) return format;
  throw MakeError("unknown format '", name,
                  "': use csv, json, jsonlines or recordio (or their content types)");
}

void DecodeRecords(InferenceFormat format, std::string_view body, const InferenceInput& input,
                   Batch* batch) {
  // A UTF-8 byte order mark (some editors and clients write one) is not data.
  if (format != InferenceFormat::kRecordIO && body.substr(0, 3) == "\xEF\xBB\xBF") {
    body.remove_prefix(3);
  }
  const size_t labels = batch->labels.size(), rows = batch->row_offsets.size(),
               nonzeros = batch->indices.size();
  try {
    RecordBuilder builder(input, batch);
    switch (format) {
      case InferenceFormat::kCsv:
        DecodeCsv(body, &builder);
        break;
      case InferenceFormat::kLibsvm:
        DecodeLibsvm(body, input, &builder);
        break;
      case InferenceFormat::kJson:
        DecodeJson(body, &builder);
        break;
      case InferenceFormat::kJsonLines:
        DecodeJsonLines(body, &builder);
        break;
      case InferenceFormat::kRecordIO:
        DecodeRecordIO(body, &builder);
        break;
    }
  } catch (const InferenceRequestError&) {
    batch->labels.resize(labels);
    batch->row_offsets.resize(rows);
    batch->indices.resize(nonzeros);
    batch->values.resize(nonzeros);
    throw;
  }
}

void EncodePredictions(InferenceFormat format, const Predictions& predictions, std::string* out) {
  const size_t records = predictions.records();
  switch (format) {
    case InferenceFormat::kJson:
      out->append("{\"predictions\":[");
      for (size_t r = 0; r < records; ++r) {
        if (r > 0) out->push_back(',');
        AppendJsonPrediction(predictions, r, out);
      }
      out->append("]}\n");
      return;
    case InferenceFormat::kJsonLines:
      for (size_t r = 0; r < records; ++r) {
        AppendJsonPrediction(predictions, r, out);
        out->push_back('\n');
      }
      return;
    case InferenceFormat::kCsv:
      for (size_t r = 0; r < records; ++r) AppendCsvPrediction(predictions, r, out);
      return;
    case InferenceFormat::kRecordIO:
      AppendRecordIOPredictions(predictions, out);
      return;
    case InferenceFormat::kLibsvm:
      break;
  }
  throw MakeError("text/libsvm is a request format, not a response format");
}

PredictionWriter::PredictionWriter(InferenceFormat format, std::ostream* out)
    : format_(format), out_(out) {
  if (format == InferenceFormat::kLibsvm) {
    throw MakeError("text/libsvm is a request format, not a response format");
  }
  if (format == InferenceFormat::kRecordIO) recordio_ = std::make_unique<RecordIOWriter>(out);
  if (format == InferenceFormat::kJson) buffer_ = "{\"predictions\":[";
}

PredictionWriter::~PredictionWriter() = default;

void PredictionWriter::Write(const Predictions& predictions) {
  aialgs::data::Record record;
  for (size_t r = 0; r < predictions.records(); ++r, ++written_) {
    switch (format_) {
      case InferenceFormat::kJson:
        if (written_ > 0) buffer_.push_back(',');
        AppendJsonPrediction(predictions, r, &buffer_);
        break;
      case InferenceFormat::kJsonLines:
        AppendJsonPrediction(predictions, r, &buffer_);
        buffer_.push_back('\n');
        break;
      case InferenceFormat::kCsv:
        AppendCsvPrediction(predictions, r, &buffer_);
        break;
      case InferenceFormat::kRecordIO:
        WriteRecordIOPrediction(predictions, r, &record, recordio_.get());
        break;
      case InferenceFormat::kLibsvm:
        break;
    }
    if (buffer_.size() >= kFlushBytes) Flush();
  }
}

void PredictionWriter::Finish() {
  if (format_ == InferenceFormat::kJson) buffer_.append("]}\n");
  Flush();
  if (recordio_) recordio_->Flush();
  out_->flush();
  if (!*out_) throw MakeError("cannot write the predictions");
}

void PredictionWriter::Flush() {
  out_->write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  buffer_.clear();
  if (!*out_) throw MakeError("cannot write the predictions");
}

}  // namespace keel
