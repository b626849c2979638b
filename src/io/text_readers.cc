// The text formats, libsvm and csv (io/readers.h): lines cut from large
// blocks and parsed in place, with a fast path for plain decimals.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "io/decimal.h"
#include "io/format_readers.h"

namespace keel {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

const char* SkipSpace(const char* p, const char* end) {
  while (p != end && IsSpace(*p)) ++p;
  return p;
}

const char* FindSpace(const char* p, const char* end) {
  while (p != end && !IsSpace(*p)) ++p;
  return p;
}

// The text in [begin, end) in quotes, shortened if long: for messages.
std::string Quote(const char* begin, const char* end) {
  constexpr size_t kLongest = 40;
  const size_t length = static_cast<size_t>(end - begin);
  if (length <= kLongest) return "'" + std::string(begin, length) + "'";
  return "'" + std::string(begin, kLongest) + "...'";
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The lines of a text split: those starting in [begin, end). Reads in large
// blocks; a returned line points into the block buffer.
class LineSource {
 public:
  explicit LineSource(const InputSplit& split, size_t block_size = size_t{4} << 20)
      : split_(split),
        source_(split.path, split.is_pipe, split.is_pipe || split.begin == 0 ? 0 : split.begin - 1,
                block_size),
        end_(split.is_pipe ? UINT64_MAX : split.end) {}

  // Sets [*begin, *end) to the next line, without its "\n" or "\r\n", and
  // returns true; false at the end of the split. Valid until the next call.
  bool NextLine(const char** begin, const char** end) {
    source_.Consume(pending_);
    bytes_read_ += pending_;
    pending_ = 0;
    if (!started_) {
      started_ = true;
      // A line starts at 0 or after a '\n': the one holding byte begin - 1
      // belongs to the previous split.
      if (!split_.is_pipe && split_.begin > 0) source_.Consume(LineLength(true));
      first_line_offset_ = source_.position();
    }
    if (source_.position() >= end_) return false;
    const size_t length = LineLength(false);
    if (length == 0 && source_.size() == 0) return false;
    *begin = source_.data();
    *end = *begin + length;
    pending_ = std::min(length + 1, source_.size());
    if (*end != *begin && (*end)[-1] == '\r') --*end;
    ++lines_;
    return true;
  }

  // The 1-based line number, counted from the file's start, of the line last
  // returned. For a split not starting at 0 this reads the file up to it.
  uint64_t LineNumber() {
    if (newlines_before_ < 0) newlines_before_ = CountNewlinesBefore(first_line_offset_);
    return static_cast<uint64_t>(newlines_before_) + lines_;
  }

  uint64_t bytes_read() const { return bytes_read_ + pending_; }
  const InputSplit& split() const { return split_; }

 private:
  // The length of the buffered line (reading until its '\n' or the end of the
  // input), with its '\n' if `with_newline` and there is one.
  size_t LineLength(bool with_newline) {
    size_t searched = 0;
    for (;;) {
      const void* newline = std::memchr(source_.data() + searched, '\n', source_.size() - searched);
      if (newline != nullptr) {
        const size_t length = static_cast<const char*>(newline) - source_.data();
        return with_newline ? length + 1 : length;
      }
      searched = source_.size();
      if (!source_.Fill(searched + 1)) return source_.size();
    }
  }

  int64_t CountNewlinesBefore(uint64_t offset) const {
    if (offset == 0) return 0;
    BlockReader file(split_.path, false, 0, size_t{1} << 20);
    int64_t newlines = 0;
    uint64_t left = offset;
    while (left > 0 && file.Fill(1)) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(left, file.size()));
      newlines += std::count(file.data(), file.data() + chunk, '\n');
      file.Consume(chunk);
      left -= chunk;
    }
    return newlines;
  }

  InputSplit split_;
  BlockReader source_;
  uint64_t end_;
  bool started_ = false;
  size_t pending_ = 0;  // the bytes of the line last returned, with its '\n'
  uint64_t first_line_offset_ = 0;
  uint64_t lines_ = 0;  // lines returned so far
  int64_t newlines_before_ = -1;
  uint64_t bytes_read_ = 0;
};

// The text formats: one example per line.
class TextReader : public ExampleReader {
 public:
  TextReader(const InputSplit& split, const ReaderOptions& options)
      : options_(options), lines_(split, options.block_size) {}

