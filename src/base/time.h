// Clocks: a monotonic one for deadlines and durations, the wall clock for
// timestamps that leave the process (logs, event files, node id blocks).
#ifndef KEEL_BASE_TIME_H_
#define KEEL_BASE_TIME_H_

#include <cstdint>
#include <string>

namespace keel {

// Nanoseconds and seconds on a monotonic clock: never goes back, unrelated to
// the date. For deadlines and durations.
int64_t MonotonicNanos();
double MonotonicSeconds();

// Seconds and milliseconds since the Unix epoch, on the wall clock.
double WallSeconds();
int64_t WallMillis();
// The wall clock's time in UTC, ISO 8601 to the second: "2026-11-23T12:45:46Z".
std::string UtcTimestamp();

}  // namespace keel

#endif  // KEEL_BASE_TIME_H_
