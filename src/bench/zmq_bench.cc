#include "bench/zmq_bench.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "base/time.h"

namespace keel {
namespace {

constexpr int kWarmupRequests = 3;
constexpr int kMinRequests = 5;

// The raw ZeroMQ peer: answers 'P'ush requests with an 8-byte ack and 'L'oad
// requests with the asked number of bytes, until 'Q'uit.
[[noreturn]] void ZmqEchoPeer(int port_pipe, uint64_t largest) {
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::router);
  socket.set(zmq::sockopt::rcvhwm, 0);
  socket.set(zmq::sockopt::sndhwm, 0);
  socket.bind("tcp://127.0.0.1:*");
  const std::string endpoint = socket.get(zmq::sockopt::last_endpoint);
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  if (write(port_pipe, &port, sizeof(port)) != sizeof(port)) _exit(1);
  close(port_pipe);
  std::vector<char> payload(largest, 1);
  std::vector<zmq::message_t> frames;
  while (true) {
    frames.clear();
    if (!zmq::recv_multipart(socket, std::back_inserter(frames))) continue;
    if (frames.size() < 2 || frames[1].size() != 9) continue;
    const char op = *static_cast<const char*>(frames[1].data());
    uint64_t size = 0;
    std::memcpy(&size, static_cast<const char*>(frames[1].data()) + 1, sizeof(size));
    if (op == 'Q') _exit(0);
    zmq::message_t reply;
    if (op == 'L') {
      reply = zmq::message_t(payload.data(), std::min(size, largest), nullptr, nullptr);
    } else {
      reply = zmq::message_t(8);
    }
    socket.send(frames[0], zmq::send_flags::sndmore);
    socket.send(reply, zmq::send_flags::none);
  }
}

zmq::message_t Header(char op, uint64_t size) {
  zmq::message_t header(9);
  *static_cast<char*>(header.data()) = op;
  std::memcpy(static_cast<char*>(header.data()) + 1, &size, sizeof(size));
  return header;
}

// The cases' names and bytes per request.
std::vector<std::pair<std::string, uint64_t>> CaseSizes(const KVBenchOptions& options) {
  std::vector<std::pair<std::string, uint64_t>> sizes;
  if (options.small) sizes.push_back({"small 1x1", sizeof(float)});
  for (uint64_t bytes : options.dense_bytes)
    sizes.push_back({"dense " + FormatBytes(bytes), bytes});
  return sizes;
}

struct EchoPeer {
  pid_t pid = -1;
  int port = 0;
};

// Forks the echo peer, which dies with this process; returns once it listens.
EchoPeer StartEchoPeer(uint64_t largest) {
  int port_pipe[2];
  if (pipe(port_pipe) != 0) throw MakeError("bench zmq: pipe: ", strerror(errno));
  EchoPeer peer;
  peer.pid = fork();
  if (peer.pid < 0) throw MakeError("bench zmq: fork: ", strerror(errno));
  if (peer.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(port_pipe[0]);
    ZmqEchoPeer(port_pipe[1], largest);
  }
  close(port_pipe[1]);
  const bool got_port = read(port_pipe[0], &peer.port, sizeof(peer.port)) == sizeof(peer.port);
  close(port_pipe[0]);
  if (!got_port) {
    kill(peer.pid, SIGKILL);
    waitpid(peer.pid, nullptr, 0);
    throw MakeError("bench zmq: the peer process did not start");
  }
  return peer;
}

// One case: warm-up requests, then requests kept `inflight` deep for
// `options.seconds_per_case` (and at least kMinRequests), each one's latency
// measured from its send to its reply.
BenchCase MeasureCase(zmq::socket_t& socket, std::vector<char>& payload, const std::string& name,
                      uint64_t bytes, bool push, int inflight, const KVBenchOptions& options) {
  BenchCase result;
  result.name = name + (push ? " push" : " pull");
  result.bytes = bytes;
  auto issue = [&] {
    if (push) {
      socket.send(Header('P', bytes), zmq::send_flags::sndmore);
      socket.send(zmq::message_t(payload.data(), bytes, nullptr, nullptr), zmq::send_flags::none);
    } else {
      socket.send(Header('L', bytes), zmq::send_flags::none);
    }
  };
  auto complete = [&] {
    zmq::message_t reply;
    if (!socket.recv(reply)) throw MakeError("bench zmq: no reply");
  };
  for (int i = 0; i < kWarmupRequests; ++i) {
    issue();
    complete();
  }
  std::deque<double> window;
  const double begin = MonotonicSeconds();
  size_t issued = 0;
  while (true) {
    const bool more =
        MonotonicSeconds() - begin < options.seconds_per_case || issued < kMinRequests;
    if (window.size() == static_cast<size_t>(inflight) || (!more && !window.empty())) {
      complete();
      result.latencies_us.push_back((MonotonicSeconds() - window.front()) * 1e6);
      window.pop_front();
      continue;
    }
    if (!more) break;
    window.push_back(MonotonicSeconds());
    issue();
    ++issued;
  }
  result.seconds = MonotonicSeconds() - begin;
  return result;
}

// Every case against the peer listening on `port`, then tells it to quit.
std::vector<BenchCase> MeasureCases(int port, const KVBenchOptions& options,
                                    const std::vector<std::pair<std::string, uint64_t>>& sizes,
                                    uint64_t largest) {
  std::vector<BenchCase> cases;
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::sndhwm, 0);
  socket.set(zmq::sockopt::rcvhwm, 0);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect("tcp://127.0.0.1:" + std::to_string(port));
  std::vector<char> payload(largest, 2);
  for (const auto& [name, bytes] : sizes) {
    const int inflight = name.rfind("small", 0) == 0 ? 1 : options.inflight;
    for (bool push : {true, false}) {
      cases.push_back(MeasureCase(socket, payload, name, bytes, push, inflight, options));
    }
  }
  socket.send(Header('Q', 0), zmq::send_flags::none);
  return cases;
}

}  // namespace

std::vector<BenchCase> RunZmqBench(const KVBenchOptions& options) {
  const std::vector<std::pair<std::string, uint64_t>> sizes = CaseSizes(options);
  uint64_t largest = 8;
  for (const auto& size : sizes) largest = std::max(largest, size.second);
  const EchoPeer peer = StartEchoPeer(largest);
  std::vector<BenchCase> cases;
  try {
    cases = MeasureCases(peer.port, options, sizes, largest);
  } catch (...) {
    // The peer never got its quit message: stopped and reaped here.
    kill(peer.pid, SIGKILL);
    waitpid(peer.pid, nullptr, 0);
    throw;
  }
  waitpid(peer.pid, nullptr, 0);  // it quits after the last case
  return cases;
}

}  // namespace keel