  size_t Read(size_t max_rows, Batch* batch) override {
    if (batch->rows() == 0) {
      batch->label_width = 1;
    } else if (batch->label_width != 1) {
      throw MakeError(lines_.split().Describe(),
                      ": cannot add rows with one label to a batch with ", batch->label_width,
                      " labels per row");
    }
    size_t rows = 0;
    const char* begin;
    const char* end;
    while (rows < max_rows && lines_.NextLine(&begin, &end)) {
      const size_t labels = batch->labels.size();
      const size_t features = batch->indices.size();
      switch (ParseLine(begin, end, batch)) {
        case LineResult::kRow:
          ++rows;
          break;
        case LineResult::kBlank:
          break;
        case LineResult::kBad:
          batch->labels.resize(labels);
          batch->indices.resize(features);
          batch->values.resize(features);
          if (!options_.skip_bad_records) {
            throw MakeError(lines_.split().path, ":", lines_.LineNumber(), ": ", problem_);
          }
          ++skipped_records_;
          break;
      }
    }
    return rows;
  }

  uint64_t skipped_records() const override { return skipped_records_; }
  uint64_t bytes_read() const override { return lines_.bytes_read(); }

 protected:
  enum class LineResult { kRow, kBlank, kBad };

  // Appends the example of the line [begin, end) to *batch (labels, indices
  // and values; then its row offset) and returns kRow; or kBlank for a line
  // without an example; or kBad, with problem_ set (the caller removes what
  // was appended).
  virtual LineResult ParseLine(const char* begin, const char* end, Batch* batch) = 0;

  // Parses a whole number for ParseLine; on failure sets problem_.
  bool ParseNumber(const char* begin, const char* end, const char* what, float* value) {
    if (!ParseFloat(begin, end, value)) {
      problem_ = std::string(what) + " " + Quote(begin, end) + " is not a number";
      return false;
    }
    if (!std::isfinite(*value)) {
      problem_ = std::string(what) + " " + Quote(begin, end) + " is not finite";
      return false;
    }
    return true;
  }

  // Applies the label rule (io/readers.h) to a parsed label; on failure sets
  // problem_. One branch for regression.
  bool AllowLabel(float* label) {
    return options_.labels == LabelRule::kFinite || CheckLabel(options_, label, &problem_);
  }

  const ReaderOptions options_;
  std::string problem_;

 private:
  LineSource lines_;
  uint64_t skipped_records_ = 0;
};

class LibsvmReader : public TextReader {
 public:
  LibsvmReader(const InputSplit& split, const ReaderOptions& options)
      : TextReader(split, options), first_index_(options.zero_based ? 0 : 1) {}

 private:
  LineResult ParseLine(const char* begin, const char* end, Batch* batch) override {
    if (const void* comment = std::memchr(begin, '#', end - begin)) {
      end = static_cast<const char*>(comment);
    }
    const char* token = SkipSpace(begin, end);
    if (token == end) return LineResult::kBlank;
    const char* token_end = token;
    if (options_.labelled) {
      token_end = FindSpace(token, end);
      if (std::memchr(token, ':', token_end - token) != nullptr) {
        problem_ = "missing label: the line starts with feature " + Quote(token, token_end);
        return LineResult::kBad;
      }
      float label;
      if (!ParseNumber(token, token_end, "label", &label) || !AllowLabel(&label)) {
        return LineResult::kBad;
      }
      batch->labels.push_back(label);
    } else {
      batch->labels.push_back(0.0f);
    }
    for (token = SkipSpace(token_end, end); token != end; token = SkipSpace(token_end, end)) {
      if (AppendPlainFeature(token, end, batch, &token_end)) continue;
      token_end = FindSpace(token, end);
      const auto* colon = static_cast<const char*>(std::memchr(token, ':', token_end - token));
      if (colon == nullptr) {
        problem_ = "feature " + Quote(token, token_end) + " has no ':' (expected index:value)";
        return LineResult::kBad;
      }
      if (colon - token == 3 && std::memcmp(token, "qid", 3) == 0) continue;
      uint64_t index;
      const std::from_chars_result parsed = std::from_chars(token, colon, index);
      if (parsed.ec != std::errc() || parsed.ptr != colon || token == colon) {
        problem_ = "feature index " + Quote(token, colon) + " is not a non-negative integer";
        return LineResult::kBad;
      }
      if (index < first_index_) {
        problem_ =
            "feature index 0 is below 1, the first index (for 0-based indices, set "
            "--libsvm_zero_based)";
        return LineResult::kBad;
      }
      if (options_.feature_dim > 0 && index - first_index_ >= options_.feature_dim) {
        problem_ = "feature index " + std::to_string(index) + " is out of range: feature_dim " +
                   std::to_string(options_.feature_dim) + " allows " +
                   std::to_string(first_index_) + " to " +
                   std::to_string(options_.feature_dim - 1 + first_index_);
        return LineResult::kBad;
      }
      float value;
      if (!ParseNumber(colon + 1, token_end, "feature value", &value)) return LineResult::kBad;
      batch->indices.push_back(index - first_index_);
      batch->values.push_back(value);
    }
    batch->row_offsets.push_back(batch->indices.size());
    return LineResult::kRow;
  }

