// Van: a node's ZeroMQ transport.
//
// Every node binds one ROUTER socket on which it receives everything (requests
// and responses alike), and keeps one send-only DEALER per peer it talks to.
// A single receive thread decodes incoming messages and hands them to the
// handler; Send may be called from any thread.
#ifndef KEEL_KV_VAN_H_
#define KEEL_KV_VAN_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include "kv/message.h"

namespace keel {

struct VanOptions {
  // Interface to receive on ("0.0.0.0" for all) and port (0: any free port).
  std::string bind_host = "127.0.0.1";
  int port = 0;
  // Host peers should use to reach this node; empty means bind_host.
  std::string advertise_host;
};

class Van {
 public:
  // Called on the receive thread with each decoded message. It must not block
  // for long: it holds up every later message.
  using Handler = std::function<void(Message&&)>;

  // Binds the receiving socket. Throws Error if the address cannot be bound.
  explicit Van(const VanOptions& options);
  ~Van();
  Van(const Van&) = delete;
  Van& operator=(const Van&) = delete;

  // "host:port" peers reach this node at.
  const std::string& address() const { return address_; }
  int port() const { return port_; }

  // Starts the receive thread.
  void Start(Handler handler);
  // Stops the receive thread and closes every socket; idempotent.
  void Stop();

  // Opens (or re-points) the send socket for `node_id` at "host:port".
  void Connect(int node_id, const std::string& address);
  bool IsConnected(int node_id) const;
  // Closes the send socket for `node_id`; messages already queued are still
  // delivered for up to the linger time.
  void Disconnect(int node_id);
  // Queues `message` for `node_id`. Thread-safe. Throws Error if `node_id` was
  // never connected.
  void Send(int node_id, const Message& message);

  // Answers `received` on the connection it came on, so the answer reaches
  // its sender even when the sender's advertised address does not. The
  // receive thread sends it within its poll interval (100 ms). Thread-safe.
  void Reply(const Message& received, const Message& answer);
  // A message that came back on the send socket of `node_id` (an answer
  // sent with Reply), or false if none is waiting. Does not block.
  bool TakeReply(int node_id, Message* reply);

  // Messages dropped because they could not be decoded.
  uint64_t malformed_messages() const { return malformed_.load(); }

 private:
  struct Peer {
    std::mutex mutex;
    std::string address;
    zmq::socket_t socket;
  };

  void ReceiveLoop();
  void SendReplies();

  zmq::context_t context_;
  zmq::socket_t receiver_;
  std::string address_;
  int port_ = 0;
  Handler handler_;
  std::thread receive_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> malformed_{0};

  std::mutex replies_mutex_;
  std::vector<std::pair<std::string, std::vector<zmq::message_t>>> replies_;  // route, frames

  mutable std::mutex peers_mutex_;
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;
};

// Splits "host:port"; throws Error naming `what` if it is not of that form.
std::pair<std::string, int> ParseHostPort(const std::string& address, const std::string& what);

// The local IP address this machine uses to reach `host` (UDP connect trick).
// Throws Error if there is no route.
std::string LocalAddressToward(const std::string& host, int port);

// Tries a TCP connection to "host:port" for up to `timeout_s`. Returns "" if
// it connected, else why not ("connection refused", "no answer within 3 s").
std::string ProbeAddress(const std::string& address, double timeout_s);

}  // namespace keel

#endif  // KEEL_KV_VAN_H_
