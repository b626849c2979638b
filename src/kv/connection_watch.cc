#include "kv/connection_watch.h"

#include <glog/logging.h>
#include <zmq.h>

#include <chrono>
#include <iterator>
#include <optional>
#include <string>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "kv/monitor_event.h"

namespace keel {
namespace {

// The watch's thread polls every monitor in one call, which costs time in
// proportion to the monitors (a scheduler has one per member): it does so
// when woken (an event, or Watch/Forget/Stop) and at least this often, not
// on a short timer.
constexpr int kPollMs = 1000;
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
  if (stopping_.load()) {  // nobody would read it: `monitor` closes here
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
  std::lock_guard<std::mutex> lock(mutex_);
  added_.clear();  // closes them
  wake_.close();
  woken_.close();
}

bool ConnectionWatch::Forgotten(uint64_t watch) {
  std::lock_guard<std::mutex> lock(mutex_);
  return forgotten_.count(watch) > 0;
}

void ConnectionWatch::Update(std::vector<Monitor>* monitors) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Monitor& monitor : added_) monitors->push_back(std::move(monitor));
  added_.clear();
  for (auto it = monitors->begin(); it != monitors->end();) {
    if (forgotten_.erase(it->watch)) {
      it = monitors->erase(it);  // closes its PAIR
    } else {
      ++it;
    }
  }
}

void ConnectionWatch::Loop() {
  std::vector<Monitor> monitors;
  std::vector<zmq::pollitem_t> items;
  while (!stopping_.load()) {
    Update(&monitors);
    items.clear();
    items.push_back({woken_.handle(), 0, ZMQ_POLLIN, 0});  // item 0: Watch, Forget, Stop
    for (Monitor& monitor : monitors) items.push_back({monitor.socket.handle(), 0, ZMQ_POLLIN, 0});
    try {
      zmq::poll(items, std::chrono::milliseconds(kPollMs));
      for (size_t i = 0; i < monitors.size(); ++i) {
        if (items[i + 1].revents & ZMQ_POLLIN) OnEvent(monitors[i]);
      }
      if (items[0].revents & ZMQ_POLLIN) {
        zmq::message_t signal;
        while (woken_.recv(signal, zmq::recv_flags::dontwait)) {
        }
        if (!stopping_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(kGatherMs));
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
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
