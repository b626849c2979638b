// ThreadPool: a fixed set of threads that run one parallel step at a time.
//
// A compute backend runs every minibatch as a few equal parts, one per
// thread; starting threads per batch would cost more than a small batch's
// work, so the threads live as long as the pool and sleep between steps.
#ifndef KEEL_BASE_THREAD_POOL_H_
#define KEEL_BASE_THREAD_POOL_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace keel {

class ThreadPool {
 public:
  // A pool of `threads` (at least 1): the caller of Run and threads - 1 more.
  // Throws std::system_error if a thread cannot start (none is left running).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  // Runs body(0) .. body(size() - 1), part i always on the same thread (part 0
  // on the caller's), and returns when all have finished. If parts throw, the
  // exception of the lowest-numbered one is rethrown. Not reentrant: one Run
  // at a time.
  void Run(const std::function<void(int part)>& body);

 private:
  void Loop(int part);
  // Stops and joins the threads.
  void Stop();

  const int threads_;
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable finished_;
  const std::function<void(int)>* body_ = nullptr;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> workers_;
};

// Threads for a step that has the machine's cores to itself: one per
// hardware thread, at least 1 and at most `most`.
inline int ThreadsUpTo(int most) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, std::min(cores, most));
}

// The rows [begin, end) of part `part` of `parts` equal parts of `rows`.
inline void PartRange(size_t rows, int parts, int part, size_t* begin, size_t* end) {
  *begin = rows * static_cast<size_t>(part) / static_cast<size_t>(parts);
  *end = rows * static_cast<size_t>(part + 1) / static_cast<size_t>(parts);
}

}  // namespace keel

#endif  // KEEL_BASE_THREAD_POOL_H_
