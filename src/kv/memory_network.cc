#include "kv/memory_network.h"

#include <utility>

namespace keel {
namespace {

// Ports handed out per made-up host: hosts 127.a.b.1, ports from 1024.
constexpr uint64_t kPortsPerHost = 60000;
constexpr uint64_t kFirstPort = 1024;

}  // namespace

std::string MemoryNetwork::Bind(Endpoint* endpoint, const std::string& routing_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t index = bound_++;
  const uint64_t host = index / kPortsPerHost;
  const std::string address = "127." + std::to_string(host / 256 % 256) + "." +
                              std::to_string(host % 256) +
                              ".1:" + std::to_string(kFirstPort + index % kPortsPerHost);
  by_address_[address] = endpoint;
  by_route_[routing_id] = endpoint;
  route_of_[address] = routing_id;
  return address;
}

void MemoryNetwork::Unbind(const std::string& address) {
  std::vector<std::function<void()>> closed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    by_address_.erase(address);
    const auto route = route_of_.find(address);
    if (route != route_of_.end()) {
      by_route_.erase(route->second);
      route_of_.erase(route);
    }
    const auto [begin, end] = watches_of_.equal_range(address);
    for (auto it = begin; it != end; ++it) {
      auto watcher = watchers_.find(it->second);
      if (watcher == watchers_.end()) continue;
      closed.push_back(std::move(watcher->second.closed));
      watchers_.erase(watcher);
    }
    watches_of_.erase(address);
  }
  for (auto& call : closed) call();
}

bool MemoryNetwork::Send(const std::string& from_route, const std::string& address,
                         std::vector<zmq::message_t>&& frames) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = by_address_.find(address);
  if (found == by_address_.end()) return false;
  found->second->Receive(from_route, std::move(frames));
  return true;
}

bool MemoryNetwork::Reply(const std::string& to_route, std::vector<zmq::message_t>&& frames) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = by_route_.find(to_route);
  if (found == by_route_.end()) return false;
  found->second->ReceiveReply(std::move(frames));
  return true;
}

uint64_t MemoryNetwork::Watch(const std::string& address, std::function<void()> closed) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!by_address_.count(address)) return 0;
  const uint64_t watch = next_watch_++;
  watchers_[watch] = Watcher{address, std::move(closed)};
  watches_of_.emplace(address, watch);
  return watch;
}

void MemoryNetwork::Forget(uint64_t watch) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto watcher = watchers_.find(watch);
  if (watcher == watchers_.end()) return;
  const auto [begin, end] = watches_of_.equal_range(watcher->second.address);
  for (auto it = begin; it != end; ++it) {
    if (it->second == watch) {
      watches_of_.erase(it);
      break;
    }
  }
  watchers_.erase(watcher);
}

bool MemoryNetwork::Reachable(const std::string& address) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_address_.count(address) > 0;
}

}  // namespace keel
