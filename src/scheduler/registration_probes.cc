#include "scheduler/registration_probes.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <tuple>

#include "base/error.h"
#include "kv/van.h"

namespace keel {
namespace {

// What a queued request holds: its header as parsed (about its encoded size)
// and its frames.
size_t HeldBytes(const Message& request) {
  size_t bytes = request.meta.ByteSizeLong() + request.route.size() + request.peer_host.size();
  for (const Bytes& frame : request.frames) bytes += frame.size();
  return bytes;
}

}  // namespace

bool HostHasAddress(const std::string& host, const std::string& ip) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return false;
  bool has = false;
  for (addrinfo* entry = found; entry && !has; entry = entry->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* address =
        entry->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(entry->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(entry->ai_addr)->sin6_addr);
    has = inet_ntop(entry->ai_family, address, text, sizeof(text)) && ip == text;
  }
  freeaddrinfo(found);
  return has;
}

RegistrationProbes::RegistrationProbes(double connect_timeout_s, const std::string& bind_host,
                                       int port, std::optional<ClusterSecret> secret,
                                       const MemoryNetwork* network, Done done)
    : connect_timeout_s_(connect_timeout_s),
      bind_host_(bind_host),
      port_(port),
      secret_(std::move(secret)),
      network_(network),
      done_(std::move(done)),
      waiting_(kThreads, [this](Held& held) -> std::optional<double> {
        done_(held.request, Check(held.request));
        std::lock_guard<std::mutex> lock(held_mutex_);
        --held_;
        held_bytes_ -= held.bytes;
        return std::nullopt;
      }) {}

RegistrationProbes::~RegistrationProbes() { Stop(); }

bool RegistrationProbes::Add(const Message& request) {
  const size_t bytes = HeldBytes(request);
  {
    std::lock_guard<std::mutex> lock(held_mutex_);
    if (held_ >= kMaxHeld || (held_ > 0 && held_bytes_ + bytes > kMaxHeldBytes)) return false;
    ++held_;
    held_bytes_ += bytes;
  }
  if (waiting_.PushBack(Held{request, bytes})) return true;
  std::lock_guard<std::mutex> lock(held_mutex_);  // stopped
  --held_;
  held_bytes_ -= bytes;
  return false;
}

void RegistrationProbes::Stop() { waiting_.Stop(); }

std::string RegistrationProbes::Check(const Message& request) const {
  const std::string& address = request.meta.node().address();
  std::string host;
  int port = 0;
  try {
    std::tie(host, port) = ParseHostPort(address, "node address");
  } catch (const Error& e) {
    return e.what();
  }
  const std::string& peer = request.peer_host;
  if (!peer.empty() && !HostHasAddress(host, peer)) {
    return "node at " + address + " is not on the host its registration came from (" + peer +
           "); the scheduler connects back only to a registering node's own host: give it an "
           "--advertise address of that host";
  }
  const std::string why = network_ ? (network_->Reachable(address) ? "" : "connection refused")
                                   : ProbeAddress(address, connect_timeout_s_, secret_);
  if (why.empty()) return "";
  std::string self = bind_host_;
  try {
    self = LocalAddressToward(host, port);
  } catch (const Error&) {
    // No route: the bind address is the best name for this end.
  }
  std::string reason = "node at " + address + " (seen from " + self + ":" + std::to_string(port_) +
                       ") is unreachable: " + why;
  if (!peer.empty()) reason += "; its registration came from " + peer;
  return reason + "; give it an --advertise address the scheduler can reach";
}

}  // namespace keel
