// DedupeWindow: which request sequences from one sender were already applied.
//
// Remembers the last `capacity` sequences it was told of, so a push resent
// after a timeout is recognised and not applied twice. Sequences older than
// the window are reported as new: the window must cover the requests a sender
// can have in flight. KVWorker resends a request only within
// kResendSequenceHorizon (2048) sequences of its newest, so every sequence
// recorded between a request's first copy and its last resend lies within
// 2048 of it on either side: fewer than the 4096 remembered. Not synchronized.
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

  explicit DedupeWindow(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // Records `sequence`; returns false if it was already recorded.
  bool Insert(uint64_t sequence) {
    if (!seen_.insert(sequence).second) return false;
    order_.push_back(sequence);
    if (order_.size() > capacity_) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }

  // The sequences remembered, oldest first: inserting them into an empty
  // window gives an equal one (a replica joining a chain takes them over).
  const std::deque<uint64_t>& sequences() const { return order_; }

 private:
  size_t capacity_;
  std::unordered_set<uint64_t> seen_;
  std::deque<uint64_t> order_;
};

}  // namespace keel

#endif  // KEEL_SERVER_DEDUPE_WINDOW_H_
