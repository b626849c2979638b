#include "base/thread_pool.h"

#include <algorithm>

namespace keel {

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)), errors_(threads_) {
  try {
    for (int part = 1; part < threads_; ++part) {
      workers_.emplace_back([this, part] { Loop(part); });
    }
  } catch (...) {
    // A thread that cannot start (std::system_error): the ones started are
    // stopped and joined before the error goes on (the destructor does not
    // run for a constructor that throws; a joinable thread destroyed would
    // end the process).
    Stop();
    throw;
  }
}

ThreadPool::~ThreadPool() { Stop(); }

void ThreadPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

void ThreadPool::Run(const std::function<void(int part)>& body) {
  if (threads_ == 1) {
    body(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    running_ = threads_ - 1;
    std::fill(errors_.begin(), errors_.end(), nullptr);
    ++generation_;
  }
  start_.notify_all();
  try {
    body(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return running_ == 0; });
  body_ = nullptr;
  for (const std::exception_ptr& error : errors_) {
    if (error) std::rethrow_exception(error);
  }
}

void ThreadPool::Loop(int part) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>* body = body_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*body)(part);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    errors_[part] = error;
    if (--running_ == 0) finished_.notify_one();
  }
}

}  // namespace keel
