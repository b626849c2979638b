// Text that must be valid UTF-8: proto3 `string` fields (a message with an
// invalid one does not parse at the receiver, so it is lost) and the reports
// that carry an error from one node to another. An error text may quote its
// input, and input can be anything (binary junk read as libsvm).
#ifndef KEEL_BASE_UTF8_H_
#define KEEL_BASE_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace keel {

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF): what a proto3 string field accepts.
bool IsValidUtf8(std::string_view text);

// `text` with every byte that is not part of a well-formed UTF-8 sequence
// written as the four characters \xNN (upper-case hex); valid text comes back
// unchanged. The result is always valid UTF-8 and still names the bytes.
std::string ValidUtf8(std::string_view text);

// Appends code point `code` (at most U+10FFFF; the caller checks) to `out`
// as UTF-8.
void AppendUtf8(uint32_t code, std::string* out);

}  // namespace keel

#endif  // KEEL_BASE_UTF8_H_
