// Live resharding: servers joining the running job (--join) and drained
// from it (DRAIN), their key ranges moving while pushes go on (see
// RangeChains for how a move runs).
#include <glog/logging.h>

#include "base/error.h"
#include "base/json.h"
#include "base/utf8.h"
#include "scheduler/control_message.h"
#include "scheduler/scheduler.h"

namespace keel {

std::set<int> Scheduler::HomeRanks() const {
  // Live servers only: a vacant rank keeps the ranges homed on it (they wait
  // for its replacement) but takes no new one, which would wait as long.
  std::set<int> ranks = server_ranks_;
  for (int rank : draining_) ranks.erase(rank);
  return ranks;
}

void Scheduler::JoinServer(const Member& member) {
  const int rank = member.info.rank();
  ++num_servers_;
  std::vector<size_t> moved;
  try {
    moved = chains_.Join(rank, HomeRanks());
  } catch (const Error& e) {  // AdmissionRefusal checked the range count
    LOG(ERROR) << "server " << rank << " joined but holds no key range: " << e.what();
    return;
  }
  LOG(INFO) << "server " << rank << " (node " << member.info.id() << ") joins the running job: "
            << "it takes key range(s) " << JoinRanges(moved)
            << ", copying each while pushes go on; " << num_servers_ << " server(s) now";
}

std::string Scheduler::Drain(int rank, const std::string& who) {
  std::lock_guard<std::mutex> lock(mutex_);
  return DrainLocked(rank, who, /*loopback=*/true);
}

std::string Scheduler::DrainLocked(int rank, const std::string& who, bool loopback) {
  if (stopping_ || shut_down_) return "the job is over";
  if (!options_.secret && !loopback) {
    return "without a cluster secret (plain TCP) only a client on the scheduler's own host may "
           "drain servers: start the cluster with --secret_file to drain from elsewhere";
  }
  if (!published_) return "the job has not started";
  if (!server_ranks_.count(rank)) {
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
    moved = chains_.Drain(rank, ranks);
  } catch (const Error& e) {
    return e.what();
  }
  draining_.insert(rank);
  for (const auto& [id, member] : members_) {
    if (member.info.role() == proto::SERVER && member.info.rank() == rank) {
      membership_.Record("drain", member.info, "\"by\": " + JsonQuote(who));
    }
  }
  LOG(WARNING) << "server " << rank << " is drained (asked by " << who << "): its key range(s) "
               << JoinRanges(moved) << " move to other servers while pushes go on; it leaves "
               << "once none is left on it";
  PublishView();   // the ranges' new servers join their chains and copy them
  AdvanceMoves();  // nothing to copy: it leaves at once
  return "";
}

void Scheduler::OnDrainRequest(const Message& message) {
  // An admin client, not a member: over CURVE it holds the cluster secret.
  const proto::Meta& meta = message.meta;
  const std::string who =
      "an admin client at " +
      (message.peer_host.empty() ? std::string("an unknown host") : message.peer_host);
  const bool loopback = message.peer_host.rfind("127.", 0) == 0 || message.peer_host == "::1";
  const std::string refusal = DrainLocked(meta.drain_rank(), who, loopback);
  Message reply = ControlMessage(proto::DRAIN);
  reply.meta.set_sequence(meta.sequence());
  reply.meta.set_epoch(view_.epoch());
  reply.meta.set_drain_rank(meta.drain_rank());
  reply.meta.set_error(ValidUtf8(refusal));
  if (!refusal.empty())
    LOG(WARNING) << "refused to drain server " << meta.drain_rank() << ": " << refusal;
  van_.Reply(message, reply);
}

void Scheduler::AdvanceMoves() {
  const std::vector<std::pair<size_t, int>> left = chains_.Trim();
  for (const auto& [range, rank] : left) {
    LOG(INFO) << "key range " << range << " moved off server " << rank;
  }
  std::vector<int> released;
  for (int rank : draining_) {
    if (!chains_.Names(rank)) released.push_back(rank);
  }
  std::vector<int> gone;
  for (int rank : released) {
    const int id = ReleaseDrained(rank);
    if (id >= 0) gone.push_back(id);
  }
  if (left.empty() && released.empty()) return;
  for (int id : gone) {
    barriers_.Forget(id, members_);
    replies_.Forget(id);
  }
  PublishView();
  changed_.notify_all();
}

int Scheduler::ReleaseDrained(int rank) {
  draining_.erase(rank);
  if (server_vacant_.erase(rank)) {
    // It died while being drained, and nothing is left on it: no
    // replacement is awaited any more.
    --num_servers_;
    LOG(WARNING) << "server " << rank << ", drained and gone, is no longer awaited; "
                 << num_servers_ << " server(s) now";
    return -1;
  }
  for (const auto& [id, member] : members_) {
    if (member.info.role() != proto::SERVER || member.info.rank() != rank) continue;
    const proto::NodeInfo info = member.info;
    const int node_id = id;
    // Told first, so that it exits rather than take the view without it for
    // a fault to recover from.
    Message shutdown = ControlMessage(proto::SHUTDOWN);
    SendTo(node_id, shutdown);
    members_.erase(node_id);
    removed_.emplace(node_id, "it was drained");
    server_ranks_.erase(rank);
    --num_servers_;
    membership_.Record("leave", info, "\"reason\": \"drained\"");
    LOG(WARNING) << "server " << rank << " (node " << node_id << ") was drained: no key range "
                 << "is left on it, and it leaves the cluster; " << num_servers_
                 << " server(s) now";
    return node_id;
  }
  return -1;
}

}  // namespace keel
