#include "scheduler/resharding.h"

#include <glog/logging.h>

#include <utility>

#include "base/error.h"
#include "base/json.h"
#include "scheduler/control_message.h"

namespace keel {

Resharding::Resharding(Cluster cluster, Send send) : cluster_(cluster), send_(std::move(send)) {}

void Resharding::RestoreDraining(const proto::ClusterView& view) {
  draining_.clear();
  for (int rank : view.draining()) {
    if (rank >= 0 && rank <= kMaxServerRank && draining_.size() < size_t{kMaxServerRank}) {
      draining_.insert(rank);
    }
  }
}

std::set<int> Resharding::HomeRanks() const {
  // Live servers only: a vacant rank keeps the ranges homed on it (they wait
  // for its replacement) but takes no new one, which would wait as long.
  std::set<int> ranks = cluster_.server_ranks;
  for (int rank : draining_) ranks.erase(rank);
  return ranks;
}

void Resharding::Join(const Member& member) {
  const int rank = member.info.rank();
  ++cluster_.num_servers;
  std::vector<size_t> moved;
  try {
    moved = cluster_.chains.Join(rank, HomeRanks());
  } catch (const Error& e) {  // AdmissionRefusal checked the range count
    LOG(ERROR) << "server " << rank << " joined but holds no key range: " << e.what();
    return;
  }
  LOG(INFO) << "server " << rank << " (node " << member.info.id() << ") joins the running job: "
            << "it takes key range(s) " << JoinRanges(moved)
            << ", copying each while pushes go on; " << cluster_.num_servers << " server(s) now";
}

std::string Resharding::Drain(int rank, const std::string& who, bool* started) {
  *started = false;
  if (!cluster_.server_ranks.count(rank)) {
    return "server " + std::to_string(rank) + " is not in the cluster";
  }
  if (draining_.count(rank)) {
    LOG(INFO) << "server " << rank << " is being drained already (asked again by " << who << ")";
    return "";
  }
  std::set<int> ranks = HomeRanks();
  ranks.erase(rank);
  std::vector<size_t> moved;
  try {
    moved = cluster_.chains.Drain(rank, ranks);
  } catch (const Error& e) {
    return e.what();
  }
  draining_.insert(rank);
  for (const auto& [id, member] : cluster_.members) {
    if (member.info.role() == proto::SERVER && member.info.rank() == rank) {
      cluster_.membership.Record("drain", member.info, "\"by\": " + JsonQuote(who));
    }
  }
  LOG(WARNING) << "server " << rank << " is drained (asked by " << who << "): its key range(s) "
               << JoinRanges(moved) << " move to other servers while pushes go on; it leaves "
               << "once none is left on it";
  *started = true;
  return "";
}

bool Resharding::AdvanceMoves(std::vector<int>* released_ids) {
  const std::vector<std::pair<size_t, int>> left = cluster_.chains.Trim();
  for (const auto& [range, rank] : left) {
    LOG(INFO) << "key range " << range << " moved off server " << rank;
  }
  std::vector<int> released;
  for (int rank : draining_) {
    if (!cluster_.chains.Names(rank)) released.push_back(rank);
  }
  for (int rank : released) {
    const int id = ReleaseDrained(rank);
    if (id >= 0) released_ids->push_back(id);
  }
  return !left.empty() || !released.empty();
}

int Resharding::ReleaseDrained(int rank) {
  draining_.erase(rank);
  if (cluster_.server_vacant.erase(rank)) {
    // It died while being drained, and nothing is left on it: no
    // replacement is awaited any more.
    --cluster_.num_servers;
    LOG(WARNING) << "server " << rank << ", drained and gone, is no longer awaited; "
                 << cluster_.num_servers << " server(s) now";
    return -1;
  }
  for (const auto& [id, member] : cluster_.members) {
    if (member.info.role() != proto::SERVER || member.info.rank() != rank) continue;
    const proto::NodeInfo info = member.info;
    const int node_id = id;
    // Told first, so that it exits rather than take the view without it for
    // a fault to recover from.
    Message shutdown = ControlMessage(proto::SHUTDOWN);
    send_(node_id, shutdown);
    cluster_.members.erase(node_id);
    cluster_.removed.emplace(node_id, "it was drained");
    cluster_.server_ranks.erase(rank);
    --cluster_.num_servers;
    cluster_.membership.Record("leave", info, "\"reason\": \"drained\"");
    LOG(WARNING) << "server " << rank << " (node " << node_id << ") was drained: no key range "
                 << "is left on it, and it leaves the cluster; " << cluster_.num_servers
                 << " server(s) now";
    return node_id;
  }
  return -1;
}

}  // namespace keel
