// StallMeter: how late this process's threads ran while it measured, for
// tests whose premise is a machine that runs them on time (an answer within
// a resend timeout, a heartbeat within half the heartbeat timeout). A thread
// sleeps 2 ms at a time and records how much later than asked it woke; the
// worst lateness bounds from below the stall any thread of the process saw
// (a stopped or CPU-starved process: CI runs two suites at once on two
// cores, beside whatever else the machine runs).
//
// A test judges its timing only when the stall was below its slack, and
// otherwise runs again or skips saying how long the process stalled, so that
// on a machine that runs it on time it still fails on the defect it guards.
// Thread-safe.
#ifndef KEEL_TESTS_STALL_METER_H_
#define KEEL_TESTS_STALL_METER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>

#include "base/time.h"

namespace keel::testing {

class StallMeter {
 public:
  StallMeter() : thread_([this] { Loop(); }) {}
  ~StallMeter() {
    stopping_ = true;
    thread_.join();
  }
  StallMeter(const StallMeter&) = delete;
  StallMeter& operator=(const StallMeter&) = delete;

  // The worst lateness, in seconds, since construction or the last Reset.
  double worst_s() const { return worst_us_.load() / 1e6; }
  // Forgets the lateness measured so far.
  void Reset() { worst_us_ = 0; }
  // "the test process stalled for up to X s (a loaded machine): <premise>".
  std::string Describe(const std::string& premise) const {
    std::ostringstream text;
    text << "the test process stalled for up to " << worst_s()
         << " s (a loaded machine), so its premise does not hold: " << premise;
    return text.str();
  }

 private:
  void Loop() {
    constexpr double kSleepS = 0.002;
    while (!stopping_) {
      const double before = MonotonicSeconds();
      std::this_thread::sleep_for(std::chrono::duration<double>(kSleepS));
      const auto late_us = static_cast<int64_t>((MonotonicSeconds() - before - kSleepS) * 1e6);
      int64_t worst = worst_us_.load();
      while (late_us > worst && !worst_us_.compare_exchange_weak(worst, late_us)) {
      }
    }
  }

  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> worst_us_{0};
  std::thread thread_;
};

}  // namespace keel::testing

#endif  // KEEL_TESTS_STALL_METER_H_
