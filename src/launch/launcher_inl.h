// Template members of ProcessGroup.
#ifndef KEEL_LAUNCH_LAUNCHER_INL_H_
#define KEEL_LAUNCH_LAUNCHER_INL_H_

#include "base/time.h"
#include "kv/node.h"

namespace keel {

template <typename Done>
bool ProcessGroup::Pump(double seconds, Done done) {
  const double deadline = MonotonicSeconds() + seconds;
  while (MonotonicSeconds() < deadline && !Interrupted()) {
    // Short rounds: what is awaited (a port in a file) makes no output to
    // wake a round early, and start-up waits for it.
    if (Poll(5) >= 0) return false;
    if (done()) return true;
  }
  return done();
}

}  // namespace keel

#endif  // KEEL_LAUNCH_LAUNCHER_INL_H_
