// RegistrationProbes: the scheduler's checks of registering nodes' addresses,
// on a fixed pool of threads with a bounded queue (base/work_queue.h).
//
// Before admitting a node the scheduler connects back to the address it
// advertises: with a cluster secret, a CURVE handshake with the cluster's
// keypair (so the node is not asked to count a refused peer, and the address
// is known to be a node holding the secret); without, a TCP connection. It only does so where the
// node itself is: an address whose host is not the one the registration came from is refused
// without a connection attempt, so a REGISTER cannot be used to learn whether some port elsewhere
// is open (the answer is the same whatever the port's state). Registrations
// beyond kMaxHeld, or beyond kMaxHeldBytes of them, are refused at once ("try
// again": a registering Node asks again 0.25 s later, one rejoining a
// restarted scheduler at its next heartbeat), so a flood of REGISTERs costs a
// bounded amount of memory and no threads. The count is set for a storm of
// 10,000 members; the bytes (encoded: parsed, a REGISTER takes a few times
// that) for REGISTERs of up to the scheduler's frame limit (a node rejoining
// a restarted scheduler sends its view, 0.8 MB at 10,000 members, so about 80
// such wait at once). A REGISTER carries no data frames (Registration refuses
// one that does).
//
// Thread-safe. The callback runs on a probe thread.
#ifndef KEEL_SCHEDULER_REGISTRATION_PROBES_H_
#define KEEL_SCHEDULER_REGISTRATION_PROBES_H_

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "base/work_queue.h"
#include "kv/cluster_secret.h"
#include "kv/memory_network.h"
#include "kv/message.h"

namespace keel {

class RegistrationProbes {
 public:
  static constexpr int kThreads = 4;
  static constexpr size_t kMaxHeld = 4096;
  static constexpr size_t kMaxHeldBytes = size_t{64} << 20;

  // Called with each registration checked and why it is refused, naming the
  // addresses involved ("" if the node is reachable where it says).
  using Done = std::function<void(const Message& request, const std::string& refusal)>;

  // `connect_timeout_s`: how long a connection attempt may take. `bind_host`
  // and `port`: the scheduler's, to name it in refusals. `secret`: the
  // cluster's, if it has one. `network`: the in-process transport whose
  // addresses are checked instead of TCP ones (nullptr: TCP).
  RegistrationProbes(double connect_timeout_s, const std::string& bind_host, int port,
                     std::optional<ClusterSecret> secret, const MemoryNetwork* network, Done done);
  ~RegistrationProbes();  // Stop()
  RegistrationProbes(const RegistrationProbes&) = delete;
  RegistrationProbes& operator=(const RegistrationProbes&) = delete;

  // Queues `request` for a check; false (and nothing queued) if kMaxHeld
  // are queued or being checked, or if with it those would hold more than
  // kMaxHeldBytes (one alone is always taken).
  bool Add(const Message& request);
  // Drops what waits, lets the checks under way finish and joins the threads
  // (their callbacks run); idempotent.
  void Stop();

 private:
  // Why the address `request` advertises is refused, "" if it is not.
  std::string Check(const Message& request) const;

  const double connect_timeout_s_;
  const std::string bind_host_;
  const int port_;
  const std::optional<ClusterSecret> secret_;
  const MemoryNetwork* const network_;
  const Done done_;
  // A request and the bytes it was counted as holding.
  struct Held {
    Message request;
    size_t bytes = 0;
  };
  std::mutex held_mutex_;
  size_t held_ = 0, held_bytes_ = 0;  // queued or being checked
  WorkQueue<Held> waiting_;           // last: its threads use the members above
};

// Whether `host` (a name or an IP address) resolves to the IP address `ip`.
bool HostHasAddress(const std::string& host, const std::string& ip);

}  // namespace keel

#endif  // KEEL_SCHEDULER_REGISTRATION_PROBES_H_
