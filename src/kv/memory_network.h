// MemoryNetwork: an in-process stand-in for loopback TCP, for benchmarks that
// run more nodes than one process has descriptors for (`keel bench control`).
//
// A Van given one (VanOptions::memory_network) binds no socket: it takes an
// address ("127.a.b.c:port", made up, never dialled) in the network, and its
// sends, replies and connection watches go through the network instead of
// ZeroMQ, as the same wire frames. A member of the network that is not a Van
// (a benchmark's simulated node) is an Endpoint.
//
// What it keeps of TCP: a message goes to whoever holds the address now, or
// is lost; an answer (Van::Reply) goes back to the endpoint that sent with
// that routing id; an endpoint leaving (Unbind) is a closed connection to
// every watcher of its address, and a probe of its address is refused from
// then on. What it leaves out: flow control, frame limits, CURVE, peer hosts.
//
// Thread-safe. Endpoints are called on the sender's thread, one call at a
// time per send; they must only queue what they get.
#ifndef KEEL_KV_MEMORY_NETWORK_H_
#define KEEL_KV_MEMORY_NETWORK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

namespace keel {

class MemoryNetwork {
 public:
  class Endpoint {
   public:
    virtual ~Endpoint() = default;
    // A message sent to this endpoint's address by the sender whose routing
    // id is `route`.
    virtual void Receive(const std::string& route, std::vector<zmq::message_t>&& frames) = 0;
    // An answer to a message this endpoint sent.
    virtual void ReceiveReply(std::vector<zmq::message_t>&& frames) = 0;
  };

  // Gives `endpoint` (which sends with `routing_id`) a new address and
  // returns it. `endpoint` must stay valid until Unbind returns.
  std::string Bind(Endpoint* endpoint, const std::string& routing_id);
  // The endpoint at `address` leaves; every watcher of the address is told
  // (on this thread, after it left). No call reaches it once this returns.
  void Unbind(const std::string& address);

  // Delivers `frames` from the endpoint with routing id `from_route` to
  // whoever holds `address`; false (the frames dropped) if no one does.
  bool Send(const std::string& from_route, const std::string& address,
            std::vector<zmq::message_t>&& frames);
  // Delivers an answer to the endpoint with routing id `to_route`; false if
  // it left.
  bool Reply(const std::string& to_route, std::vector<zmq::message_t>&& frames);

  // Calls `closed` once when the endpoint at `address` leaves. Returns the
  // number Forget takes; 0 (and no call) if no one holds the address (as a
  // connection that never came up: libzmq reports no closing either).
  uint64_t Watch(const std::string& address, std::function<void()> closed);
  void Forget(uint64_t watch);

  // Whether an endpoint holds `address` (as a TCP probe answering).
  bool Reachable(const std::string& address) const;

 private:
  struct Watcher {
    std::string address;
    std::function<void()> closed;
  };
  mutable std::mutex mutex_;
  uint64_t bound_ = 0;  // addresses given out
  std::unordered_map<std::string, Endpoint*> by_address_;
  std::unordered_map<std::string, Endpoint*> by_route_;
  std::unordered_map<std::string, std::string> route_of_;  // address -> routing id
  std::map<uint64_t, Watcher> watchers_;
  std::unordered_multimap<std::string, uint64_t> watches_of_;  // address -> watch
  uint64_t next_watch_ = 1;
};

}  // namespace keel

#endif  // KEEL_KV_MEMORY_NETWORK_H_
