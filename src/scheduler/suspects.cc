#include "scheduler/suspects.h"

namespace keel {

Suspects::Suspects(double probe_timeout_s, std::optional<ClusterSecret> secret, Probed probed)
    : probe_timeout_s_(probe_timeout_s), secret_(std::move(secret)), probed_(std::move(probed)) {
  for (int i = 0; i < kThreads; ++i) threads_.emplace_back([this] { Loop(); });
}

Suspects::~Suspects() { Stop(); }

bool Suspects::Add(int node_id, const std::string& address) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || !pending_.insert(node_id).second) return false;
    waiting_.emplace_back(node_id, address);
  }
  changed_.notify_one();
  return true;
}

void Suspects::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    waiting_.clear();
  }
  changed_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void Suspects::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    if (stopping_) return;
    const auto [node_id, address] = std::move(waiting_.front());
    waiting_.pop_front();
    lock.unlock();
    AddressProbe probe;
    try {
      probe = ProbeNode(address, probe_timeout_s_, secret_);
    } catch (const std::exception& e) {  // an address registration let through
      probe.failure = e.what();
    }
    probed_(node_id, address, probe);
    lock.lock();
    pending_.erase(node_id);
  }
}

}  // namespace keel
