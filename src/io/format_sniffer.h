// What a data file's first bytes say about its format (io/readers.h), so that
// a job whose --data_format is not given reads its data right, and one whose
// --data_format is wrong is told which to set instead of failing on the first
// record.
#ifndef KEEL_IO_FORMAT_SNIFFER_H_
#define KEEL_IO_FORMAT_SNIFFER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "io/readers.h"

namespace keel {

struct SniffedFormat {
  // None when the bytes do not tell: an empty file, lines of one column, or
  // binary bytes without recordIO's magic number.
  std::optional<DataFormat> format;
  // What gave it away, for messages: "recordIO's magic number", "index:value
  // pairs", "commas".
  std::string evidence;
};

// The format `head`, a file's first bytes, looks like: recordIO-protobuf if
// it starts with recordIO's magic number (0xced7230a, little-endian); else,
// in its first line that is not blank or a # comment, libsvm if the token
// after the label is an index:value pair, csv if the line has a comma.
SniffedFormat SniffDataFormat(std::string_view head);

// The first `bytes` bytes of the file or storage object at `path` (all of it
// if shorter). Throws Error naming the path if it cannot be read.
std::string ReadHead(const std::string& path, size_t bytes);

}  // namespace keel

#endif  // KEEL_IO_FORMAT_SNIFFER_H_
