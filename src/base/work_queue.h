// WorkQueue: items run on a fixed set of threads, each when it falls due.
//
// The scheduler's probes (of registering nodes, scheduler/registration_probes.h;
// of suspects, scheduler/suspects.h) are slow (a connection attempt may take
// seconds) and must not hold up its receive thread, nor start a thread per
// request: they wait in this queue for one of its threads. An item runs as
// soon as it is queued and a thread is free; a run may ask for the item to
// run again after a delay, and it waits in the queue, holding no thread,
// until then. The queue is ordered by when each item falls due.
//
// Thread-safe. `run` is called on the queue's threads, never under its lock.
// (base/thread_pool.h's ThreadPool is the other kind: one parallel step of
// a computation at a time, split into equal parts.)
#ifndef KEEL_BASE_WORK_QUEUE_H_
#define KEEL_BASE_WORK_QUEUE_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "base/time.h"

namespace keel {

template <typename Item>
class WorkQueue {
 public:
  // Runs `item`. Returns nothing when the item is done, or the seconds after
  // which it is to run again (counted from the end of this run).
  using Run = std::function<std::optional<double>(Item& item)>;

  // Starts `threads` threads. `run` must be ready to be called at once.
  WorkQueue(int threads, Run run) : run_(std::move(run)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkQueue() { Stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `item` to run now, after the items queued before it; false (and
  // nothing queued) after Stop, or if `most` items are waiting already.
  bool PushBack(Item item, size_t most = std::numeric_limits<size_t>::max()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ || waiting_.size() >= most) return false;
      waiting_.push_back(Entry{std::move(item), MonotonicSeconds()});
    }
    changed_.notify_one();
    return true;
  }

  // Queues `item` to run now, before every item waiting; false (and nothing
  // queued) after Stop.
  bool PushFront(Item item) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return false;
      waiting_.push_front(Entry{std::move(item), MonotonicSeconds()});
    }
    changed_.notify_one();
    return true;
  }

  // Drops what waits, lets the runs under way finish and joins the threads;
  // idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      waiting_.clear();
    }
    changed_.notify_all();
    for (auto& thread : threads_) thread.join();
  }

 private:
  struct Entry {
    Item item;
    double due;  // MonotonicSeconds() of its next run
  };

  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      if (waiting_.empty()) {
        changed_.wait(lock);
        continue;
      }
      const double wait = waiting_.front().due - MonotonicSeconds();
      if (wait > 0) {
        changed_.wait_for(lock, std::chrono::duration<double>(wait));
        continue;
      }
      Entry entry = std::move(waiting_.front());
      waiting_.pop_front();
      lock.unlock();
      const std::optional<double> again = run_(entry.item);
      lock.lock();
      if (!again) continue;
      entry.due = MonotonicSeconds() + *again;
      const auto later = std::find_if(waiting_.begin(), waiting_.end(),
                                      [&](const Entry& other) { return other.due > entry.due; });
      waiting_.insert(later, std::move(entry));
      changed_.notify_one();
    }
  }

  const Run run_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Entry> waiting_;  // in the order they fall due
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace keel

#endif  // KEEL_BASE_WORK_QUEUE_H_
