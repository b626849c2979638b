#include "scheduler/suspects.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "base/time.h"

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
    waiting_.push_front(Suspect{node_id, address, 0, MonotonicSeconds()});
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
    Suspect suspect = std::move(waiting_.front());
    waiting_.pop_front();
    lock.unlock();
    const bool decided = Probe(suspect);
    lock.lock();
    if (decided) {
      pending_.erase(suspect.node_id);
      continue;
    }
    suspect.due = MonotonicSeconds() + kRetryDelays[suspect.probes - 1];
    const auto later = std::find_if(waiting_.begin(), waiting_.end(),
                                    [&](const Suspect& other) { return other.due > suspect.due; });
    waiting_.insert(later, std::move(suspect));
    changed_.notify_one();
  }
}

bool Suspects::Probe(Suspect& suspect) {
  AddressProbe probe;
  try {
    probe = ProbeNode(suspect.address, probe_timeout_s_, secret_);
  } catch (const std::exception& e) {  // an address registration let through
    probe.failure = e.what();
  }
  ++suspect.probes;
  if (!probe.refused && suspect.probes <= std::size(kRetryDelays)) return false;
  probed_(suspect.node_id, suspect.address, probe);
  return true;
}

}  // namespace keel
