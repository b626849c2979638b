#include "launch/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <random>

#include "base/error.h"

namespace keel {
namespace {

// Binds `*fd` to `port` on 127.0.0.1 (0: any free one) and returns the port
// bound; -1 (and no socket) if it is taken.
int BindLocalPort(int port, int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  if (*fd < 0) throw MakeError("cannot make a socket: ", strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  if (bind(*fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(*fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string why = strerror(errno);
    close(*fd);
    *fd = -1;
    if (port != 0) return -1;
    throw MakeError("cannot find a free port on 127.0.0.1: ", why);
  }
  return ntohs(address.sin_port);
}

// The lowest port a pick below the ephemeral range takes.
constexpr int kLowestPickedPort = 10000;

// A free port on 127.0.0.1, from a socket left bound in `*fd` (so the next
// call gets another port). It is picked below the kernel's ephemeral range
// (EphemeralPortRange) when that leaves room: a role's transport binds port
// 0 and connects out from ephemeral ports, and one of those could otherwise
// take the port between this check and the role's own bind. Else any free
// port.
int PickFreePort(int* fd, std::mt19937* random) {
  const int below = EphemeralPortRange().first;
  if (below - kLowestPickedPort >= 1000) {
    std::uniform_int_distribution<int> pick(kLowestPickedPort, below - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int port = BindLocalPort(pick(*random), fd);
      if (port > 0) return port;
    }
  }
  return BindLocalPort(0, fd);
}

}  // namespace

std::pair<int, int> EphemeralPortRange() {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (file >> low >> high && 0 < low && low <= high && high <= 65535) return {low, high};
  return {32768, 60999};
}

std::vector<int> FreeLocalPorts(int count) {
  std::vector<int> ports, fds;
  std::mt19937 random(std::random_device{}());
  try {
    for (int i = 0; i < count; ++i) {
      int fd = -1;
      const int port = PickFreePort(&fd, &random);
      fds.push_back(fd);
      ports.push_back(port);
    }
  } catch (...) {
    for (int fd : fds) close(fd);
    throw;
  }
  for (int fd : fds) close(fd);
  return ports;
}

LaunchMetricsPorts::LaunchMetricsPorts(bool on, bool with_scheduler, int servers, int workers,
                                       const std::string& bind)
    : bind_(bind) {
  if (!on) return;
  std::vector<std::string> names;
  if (with_scheduler) names.push_back("scheduler");
  for (int i = 0; i < servers; ++i) names.push_back("server " + std::to_string(i));
  for (int i = 0; i < workers; ++i) names.push_back("worker " + std::to_string(i));
  const std::vector<int> ports = FreeLocalPorts(static_cast<int>(names.size()));
  for (size_t i = 0; i < names.size(); ++i) ports_.emplace_back(names[i], ports[i]);
}

void LaunchMetricsPorts::AddFlag(const std::string& name, std::vector<std::string>* argv) const {
  for (const auto& [role, port] : ports_) {
    if (role != name) continue;
    argv->push_back("--metrics_port=" + std::to_string(port));
    argv->push_back("--metrics_port_fallback");  // picked, then free for a moment
  }
}

void LaunchMetricsPorts::Print(std::ostream& out) const {
  if (ports_.empty()) return;
  // Where a local Prometheus reaches the roles: loopback when they listen
  // on every interface.
  const std::string& bind = bind_;
  const bool any = bind == "0.0.0.0" || bind == "::";
  const bool v6 = bind.find(':') != std::string::npos;
  const std::string host = any ? "127.0.0.1" : v6 ? "[" + bind + "]" : bind;
  out << "metrics (Prometheus; /healthz and /readyz beside them):\n";
  for (const auto& [role, port] : ports_) {
    out << "  " << std::left << std::setw(10) << role << " http://" << host << ":" << port
        << "/metrics\n";
  }
  for (const auto& [role, port] : ports_) {
    if (role == "scheduler") {
      out << "status page: http://" << host << ":" << port << "/\n";
    }
  }
  out << std::flush;
}

}  // namespace keel
