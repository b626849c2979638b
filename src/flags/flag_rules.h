// Range rules for the command line's flags, shared by every flag family
// (cli/*_flags.cc). Each throws Error naming the flag, its value and the rule
// it breaks ("--drop_rate 2 is not in [0, 1]"), and accepts NaN nowhere.
#ifndef KEEL_FLAGS_FLAG_RULES_H_
#define KEEL_FLAGS_FLAG_RULES_H_

#include <string>

#include "base/error.h"

namespace keel {

// The most of each role a cluster may have (--num_servers, --servers,
// --num_workers, --workers, a hostfile's servers=/workers=): far above any
// job Keel runs, low enough that a typo (--workers=100000) is refused before
// it starts a process or sizes a table by it.
constexpr int kMaxServers = 1024;
constexpr int kMaxWorkers = 4096;
// The most of anything else a count flag counts (minibatches, checkpoints).
constexpr int kMaxCount = 1000000000;
// The longest any timeout or duration flag may be, in seconds (about 115
// days): waits beyond it overflow a clock's time point.
constexpr double kMaxSeconds = 1e7;

// `value` of --`flag` must be in [low, high]; `why`, if given, follows the
// rule after a colon.
template <typename T>
void RequireInRange(const char* flag, T value, T low, T high, const std::string& why = "") {
  if (value >= low && value <= high) return;
  throw MakeError("--", flag, " ", value, " is not in [", low, ", ", high, "]",
                  why.empty() ? "" : ": ", why);
}

// `value` of --`flag` must be above 0 and at most `high`.
template <typename T>
void RequirePositive(const char* flag, T value, T high) {
  if (value > 0 && value <= high) return;
  throw MakeError("--", flag, " must be positive and at most ", high, ", not ", value);
}

// `text` as a decimal integer in [low, high] (strtoll's syntax, nothing
// after the digits) into `*value`; false, and `*value` unchanged, if it is
// not one.
bool ParseIntegerInRange(const std::string& text, long long low, long long high, long long* value);

// `value` of --`flag` must be valid UTF-8: it travels in a proto3 string
// field (an address, a checkpoint's URI), which a receiver refuses otherwise.
void RequireUtf8(const char* flag, const std::string& value);

}  // namespace keel

#endif  // KEEL_FLAGS_FLAG_RULES_H_
