// ConnectionWatch: tells when the TCP connection of one of a Van's send
// sockets closes, or cannot be made.
//
// A send socket (DEALER) carries messages to one peer, so a closed
// connection on it names that peer. libzmq reports it as
// ZMQ_EVENT_DISCONNECTED to a socket monitor, and a connection it could not
// make (a peer killed before the socket connected: nothing ever closes) as
// ZMQ_EVENT_CONNECT_RETRIED, reported only when it is the socket's first news
// (not at every retry, nor at the retries that follow a disconnection).
// libzmq allows one monitor per
// socket, and the send sockets have no other (PeerAuthenticator monitors the
// receiving ROUTER). Each watched socket gets an inproc PAIR of its own, and
// one thread waits on them all (an epoll set of their descriptors) and calls `closed(node_id)` for
// every disconnection (and first failed connection) of a socket still watched.
//
// What a closed connection means is for the caller to find out: a peer that
// died closes it (its kernel answers for it, at once), but so do a network
// blip and a peer that restarts; libzmq reconnects by itself in every case.
//
// Thread-safe. The callback runs on the watch's thread, one call at a time;
// it must not call back into this object.
#ifndef KEEL_KV_CONNECTION_WATCH_H_
#define KEEL_KV_CONNECTION_WATCH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace keel {

class ConnectionWatch {
 public:
  using Closed = std::function<void(int node_id)>;

  // Watches sockets of `context` (which must outlive this object, and be
  // closed only after Stop).
  ConnectionWatch(zmq::context_t& context, Closed closed);
  ~ConnectionWatch();  // Stop()
  ConnectionWatch(const ConnectionWatch&) = delete;
  ConnectionWatch& operator=(const ConnectionWatch&) = delete;

  // Starts watching `socket`, which carries messages to `node_id`. Call
  // before `socket` connects, so that no event is missed. Returns the number
  // Forget takes (0, and nothing watched, after Stop or once the watch's
  // thread failed to start waiting). Throws Error if libzmq
  // cannot monitor the socket.
  uint64_t Watch(zmq::socket_t& socket, int node_id);
  // Stops libzmq's monitor of `socket`, from the thread that owns it, before
  // it is closed or its watch forgotten: a monitor whose PAIR is gone blocks
  // the libzmq thread that reports an event to it (the socket's reaper, for
  // as long as the context lives: every socket closed after it stays open).
  static void Unwatch(zmq::socket_t& socket);
  // Stops reporting the socket watched under `watch` (after Unwatch, before
  // it is closed: its owner closing it is not news).
  void Forget(uint64_t watch);
  // Stops the thread and closes its sockets; idempotent.
  void Stop();

 private:
  // A monitor's receiving end.
  struct Monitor {
    uint64_t watch;
    int node_id;
    zmq::socket_t socket;
    bool reported = false;  // anything, ever
  };

  void Loop();
  // Takes the monitors Watch made since the last round into `monitors` and
  // the epoll set `epoll`, and closes the forgotten ones (on the watch's
  // thread, which owns them).
  void Update(std::map<uint64_t, Monitor>* monitors, int epoll);
  // Adds `socket`'s descriptor to `epoll` under `key`.
  static void AddToEpoll(int epoll, zmq::socket_t& socket, uint64_t key);
  // Reads every event waiting in `monitor`.
  void Drain(Monitor& monitor);
  // Reads one event from `monitor` (kept open until forgotten).
  void OnEvent(Monitor& monitor);
  bool Forgotten(uint64_t watch);
  // Wakes the thread's poll (Watch, Forget, Stop). Needs mutex_.
  void WakeLocked();

  zmq::context_t& context_;
  const Closed closed_;
  std::mutex mutex_;
  std::vector<Monitor> added_;    // made by Watch, not yet polled
  std::set<uint64_t> forgotten_;  // still polled, not to be reported
  uint64_t next_watch_ = 1;
  // A PAIR that wakes the thread (written under mutex_) and its other end
  // (the thread's).
  zmq::socket_t wake_, woken_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};  // the thread could not wait on the sockets
  int epoll_ = -1;                   // the thread's epoll set (closed by Stop)
  std::thread thread_;
};

}  // namespace keel

#endif  // KEEL_KV_CONNECTION_WATCH_H_
