#include "io/format_sniffer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "io/input_split.h"
#include "io/recordio.h"

namespace keel {
namespace {

bool StartsWithRecordIOMagic(std::string_view head) {
  if (head.size() < 4) return false;
  const auto* b = reinterpret_cast<const unsigned char*>(head.data());
  const uint32_t word =
      uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
  return word == kRecordIOMagic;
}

// The first line of `head` that is not blank or a # comment, without its
// end; empty if there is none.
std::string_view FirstDataLine(std::string_view head) {
  while (!head.empty()) {
    const size_t end = std::min(head.find('\n'), head.size());
    std::string_view line = head.substr(0, end);
    head.remove_prefix(std::min(end + 1, head.size()));
    const size_t start = line.find_first_not_of(" \t\r");
    if (start != std::string_view::npos && line[start] != '#') return line.substr(start);
  }
  return {};
}

// Whether `token` is "DIGITS:..." (a libsvm feature, or qid:N).
bool IsIndexValuePair(std::string_view token) {
  const size_t colon = token.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view index = token.substr(0, colon);
  return index == "qid" || std::all_of(index.begin(), index.end(), [](char c) {
           return isdigit(static_cast<unsigned char>(c)) != 0;
         });
}

// The token after the first (the label) in `line`, split at spaces and tabs.
std::string_view SecondToken(std::string_view line) {
  const size_t label_end = line.find_first_of(" \t");
  if (label_end == std::string_view::npos) return {};
  const size_t start = line.find_first_not_of(" \t", label_end);
  if (start == std::string_view::npos) return {};
  const size_t end = line.find_first_of(" \t\r", start);
  return line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

}  // namespace

SniffedFormat SniffDataFormat(std::string_view head) {
  if (StartsWithRecordIOMagic(head)) return {DataFormat::kRecordIO, "recordIO's magic number"};
  const std::string_view line = FirstDataLine(head);
  if (IsIndexValuePair(SecondToken(line))) return {DataFormat::kLibsvm, "index:value pairs"};
  if (line.find(',') != std::string_view::npos) return {DataFormat::kCsv, "commas"};
  return {std::nullopt, ""};
}

std::string ReadHead(const std::string& path, size_t bytes) {
  BlockReader reader(path, false, 0, std::max<size_t>(bytes, 4096));
  reader.Fill(bytes);
  return std::string(reader.data(), std::min(bytes, reader.size()));
}

}  // namespace keel
