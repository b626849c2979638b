// RequestObserver: how a role hears of each data request it completed, for
// its metrics (metrics/), without the transport's core knowing of them.
#ifndef KEEL_KV_REQUEST_OBSERVER_H_
#define KEEL_KV_REQUEST_OBSERVER_H_

#include <cstdint>
#include <functional>

#include "keel.pb.h"

namespace keel {

// One push or pull (a worker's part for one server, or a request a server
// answered).
struct RequestRecord {
  proto::Command command = proto::COMMAND_UNKNOWN;  // PUSH or PULL
  // The server's rank: the one asked (worker side) or this one (server side).
  int server_rank = -1;
  uint32_t table = 0;
  // Worker: from the first send to the answer (resends included). Server:
  // from arrival to the answer (a pull's wait at the staleness gate included).
  double seconds = 0;
  // Key and value bytes: sent and received (worker), received and answered (server).
  uint64_t bytes = 0;
};

// Called on the receive thread; must be quick and must not call back into
// the object that calls it.
using RequestObserver = std::function<void(const RequestRecord&)>;

}  // namespace keel

#endif  // KEEL_KV_REQUEST_OBSERVER_H_
