#include "kv/connection_watch.h"

#include <glog/logging.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "kv/monitor_event.h"

namespace keel {
namespace {

// The watch's thread waits on an epoll set of its monitors' descriptors
// (ZMQ_FD: readable while the socket has news to process), so a wake-up costs
// in proportion to the monitors with news, not to all of them (a scheduler
// has one per member: zmq_poll over all of them took a system call each, 2%
// of a core once a second at 3,800 members). It looks at least this often
// for a stop, and at every monitor at least every kSweepMs (news that came
// while a socket's descriptor was not watched).
constexpr int kPollMs = 1000;
constexpr int kSweepMs = 10000;
// The epoll key of the thread's wake-up PAIR (Watch, Forget, Stop); a
// monitor's is its watch number, from 1.
constexpr uint64_t kWokenKey = 0;
// After a wake-up by Watch or Forget it lets the next ones gather this long
// (a registration storm adds a monitor per member): a socket watched
// meanwhile is polled from the next round on (its events wait in its PAIR).
constexpr int kGatherMs = 50;

}  // namespace

ConnectionWatch::ConnectionWatch(zmq::context_t& context, Closed closed)
    : context_(context),
      closed_(std::move(closed)),
      wake_(context, zmq::socket_type::pair),
      woken_(context, zmq::socket_type::pair) {
  const std::string endpoint =
      "inproc://keel-connection-watch-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  woken_.set(zmq::sockopt::linger, 0);
  wake_.set(zmq::sockopt::linger, 0);
  woken_.bind(endpoint);
  wake_.connect(endpoint);
  // The epoll set is made here, not on the thread: a caller counting its
  // descriptors after the watch starts sees them all.
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  bool started = epoll_ >= 0;
  if (started) {
    try {
      AddToEpoll(epoll_, woken_, kWokenKey);
    } catch (const zmq::error_t&) {
      started = false;
    }
  }
  if (!started) {
    // Watch makes no monitor: one nobody reads would block the libzmq thread
    // that reports to it once its queue is full.
    LOG(ERROR) << "connection watch: cannot wait on its sockets (" << std::strerror(errno)
               << "); closed connections go unreported (heartbeat timeouts still remove nodes)";
    failed_ = true;
    return;
  }
  thread_ = std::thread([this] { Loop(); });
}

void ConnectionWatch::WakeLocked() {
  if (wake_) wake_.send(zmq::buffer("w", 1), zmq::send_flags::dontwait);
}

ConnectionWatch::~ConnectionWatch() { Stop(); }

uint64_t ConnectionWatch::Watch(zmq::socket_t& socket, int node_id) {
  uint64_t watch = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watch = next_watch_++;
  }
  const std::string endpoint = "inproc://keel-connection-" + std::to_string(watch);
  // Not ZMQ_EVENT_MONITOR_STOPPED: libzmq sends it with a blocking send when
  // the monitor stops, which never returns if this PAIR is closed by then (the
  // socket's owner unwatches it first: Unwatch).
  const int events = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED;
  if (zmq_socket_monitor(socket.handle(), endpoint.c_str(), events) != 0) {
    throw MakeError("cannot watch the connection to node ", node_id, ": ",
                    zmq_strerror(zmq_errno()));
  }
  // Connected before `socket` is: libzmq drops events nobody reads.
  zmq::socket_t monitor(context_, zmq::socket_type::pair);
  monitor.set(zmq::sockopt::linger, 0);
  monitor.connect(endpoint);
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_.load() || failed_.load()) {  // nobody would read it: `monitor` closes here
    Unwatch(socket);
    return 0;
  }
  added_.push_back(Monitor{watch, node_id, std::move(monitor)});
  WakeLocked();
  return watch;
}

void ConnectionWatch::Unwatch(zmq::socket_t& socket) {
  zmq_socket_monitor(socket.handle(), nullptr, 0);
}

void ConnectionWatch::Forget(uint64_t watch) {
  std::lock_guard<std::mutex> lock(mutex_);
  forgotten_.insert(watch);
  WakeLocked();
}

