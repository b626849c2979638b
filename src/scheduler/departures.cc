#include "scheduler/departures.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/time.h"

namespace keel {
namespace {

// The membership log's fields for a server's departure.
std::string ServerLeaveFields(const std::string& reason, const RangeChains::Departure& departure) {
  std::vector<std::string> promoted;
  for (const auto& [range, primary] : departure.promoted) {
    promoted.push_back(JsonObject().Integer("range", range).Integer("primary", primary).Close());
  }
  return "\"reason\": " + JsonQuote(reason) + ", \"promoted\": " + JsonArray(promoted) +
         ", \"ranges_without_replica\": [" + JoinRanges(departure.alone) + "]";
}

// "0.15 s", for the log.
std::string FormatSeconds(double seconds) {
  char text[32];
  snprintf(text, sizeof(text), "%.2f s", seconds);
  return text;
}

// What a server's departure did to the chains, for the log.
std::string Promotions(const RangeChains::Departure& departure) {
  std::string moved;
  for (const auto& [range, primary] : departure.promoted) {
    moved += (moved.empty() ? "" : "; ") + std::string("key range ") + std::to_string(range) +
             ": backup server " + std::to_string(primary) + " is promoted to primary";
  }
  return moved;
}

}  // namespace

Departures::Departures(ClusterState* cluster, MembershipLog* membership, OrphanedShares* shares,
                       Hooks hooks, double heartbeat_timeout_s, int replication,
                       std::unique_ptr<Suspects> suspects)
    : cluster_(cluster),
      membership_(membership),
      shares_(shares),
      hooks_(std::move(hooks)),
      heartbeat_timeout_s_(heartbeat_timeout_s),
      replication_(replication),
      detector_(heartbeat_timeout_s, {cluster_->members, cluster_->done, cluster_->published}),
      suspects_(std::move(suspects)) {}

void Departures::Stop() {
  if (suspects_) suspects_->Stop();
}

void Departures::HeardFrom(int id, Member& member, double now) {
  detector_.HeardFromAMember(now);
  member.last_heartbeat = now;
  if (member.reported_silent) {
    member.reported_silent = false;
    // Before the first view only a node of an earlier run was logged silent.
    if (member.rejoined || cluster_->published) {
      LOG(INFO) << "node " << id << " is heard from again";
    }
  }
}

void Departures::MonitorRound(double now, double due, double caught_up_at) {
  detector_.ForgiveOwnStall(now, now - due);
  // Once the job is over, no one is removed: the nodes are shutting down.
  if (cluster_->shut_down || !detector_.HearsTheCluster(now)) return;
  // Silence as of the last moment every message that had arrived was
  // read: heartbeats waiting unread behind a backlog, or for a receive
  // thread starved of CPU, do not count as missing. But by at most a
  // heartbeat timeout: a stream of messages with no pause (a flood)
  // delays a removal, it cannot prevent it.
  const double bound = now - heartbeat_timeout_s_;
  const double judged_at = std::min(now, std::max(caught_up_at, bound));
  if (caught_up_at < bound && !lagging_) {
    LOG(WARNING) << "the scheduler's receive thread has had messages waiting for over "
                 << heartbeat_timeout_s_
                 << " s (starved of CPU, or flooded): silence is judged as of "
                 << heartbeat_timeout_s_ << " s ago";
  }
  lagging_ = caught_up_at < bound;
  for (const auto& [id, silence] : detector_.FindSilent(judged_at)) {
    Remove(id, "no heartbeat for " + std::to_string(silence) + " s", /*may_return=*/true);
  }
}

void Departures::OnConnectionClosed(int id) {
  if (cluster_->shut_down || cluster_->done.count(id)) return;
  const auto member = cluster_->members.find(id);
  if (member == cluster_->members.end()) return;
  detector_.Suspect(id, member->second, *suspects_);
}

void Departures::OnSuspectProbed(int id, const std::string& address, const AddressProbe& probe) {
  if (cluster_->shut_down || cluster_->done.count(id)) return;
  const auto member = cluster_->members.find(id);
  if (member == cluster_->members.end() || member->second.info.address() != address) return;
  const std::string reason = detector_.Judge(id, member->second, address, probe);
  if (reason.empty()) return;
  Remove(id, reason);
}

void Departures::Remove(int id, const std::string& reason, bool may_return) {
  // Gone already: a drained server let go by an earlier removal's moves.
  if (!cluster_->members.count(id)) return;
  if (cluster_->members.at(id).info.role() == proto::SERVER) {
    RemoveServer(id, reason, may_return);
  } else {
    RemoveWorker(id, reason);
  }
}

void Departures::RemoveWorker(int id, const std::string& reason) {
  const Member member = cluster_->members[id];
  LOG(WARNING) << "worker " << member.info.rank() << " (node " << id << " at "
               << member.info.address() << ") leaves the cluster: " << reason;
  membership_->Record("leave", member.info, "\"reason\": " + JsonQuote(reason));
  cluster_->members.erase(id);
  cluster_->removed.emplace(id, reason);
  hooks_.disconnect(id);  // what it still sends is answered on its own connection
  cluster_->worker_ranks.erase(member.info.rank());
  cluster_->done.erase(id);
  shares_->WorkerLeft(id, member.info.rank(), reason);
  hooks_.after_departure(id);
}

void Departures::RemoveServer(int id, const std::string& reason, bool may_return) {
  const Member member = cluster_->members[id];
  const int rank = member.info.rank();
  if (may_return) {
    FormerHolder& former = cluster_->former_holders[rank];
    former.id = id;
    former.removed_at = MonotonicSeconds();
    const std::vector<size_t> whole = cluster_->chains.WholeReplicas(rank);
    former.ranges = std::set<size_t>(whole.begin(), whole.end());
    std::string uri;
    former.checkpoint_then = hooks_.latest_checkpoint(&uri);
  } else {
    cluster_->former_holders.erase(rank);
  }
  cluster_->members.erase(id);
  cluster_->removed.emplace(id, reason);
  hooks_.disconnect(id);  // what it still sends is answered on its own connection
  cluster_->server_ranks.erase(rank);
  // Vacant even if it was being drained: a range it held alone waits for its
  // replacement (which restores it, then hands it on: the drain goes on).
  cluster_->server_vacant[rank] = MonotonicSeconds();
  const RangeChains::Departure departure = cluster_->chains.RemoveServer(rank);
  membership_->Record("leave", member.info, ServerLeaveFields(reason, departure));
  const std::string moved = Promotions(departure);
  LOG(WARNING) << "server " << rank << " (node " << id << " at " << member.info.address()
               << ") leaves the cluster: " << reason << (moved.empty() ? "" : "; " + moved)
               << (departure.alone.empty()
                       ? "; no acknowledged update is lost (its ranges have live replicas)"
                       : "");
  DeclareLost(departure.alone, member.info, &member);
  hooks_.after_departure(id);
  hooks_.advance_moves();  // a move may wait on it no more
}

void Departures::DepartEarlierHolder(const proto::NodeInfo& holder, const std::string& reason) {
  const int rank = holder.rank();
  // An address may be missing from a view an earlier run's node brought
  // back (none there: nothing is said of it).
  const std::string where = holder.address().empty() ? "" : " at " + holder.address();
  LOG(WARNING) << proto::Role_Name(holder.role()) << " " << rank << " (node " << holder.id()
               << where << ") leaves the cluster: " << reason;
  cluster_->removed.emplace(holder.id(), reason);
  hooks_.disconnect(holder.id());
  membership_->Record("leave", holder, "\"reason\": " + JsonQuote(reason));
  if (holder.role() == proto::WORKER) {
    shares_->WorkerLeft(holder.id(), rank, reason);
    return;
  }
  cluster_->server_vacant[rank] = MonotonicSeconds();
  if (!cluster_->chains.started()) return;
  const RangeChains::Departure departure = cluster_->chains.RemoveServer(rank);
  for (const auto& [range, primary] : departure.promoted) {
    LOG(WARNING) << "key range " << range << ": backup server " << primary
                 << " is promoted to primary";
  }
  DeclareLost(departure.alone, holder);
}

void Departures::DeclareLost(const std::vector<size_t>& ranges, const proto::NodeInfo& holder,
                             const Member* last_report) {
  if (ranges.empty()) return;
  const int rank = holder.rank();
  const double age = last_report && last_report->range_pushes_at > 0
                         ? MonotonicSeconds() - last_report->range_pushes_at
                         : 0;
  std::string held;  // what the last report said each range held
  for (size_t range : ranges) {
    int64_t pushes = -1;
    if (last_report && last_report->range_pushes_at > 0) {
      auto found = last_report->range_pushes.find(range);
      pushes = found == last_report->range_pushes.end() ? 0 : static_cast<int64_t>(found->second);
    }
    if (pushes >= 0) {
      held += (held.empty() ? "" : ", ") + std::string("range ") + std::to_string(range) + " " +
              std::to_string(pushes) + " push(es)";
    }
    if (!cluster_->lost.Lose(range, rank, cluster_->view.epoch(), WallSeconds(), pushes, age))
      continue;
    membership_->Record(
        "range_lost", holder,
        "\"range\": " + std::to_string(range) +
            ", \"view_epoch\": " + std::to_string(cluster_->view.epoch()) +
            ", \"losses\": " + std::to_string(cluster_->lost.ranges().at(range).losses) +
            ", \"replication\": " + std::to_string(replication_) +
            ", \"pushes_at_last_report\": " + (pushes >= 0 ? std::to_string(pushes) : "null") +
            ", \"report_age_s\": " + (pushes >= 0 ? JsonNumberOrNull(age) : "null"));
  }
  LOG(ERROR) << "key range(s) " << JoinRanges(ranges) << " lost every replica: server " << rank
             << " held them last, and what it acknowledged that no checkpoint holds is lost"
             << (replication_ > 0 ? " (a second failure before its backups were whole)"
                                  : " (--replication=0 keeps no backup)")
             << (held.empty() ? "; no report of what they held came from it"
                              : "; by its last report (" + FormatSeconds(age) +
                                    " before it left) they held " + held +
                                    ", and it may have applied more since")
             << "; requests for them wait for a server started again with --rank " << rank
             << " (which restores them from the latest checkpoint), or for a server removed "
                "while alive that held them to come back with its copy (--rebuild_wait)";
}

}  // namespace keel