  // The fast path for the common token, "index:value" with a plain decimal
  // value and a valid index: appends it, sets *token_end and returns true.
  // Returns false for anything else, which the general path then handles.
  bool AppendPlainFeature(const char* token, const char* end, Batch* batch,
                          const char** token_end) {
    uint64_t index = 0;
    const char* p = token;
    for (; p != end && IsDigit(*p) && p - token < 19; ++p) index = index * 10 + (*p - '0');
    if (p == token || p == end || *p != ':' || index < first_index_) return false;
    index -= first_index_;
    if (options_.feature_dim > 0 && index >= options_.feature_dim) return false;
    float value;
    const char* value_end = ParsePlainDecimal(p + 1, end, &value);
    if (value_end == nullptr || (value_end != end && !IsSpace(*value_end))) return false;
    batch->indices.push_back(index);
    batch->values.push_back(value);
    *token_end = value_end;
    return true;
  }

  const uint64_t first_index_;
};

class CsvReader : public TextReader {
 public:
  CsvReader(const InputSplit& split, const ReaderOptions& options) : TextReader(split, options) {
    // Rows must match the file's first row, which an earlier split may hold.
    if (!split.is_pipe && split.begin > 0) {
      LineSource file(InputSplit{split.path, 0, UINT64_MAX, false, 0, ""}, size_t{64} << 10);
      const char* begin;
      const char* end;
      while (columns_ == 0 && file.NextLine(&begin, &end)) columns_ = CountColumns(begin, end);
      if (columns_ > 0 && !options.labelled) ++columns_;
    }
  }

 private:
  // The number of columns of a row; 0 for a blank line.
  static size_t CountColumns(const char* begin, const char* end) {
    if (SkipSpace(begin, end) == end) return 0;
    return 1 + static_cast<size_t>(std::count(begin, end, ','));
  }

  LineResult ParseLine(const char* begin, const char* end, Batch* batch) override {
    if (SkipSpace(begin, end) == end) return LineResult::kBlank;
    if (columns_ == 0) columns_ = CountColumns(begin, end) + (options_.labelled ? 0 : 1);
    if (options_.feature_dim > 0 && columns_ - 1 > options_.feature_dim) {
      problem_ = "the rows have " + std::to_string(columns_ - 1) +
                 " features, more than feature_dim " + std::to_string(options_.feature_dim);
      return LineResult::kBad;
    }
    // Unlabelled rows are read as if a label column came first.
    const size_t skipped = options_.labelled ? 0 : 1;
    if (!options_.labelled) batch->labels.push_back(0.0f);
    size_t column = skipped;
    for (const char* field = begin;; ++column) {
      if (column >= columns_) {
        problem_ =
            "the row has more columns than the first row's " + std::to_string(columns_ - skipped);
        return LineResult::kBad;
      }
      float value;
      const char* field_end = ParsePlainDecimal(field, end, &value);  // the fast path
      if (field_end == nullptr || (field_end != end && *field_end != ',')) {
        const auto* comma = static_cast<const char*>(std::memchr(field, ',', end - field));
        field_end = comma != nullptr ? comma : end;
        const char* number = SkipSpace(field, field_end);
        const char* number_end = field_end;
        while (number_end != number && IsSpace(number_end[-1])) --number_end;
        if (!ParseNumber(number, number_end, column == 0 ? "label" : "feature value", &value)) {
          if (column > 0) {
            problem_ = "column " + std::to_string(column + 1 - skipped) + ": " + problem_;
          }
          return LineResult::kBad;
        }
      }
      if (column == 0) {
        if (!AllowLabel(&value)) return LineResult::kBad;
        batch->labels.push_back(value);
      } else {
        batch->indices.push_back(column - 1);
        batch->values.push_back(value);
      }
      if (field_end == end) break;
      field = field_end + 1;
    }
    if (column + 1 != columns_) {
      problem_ = "the row has " + std::to_string(column + 1 - skipped) +
                 " columns, the first row has " + std::to_string(columns_ - skipped);
      return LineResult::kBad;
    }
    batch->row_offsets.push_back(batch->indices.size());
    return LineResult::kRow;
  }

  size_t columns_ = 0;  // of the file's first row; 0 until known
};

}  // namespace

std::unique_ptr<ExampleReader> OpenLibsvmReader(const InputSplit& split,
                                                const ReaderOptions& options) {
  return std::make_unique<LibsvmReader>(split, options);
}

std::unique_ptr<ExampleReader> OpenCsvReader(const InputSplit& split,
                                             const ReaderOptions& options) {
  return std::make_unique<CsvReader>(split, options);
}

}  // namespace keel