void ConnectionWatch::Stop() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    WakeLocked();
  }
  if (thread_.joinable()) thread_.join();
  if (epoll_ >= 0) close(epoll_);
  epoll_ = -1;
  std::lock_guard<std::mutex> lock(mutex_);
  added_.clear();  // closes them
  wake_.close();
  woken_.close();
}

bool ConnectionWatch::Forgotten(uint64_t watch) {
  std::lock_guard<std::mutex> lock(mutex_);
  return forgotten_.count(watch) > 0;
}

void ConnectionWatch::Update(std::map<uint64_t, Monitor>* monitors, int epoll) {
  std::vector<uint64_t> added;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Monitor& monitor : added_) {
      added.push_back(monitor.watch);
      monitors->emplace(monitor.watch, std::move(monitor));
    }
    added_.clear();
    for (auto it = monitors->begin(); it != monitors->end();) {
      if (forgotten_.count(it->first)) {
        const int fd = it->second.socket.get(zmq::sockopt::fd);
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
        forgotten_.erase(it->first);
        it = monitors->erase(it);  // closes its PAIR
      } else {
        ++it;
      }
    }
  }
  std::vector<Monitor*> fresh;
  for (const uint64_t watch : added) {
    auto found = monitors->find(watch);
    if (found == monitors->end()) continue;  // forgotten at once
    AddToEpoll(epoll, found->second.socket, watch);
    fresh.push_back(&found->second);
  }
  for (Monitor* monitor : fresh) Drain(*monitor);  // news from before it was watched
}

void ConnectionWatch::AddToEpoll(int epoll, zmq::socket_t& socket, uint64_t key) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = key;
  const int fd = socket.get(zmq::sockopt::fd);
  if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) != 0) {
    LOG(ERROR) << "connection watch: cannot wait on descriptor " << fd << ": "
               << std::strerror(errno) << " (its news is read every " << kSweepMs << " ms)";
  }
}

void ConnectionWatch::Drain(Monitor& monitor) {
  // ZMQ_EVENTS takes the socket's news (and makes its descriptor unreadable
  // again); every message waiting is read, for the descriptor does not
  // signal again for those.
  while (monitor.socket.get(zmq::sockopt::events) & ZMQ_POLLIN) OnEvent(monitor);
}

void ConnectionWatch::Loop() {
  const int epoll = epoll_;
  std::map<uint64_t, Monitor> monitors;  // by watch number (from 1)
  auto swept = std::chrono::steady_clock::now();
  while (!stopping_.load()) {
    try {
      Update(&monitors, epoll);
      epoll_event ready[64];
      const int count = epoll_wait(epoll, ready, 64, kPollMs);
      bool woken = false;
      for (int i = 0; i < count; ++i) {
        // Copied out: epoll_event is packed, its u64 not aligned for a
        // reference (map::find takes one).
        const uint64_t key = ready[i].data.u64;
        if (key == kWokenKey) {
          woken = true;
          continue;
        }
        auto found = monitors.find(key);
        if (found != monitors.end()) Drain(found->second);
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - swept >= std::chrono::milliseconds(kSweepMs)) {
        for (auto& [watch, monitor] : monitors) Drain(monitor);
        swept = now;
      }
      if (woken || (woken_.get(zmq::sockopt::events) & ZMQ_POLLIN)) {
        zmq::message_t signal;
        while (woken_.recv(signal, zmq::recv_flags::dontwait)) {
        }
        if (!stopping_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(kGatherMs));
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      LOG(ERROR) << "connection watch: " << e.what();
    }
  }
}

void ConnectionWatch::OnEvent(Monitor& monitor) {
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(monitor.socket, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
    return;
  }
  const std::optional<MonitorEvent> event = ReadMonitorEvent(frames);
  if (!event) return;
  // A retry follows either a connection never made (news the first time) or
  // a disconnection (reported already); a later loss of a connection made
  // meanwhile begins with a disconnection again.
  const bool report = event->id == ZMQ_EVENT_DISCONNECTED ||
                      (event->id == ZMQ_EVENT_CONNECT_RETRIED && !monitor.reported);
  if (report) monitor.reported = true;
  if (report && !Forgotten(monitor.watch)) closed_(monitor.node_id);
}

}  // namespace keel
