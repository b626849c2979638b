#include "launch/host_watch.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/time.h"

namespace keel {
namespace {

// How long a probe waits for a connection to open.
constexpr double kProbeTimeoutSeconds = 0.5;
constexpr double kProbeIntervalSeconds = 1.0;
// How often a host that never answered is probed: soon after it listens, so
// that its loss is seen even if it comes early in the job.
constexpr double kUnseenProbeIntervalSeconds = 0.2;

std::string Seconds(double seconds) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f s", seconds);
  return text;
}

// The IPv4 address of `name`:`port` (blocks while the name is looked up).
bool Resolve(const std::string& name, int port, sockaddr_storage* address, socklen_t* length) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  std::memcpy(address, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  freeaddrinfo(found);
  return true;
}

// A connection to `address` begun without blocking: its descriptor, or -1 if
// it failed at once; *opened when it opened at once (the descriptor is then
// the caller's to close too).
int BeginConnect(const sockaddr_storage& address, socklen_t length, bool* opened) {
  *opened = false;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0) {
    *opened = true;
    return fd;
  }
  if (errno == EINPROGRESS) return fd;
  close(fd);
  return -1;
}

// Whether the connection begun on `fd` has opened (its POLLOUT came).
bool Opened(int fd) {
  int error = 0;
  socklen_t length = sizeof(error);
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
}

}  // namespace

HostWatch::HostWatch(std::vector<WatchedHost> hosts, int port, bool lost_host_ends_job,
                     double grace_s)
    : port_(port),
      lost_host_ends_job_(lost_host_ends_job),
      grace_s_(grace_s),
      started_(MonotonicSeconds()) {
  for (WatchedHost& host : hosts) hosts_.push_back({std::move(host), 0, false});
}

HostWatch::~HostWatch() {
  if (listener_ >= 0) close(listener_);
  for (const Host& host : hosts_) {
    if (host.probe >= 0) close(host.probe);
  }
}

void HostWatch::Listen() {
  listener_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener_ < 0) throw MakeError("cannot make a socket: ", strerror(errno));
  const int on = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port_));
  if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener_, 64) != 0) {
    throw MakeError("cannot listen on port ", port_, " (the hosts' watch port): ", strerror(errno));
  }
}

bool HostWatch::Answers(const std::string& address, int port, double timeout_s) {
  sockaddr_storage resolved{};
  socklen_t length = 0;
  if (!Resolve(address, port, &resolved, &length)) return false;
  bool opened = false;
  const int fd = BeginConnect(resolved, length, &opened);
  if (fd < 0) return false;
  if (!opened) {
    pollfd waiting{fd, POLLOUT, 0};
    opened = poll(&waiting, 1, static_cast<int>(timeout_s * 1000)) == 1 && Opened(fd);
  }
  close(fd);
  return opened;
}

int HostWatch::reached() const {
  int count = 0;
  for (const Host& host : hosts_) count += host.last_answer != 0 ? 1 : 0;
  return count;
}

void HostWatch::StartProbes(bool all) {
  for (Host& host : hosts_) {
    if (host.probe >= 0 || (!all && host.last_answer != 0)) continue;
    // A host's address is kept while it answers, looked up again after a
    // probe that failed (a pod started again may have a new one).
    if (!host.resolved) {
      host.resolved = Resolve(host.host.address, port_, &host.address, &host.address_length);
    }
    bool opened = false;
    const int fd = host.resolved ? BeginConnect(host.address, host.address_length, &opened) : -1;
    if (fd < 0 || opened) {
      if (fd >= 0) close(fd);
      Ended(&host, opened, MonotonicSeconds());
      continue;
    }
    host.probe = fd;
    host.probe_started = MonotonicSeconds();
  }
}

void HostWatch::Ended(Host* host, bool answered, double now) {
  host->answered_now = answered;
  if (answered) {
    host->last_answer = now;
  } else {
    host->resolved = false;
  }
}

void HostWatch::TakeProbes() {
  std::vector<pollfd> waiting;
  std::vector<Host*> probed;
  for (Host& host : hosts_) {
    if (host.probe < 0) continue;
    waiting.push_back({host.probe, POLLOUT, 0});
    probed.push_back(&host);
  }
  if (waiting.empty()) return;
  if (poll(waiting.data(), waiting.size(), 0) < 0) return;  // taken at the next round
  const double now = MonotonicSeconds();
  for (size_t i = 0; i < waiting.size(); ++i) {
    Host& host = *probed[i];
    const bool ended = waiting[i].revents != 0;
    if (!ended && now - host.probe_started < kProbeTimeoutSeconds) continue;
    const bool answered = ended && Opened(host.probe);
    close(host.probe);
    host.probe = -1;
    Ended(&host, answered, now);
  }
}

std::string HostWatch::Failure(const Host& host, double now) const {
  const std::string silence =
      host.last_answer == 0
          ? "has not answered since this host began watching " + Seconds(now - started_) + " ago"
          : "has not answered for " + Seconds(now - host.last_answer);
  return (host.host.leader ? "the leader " : "host ") + host.host.name +
         " is gone (its keel train at " + host.host.address + ":" + std::to_string(port_) + " " +
         silence + ")" +
         (host.host.leader ? ": the job's scheduler with it"
                           : ": its servers held the only copy of their key ranges "
                             "(replication 0)") +
         ", so the job cannot go on";
}

void HostWatch::Round() {
  if (listener_ >= 0) {
    for (int peer; (peer = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) close(peer);
  }
  if (!failure_.empty()) return;
  TakeProbes();
  const double now = MonotonicSeconds();
  if (now - last_probe_ >= kProbeIntervalSeconds) {
    last_probe_ = last_unseen_probe_ = now;
    StartProbes(true);
  } else if (now - last_unseen_probe_ >= kUnseenProbeIntervalSeconds) {
    last_unseen_probe_ = now;
    StartProbes(false);
  }
  // Lost: a host that answered once, whose last probe failed, silent for the grace.
  bool lost = false;
  for (const Host& host : hosts_) {
    lost = lost || (Ends(host) && host.last_answer != 0 && !host.answered_now &&
                    now - host.last_answer >= grace_s_);
  }
  if (!lost) return;
  const auto silent_since = [this](const Host& host) {
    return host.last_answer == 0 ? started_ : host.last_answer;
  };
  const Host* cause = nullptr;  // the one silent longest
  for (const Host& host : hosts_) {
    if (!Ends(host) || host.answered_now) continue;
    if (!cause || silent_since(host) < silent_since(*cause)) cause = &host;
  }
  failure_ = Failure(*cause, now);
  if (group_) {
    group_->Emit("launch", failure_ + "; stopping this host's roles", true);
    group_->StopAll();
  }
}

}  // namespace keel
