// DedupeWindow: which request sequences from one sender were already applied.
//
// Remembers the last `capacity` sequences it was told of, so a push resent
// after a timeout is recognised and not applied twice. KVWorker resends a
// request only within kResendSequenceHorizon (2048) sequences of its newest,
// so every sequence recorded between a request's first copy and its last
// resend lies within 2048 of it on either side: fewer than the 4096
// remembered. Not synchronized.
//
// Record also refuses a sequence outside a window around the newest one
// recorded, [newest - kMaxBehind, newest + kMaxAhead]:
// - behind: a sequence older than the window may have been applied and
//   forgotten since; applying it could count it twice. A sender's own
//   resends never fall that far behind (see above), so only a forgery or a
//   copy delayed past every resend does.
// - ahead: a sender's sequences count every message it sends (to every
//   server and range), so between two pushes to one range it may send many;
//   2^24 (16.7M) leaves room for a worker that talks to other ranges for a
//   long while, while a forged sequence far in the future cannot mark the
//   sender's real sequences as applied (they would then be taken for repeats:
//   dropped, yet acknowledged).
// The first sequence of a sender sets the window.
#ifndef KEEL_SERVER_DEDUPE_WINDOW_H_
#define KEEL_SERVER_DEDUPE_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_set>

namespace keel {

class DedupeWindow {
 public:
  static constexpr size_t kDefaultCapacity = 4096;
  static constexpr uint64_t kMaxBehind = kDefaultCapacity;
  static constexpr uint64_t kMaxAhead = uint64_t{1} << 24;

  enum class Verdict {
    kNew,          // recorded now: apply it
    kRepeat,       // recorded before: do not apply it again
    kOutOfWindow,  // not recorded: refuse it
  };

  explicit DedupeWindow(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // What Record would answer, recording nothing.
  Verdict Classify(uint64_t sequence) const {
    if (!order_.empty() && !InWindow(sequence)) return Verdict::kOutOfWindow;
    return seen_.count(sequence) ? Verdict::kRepeat : Verdict::kNew;
  }

  // Records `sequence` if it lies in the window (see above).
  Verdict Record(uint64_t sequence) {
    const Verdict verdict = Classify(sequence);
    if (verdict == Verdict::kNew) Insert(sequence);
    return verdict;
  }

  // Records `sequence` whatever the window; returns false if it was already
  // recorded.
  bool Insert(uint64_t sequence) {
    if (!seen_.insert(sequence).second) return false;
    order_.push_back(sequence);
    if (sequence > newest_) newest_ = sequence;
    if (order_.size() > capacity_) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }

  // The newest sequence recorded (0 if none).
  uint64_t newest() const { return newest_; }

  // The sequences remembered, oldest first: inserting them into an empty
  // window gives an equal one (a replica joining a chain takes them over).
  const std::deque<uint64_t>& sequences() const { return order_; }

 private:
  bool InWindow(uint64_t sequence) const {
    if (sequence <= newest_) return newest_ - sequence <= kMaxBehind;
    return sequence - newest_ <= kMaxAhead;
  }

  size_t capacity_;
  std::unordered_set<uint64_t> seen_;
  std::deque<uint64_t> order_;
  uint64_t newest_ = 0;
};

}  // namespace keel

#endif  // KEEL_SERVER_DEDUPE_WINDOW_H_
