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

std::string Seconds(double seconds) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f s", seconds);
  return text;
}

}  // namespace

HostWatch::HostWatch(std::vector<WatchedHost> hosts, int port, bool lost_host_ends_job,
                     double grace_s)
    : port_(port), lost_host_ends_job_(lost_host_ends_job), grace_s_(grace_s) {
  for (WatchedHost& host : hosts) hosts_.push_back({std::move(host), 0});
}

HostWatch::~HostWatch() {
  if (listener_ >= 0) close(listener_);
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
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return false;
  }
  bool answered = false;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      answered = true;
    } else if (errno == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      if (poll(&waiting, 1, static_cast<int>(timeout_s * 1000)) == 1) {
        int error = 0;
        socklen_t length = sizeof(error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        answered = error == 0;
      }
    }
    close(fd);
  }
  freeaddrinfo(found);
  return answered;
}

void HostWatch::Round() {
  if (listener_ >= 0) {
    for (int peer; (peer = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) close(peer);
  }
  const double now = MonotonicSeconds();
  if (!failure_.empty() || now - last_probe_ < kProbeIntervalSeconds) return;
  last_probe_ = now;
  for (Host& host : hosts_) {
    if (Answers(host.host.address, port_, kProbeTimeoutSeconds)) {
      host.last_answer = MonotonicSeconds();
      continue;
    }
    if (host.last_answer == 0 || now - host.last_answer < grace_s_) continue;
    if (!host.host.leader && !lost_host_ends_job_) continue;  // replicas carry the job on
    failure_ = (host.host.leader ? "the leader " : "host ") + host.host.name +
               " is gone (its keel train at " + host.host.address + ":" + std::to_string(port_) +
               " has not answered for " + Seconds(now - host.last_answer) + ")" +
               (host.host.leader ? ": the job's scheduler with it"
                                 : ": its servers held the only copy of their key ranges "
                                   "(replication 0)") +
               ", so the job cannot go on";
    if (group_) {
      group_->Emit("launch", failure_ + "; stopping this host's roles", true);
      group_->StopAll();
    }
    return;
  }
}

}  // namespace keel
