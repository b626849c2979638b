#include "scheduler/resharding.h"

#include <glog/logging.h>

#include <utility>

#include "base/error.h"
#include "base/json.h"
#include "base/utf8.h"
#include "scheduler/control_message.h"

namespace keel {

Resharding::Resharding(ClusterState* cluster, MembershipLog* membership, Hooks hooks, bool secured)
    : cluster_(cluster), membership_(membership), hooks_(std::move(hooks)), secured_(secured) {}

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
  std::set<int> ranks = cluster_->server_ranks;
  for (int rank : draining_) ranks.erase(rank);
  return ranks;
}

void Resharding::Join(const Member& member) {
  const int rank = member.info.rank();
  ++cluster_->num_servers;
  std::vector<size_t> moved;
  try {
    moved = cluster_->chains.Join(rank, HomeRanks());
  } catch (const Error& e) {  // AdmissionRefusal checked the range count
    LOG(ERROR) << "server " << rank << " joined but holds no key range: " << e.what();
    return;
  }
  LOG(INFO) << "server " << rank << " (node " << member.info.id() << ") joins the running job: "
            << "it takes key range(s) " << JoinRanges(moved)
            << ", copying each while pushes go on; " << cluster_->num_servers << " server(s) now";
}

void Resharding::OnRequest(const Message& request) {
  // An admin client, not a member: over CURVE it holds the cluster secret.
  const proto::Meta& meta = request.meta;
  const std::string who =
      "an admin client at " +
      (request.peer_host.empty() ? std::string("an unknown host") : request.peer_host);
  const bool loopback = request.peer_host.rfind("127.", 0) == 0 || request.peer_host == "::1";
  const std::string refusal = Drain(meta.drain_rank(), who, loopback);
  Message reply = ControlMessage(proto::DRAIN);
  reply.meta.set_sequence(meta.sequence());
  reply.meta.set_epoch(cluster_->view.epoch());
  reply.meta.set_drain_rank(meta.drain_rank());
  reply.meta.set_error(ValidUtf8(refusal));
  if (!refusal.empty())
    LOG(WARNING) << "refused to drain server " << meta.drain_rank() << ": " << refusal;
  hooks_.reply(request, reply);
}

std::string Resharding::Drain(int rank, const std::string& who, bool loopback) {
  if (cluster_->shut_down) return "the job is over";
  if (!secured_ && !loopback) {
    return "without a cluster secret (plain TCP) only a client on the scheduler's own host may "
           "drain servers: start the cluster with --secret_file to drain from elsewhere";
  }
  if (!cluster_->published) return "the job has not started";
  bool started = false;
  const std::string refusal = StartDrain(rank, who, &started);
  if (!started) return refusal;
  hooks_.publish_view();  // the ranges' new servers join their chains and copy them
  AdvanceMoves();         // nothing to copy: it leaves at once
  return "";
}

std::string Resharding::StartDrain(int rank, const std::string& who, bool* started) {
  *started = false;
  if (!cluster_->server_ranks.count(rank)) {
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
    moved = cluster_->chains.Drain(rank, ranks);
  } catch (const Error& e) {
    return e.what();
  }
  draining_.insert(rank);
  for (const auto& [id, member] : cluster_->members) {
    if (member.info.role() == proto::SERVER && member.info.rank() == rank) {
      membership_->Record("drain", member.info, "\"by\": " + JsonQuote(who));
    }
  }
  LOG(WARNING) << "server " << rank << " is drained (asked by " << who << "): its key range(s) "
               << JoinRanges(moved) << " move to other servers while pushes go on; it leaves "
               << "once none is left on it";
  *started = true;
  return "";
}

void Resharding::AdvanceMoves() {
  const std::vector<std::pair<size_t, int>> left = cluster_->chains.Trim();
  for (const auto& [range, rank] : left) {
    LOG(INFO) << "key range " << range << " moved off server " << rank;
  }
  std::vector<int> released;
  for (int rank : draining_) {
    if (!cluster_->chains.Names(rank)) released.push_back(rank);
  }
  std::vector<int> gone;
  for (int rank : released) {
    const int id = ReleaseDrained(rank);
    if (id >= 0) gone.push_back(id);
  }
  if (left.empty() && released.empty()) return;
  for (int id : gone) hooks_.forget(id);
  hooks_.publish_view();
  hooks_.notify();
}

int Resharding::ReleaseDrained(int rank) {
  draining_.erase(rank);
  if (cluster_->server_vacant.erase(rank)) {
    // It died while being drained, and nothing is left on it: no
    // replacement is awaited any more.
    --cluster_->num_servers;
    LOG(WARNING) << "server " << rank << ", drained and gone, is no longer awaited; "
                 << cluster_->num_servers << " server(s) now";
    return -1;
  }
  for (const auto& [id, member] : cluster_->members) {
    if (member.info.role() != proto::SERVER || member.info.rank() != rank) continue;
    const proto::NodeInfo info = member.info;
    const int node_id = id;
    // Told first, so that it exits rather than take the view without it for
    // a fault to recover from.
    Message shutdown = ControlMessage(proto::SHUTDOWN);
    hooks_.send(node_id, shutdown);
    cluster_->members.erase(node_id);
    cluster_->removed.emplace(node_id, "it was drained");
    cluster_->server_ranks.erase(rank);
    --cluster_->num_servers;
    membership_->Record("leave", info, "\"reason\": \"drained\"");
    LOG(WARNING) << "server " << rank << " (node " << node_id << ") was drained: no key range "
                 << "is left on it, and it leaves the cluster; " << cluster_->num_servers
                 << " server(s) now";
    return node_id;
  }
  return -1;
}

}  // namespace keel
