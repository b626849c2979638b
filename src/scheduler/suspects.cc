#include "scheduler/suspects.h"

#include <iterator>
#include <utility>

namespace keel {

Suspects::Suspects(double probe_timeout_s, std::optional<ClusterSecret> secret,
                   const MemoryNetwork* network, Probed probed)
    : probe_timeout_s_(probe_timeout_s),
      secret_(std::move(secret)),
      network_(network),
      probed_(std::move(probed)),
      waiting_(kThreads, [this](Suspect& suspect) -> std::optional<double> {
        if (!Probe(suspect)) return kRetryDelays[suspect.probes - 1];
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.erase(suspect.node_id);
        return std::nullopt;
      }) {}

Suspects::~Suspects() { Stop(); }

bool Suspects::Add(int node_id, const std::string& address) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pending_.insert(node_id).second) return false;
  }
  if (waiting_.PushFront(Suspect{node_id, address, 0})) return true;
  std::lock_guard<std::mutex> lock(mutex_);  // stopped
  pending_.erase(node_id);
  return false;
}

void Suspects::Stop() { waiting_.Stop(); }

bool Suspects::Probe(Suspect& suspect) {
  AddressProbe probe;
  try {
    if (network_) {
      probe.refused = !network_->Reachable(suspect.address);
      if (probe.refused) probe.failure = "connection refused";
    } else {
      probe = ProbeNode(suspect.address, probe_timeout_s_, secret_);
    }
  } catch (const std::exception& e) {  // an address registration let through
    probe.failure = e.what();
  }
  ++suspect.probes;
  if (!probe.refused && suspect.probes <= std::size(kRetryDelays)) return false;
  probed_(suspect.node_id, suspect.address, probe);
  return true;
}

}  // namespace keel
