// MonitorEvent: one event of a libzmq socket monitor (zmq_socket_monitor),
// read from the frames it arrives in, for the monitors of kv/: the send
// sockets' (ConnectionWatch), the receiving socket's (PeerAuthenticator) and
// a node probe's (ProbeNode, kv/van.h).
//
// A monitor sends each event as two frames: 6 bytes (the event id, uint16;
// its value, uint32; native order) and the socket's endpoint. The value is
// the event's detail: a descriptor, an errno or a handshake's status.
#ifndef KEEL_KV_MONITOR_EVENT_H_
#define KEEL_KV_MONITOR_EVENT_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>
#include <zmq.hpp>

namespace keel {

struct MonitorEvent {
  uint16_t id = 0;  // ZMQ_EVENT_*
  uint32_t value = 0;
};

// The event `frames` carry; nothing when their first frame is too short to
// hold one.
inline std::optional<MonitorEvent> ReadMonitorEvent(const std::vector<zmq::message_t>& frames) {
  if (frames.empty() || frames[0].size() < 6) return std::nullopt;
  MonitorEvent event;
  memcpy(&event.id, frames[0].data(), sizeof(event.id));
  memcpy(&event.value, static_cast<const char*>(frames[0].data()) + 2, sizeof(event.value));
  return event;
}

}  // namespace keel

#endif  // KEEL_KV_MONITOR_EVENT_H_
