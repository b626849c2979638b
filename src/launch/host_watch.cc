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

void HostWatch::Probe(bool all) {
  for (Host& host : hosts_) {
    if (!all && host.last_answer != 0) continue;
    host.answered_now = Answers(host.host.address, port_, kProbeTimeoutSeconds);
    if (host.answered_now) host.last_answer = MonotonicSeconds();
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
  const double now = MonotonicSeconds();
  if (now - last_probe_ < kProbeIntervalSeconds) {
    if (now - last_unseen_probe_ >= kUnseenProbeIntervalSeconds) {
      last_unseen_probe_ = now;
      Probe(false);
    }
    return;
  }
  last_probe_ = last_unseen_probe_ = now;
  Probe(true);
  bool lost = false;  // a host that answered once is silent for the grace
  for (const Host& host : hosts_) {
    lost = lost || (Ends(host) && host.last_answer != 0 && now - host.last_answer >= grace_s_);
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
