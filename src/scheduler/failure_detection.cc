// Failure detection: nodes silent past the heartbeat timeout leave the view,
// and so, at once, do nodes whose connection closed and whose address
// refuses connections (FailureDetector judges both); and what their
// departure changes (ranks left vacant, chains closing over a departed
// server, barriers and checkpoints no longer waiting for them).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/json.h"
#include "base/time.h"
#include "scheduler/scheduler.h"

namespace keel {
namespace {

// The membership log's fields for a server's departure.
std::string ServerLeaveFields(const std::string& reason, const RangeChains::Departure& departure) {
  std::string promoted;
  for (const auto& [range, primary] : departure.promoted) {
    promoted += (promoted.empty() ? "" : ", ") + std::string("{\"range\": ") +
                std::to_string(range) + ", \"primary\": " + std::to_string(primary) + "}";
  }
  return "\"reason\": " + JsonQuote(reason) + ", \"promoted\": [" + promoted +
         "], \"ranges_without_replica\": [" + JoinRanges(departure.alone) + "]";
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

void Scheduler::MonitorLoop() {
  // The shortest wait between rounds: a deadline passed on the clock but not
  // yet as of the receive thread's catching up (below) is looked at again
  // after the receive thread's poll interval, not in a loop that would keep
  // the lock from it.
  constexpr double kMinWaitS = 0.01;
  bool lagging = false;  // judging as of the bound below (logged once a spell)
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const double before = MonotonicSeconds();
    const double wake = std::max(detector_.NextDeadline(before), before + kMinWaitS);
    changed_.wait_for(lock, std::chrono::duration<double>(wake - before),
                      [this] { return stopping_; });
    const double now = MonotonicSeconds();
    detector_.ForgiveOwnStall(now, now - wake);
    monitor_ran_ = now;
    // Once the job is over, no one is removed: the nodes are shutting down.
    if (!shut_down_ && detector_.HearsTheCluster(now)) {
      // Silence as of the last moment every message that had arrived was
      // read: heartbeats waiting unread behind a backlog, or for a receive
      // thread starved of CPU, do not count as missing. But by at most a
      // heartbeat timeout: a stream of messages with no pause (a flood)
      // delays a removal, it cannot prevent it.
      const double bound = now - options_.heartbeat_timeout_s;
      const double judged_at = std::min(now, std::max(van_.caught_up_at(), bound));
      if (van_.caught_up_at() < bound && !lagging) {
        LOG(WARNING) << "the scheduler's receive thread has had messages waiting for over "
                     << options_.heartbeat_timeout_s
                     << " s (starved of CPU, or flooded): silence is judged as of "
                     << options_.heartbeat_timeout_s << " s ago";
      }
      lagging = van_.caught_up_at() < bound;
      for (const auto& [id, silence] : detector_.FindSilent(judged_at)) {
        RemoveMember(id, "no heartbeat for " + std::to_string(silence) + " s",
                     /*may_return=*/true);
      }
    }
    shares_.AnswerExpired();  // replacement timeouts expire with time
    changed_.notify_all();
  }
}

void Scheduler::OnConnectionClosed(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || shut_down_ || done_.count(id)) return;
  const auto member = members_.find(id);
  if (member == members_.end()) return;
  detector_.Suspect(id, member->second, *suspects_);
}

void Scheduler::OnSuspectProbed(int id, const std::string& address, const AddressProbe& probe) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || shut_down_ || done_.count(id)) return;
  const auto member = members_.find(id);
  if (member == members_.end() || member->second.info.address() != address) return;
  const std::string reason = detector_.Judge(id, member->second, address, probe);
  if (reason.empty()) return;
  RemoveMember(id, reason);
}

void Scheduler::RemoveMember(int id, const std::string& reason, bool may_return) {
  // Gone already: a drained server let go by an earlier removal's moves.
  if (!members_.count(id)) return;
  if (members_.at(id).info.role() == proto::SERVER) {
    RemoveServer(id, reason, may_return);
  } else {
    RemoveWorker(id, reason);
  }
}

void Scheduler::RemoveWorker(int id, const std::string& reason) {
  const Member member = members_[id];
  LOG(WARNING) << "worker " << member.info.rank() << " (node " << id << " at "
               << member.info.address() << ") leaves the cluster: " << reason;
  membership_.Record("leave", member.info, "\"reason\": " + JsonQuote(reason));
  members_.erase(id);
  removed_.emplace(id, reason);
  van_.Disconnect(id);  // what it still sends is answered on its own connection
  worker_ranks_.erase(member.info.rank());
  done_.erase(id);
  shares_.WorkerLeft(id, member.info.rank(), reason);
  AfterDeparture(id);
}

void Scheduler::RemoveServer(int id, const std::string& reason, bool may_return) {
  const Member member = members_[id];
  const int rank = member.info.rank();
  if (may_return) {
    FormerHolder& former = former_holders_[rank];
    former.id = id;
    former.removed_at = MonotonicSeconds();
    const std::vector<size_t> whole = chains_.WholeReplicas(rank);
    former.ranges = std::set<size_t>(whole.begin(), whole.end());
    std::string uri;
    former.checkpoint_then = checkpoints_->LatestCommitted(&uri);
  } else {
    former_holders_.erase(rank);
  }
  members_.erase(id);
  removed_.emplace(id, reason);
  van_.Disconnect(id);  // what it still sends is answered on its own connection
  server_ranks_.erase(rank);
  // Vacant even if it was being drained: a range it held alone waits for its
  // replacement (which restores it, then hands it on: the drain goes on).
  server_vacant_[rank] = MonotonicSeconds();
  const RangeChains::Departure departure = chains_.RemoveServer(rank);
  membership_.Record("leave", member.info, ServerLeaveFields(reason, departure));
  const std::string moved = Promotions(departure);
  LOG(WARNING) << "server " << rank << " (node " << id << " at " << member.info.address()
               << ") leaves the cluster: " << reason << (moved.empty() ? "" : "; " + moved)
               << (departure.alone.empty()
                       ? "; no acknowledged update is lost (its ranges have live replicas)"
                       : "");
  DeclareLost(departure.alone, member.info, &member);
  AfterDeparture(id);
  AdvanceMoves();  // a move may wait on it no more
}

void Scheduler::DepartEarlierHolder(const proto::NodeInfo& holder, const std::string& reason) {
  const int rank = holder.rank();
  LOG(WARNING) << proto::Role_Name(holder.role()) << " " << rank << " (node " << holder.id()
               << " at " << holder.address() << ") leaves the cluster: " << reason;
  removed_.emplace(holder.id(), reason);
  van_.Disconnect(holder.id());
  membership_.Record("leave", holder, "\"reason\": " + JsonQuote(reason));
  if (holder.role() == proto::WORKER) {
    shares_.WorkerLeft(holder.id(), rank, reason);
    return;
  }
  server_vacant_[rank] = MonotonicSeconds();
  if (!chains_.started()) return;
  const RangeChains::Departure departure = chains_.RemoveServer(rank);
  for (const auto& [range, primary] : departure.promoted) {
    LOG(WARNING) << "key range " << range << ": backup server " << primary
                 << " is promoted to primary";
  }
  DeclareLost(departure.alone, holder);
}

void Scheduler::DeclareLost(const std::vector<size_t>& ranges, const proto::NodeInfo& holder,
                            const Member* last_report) {
  if (ranges.empty()) return;
  const int rank = holder.rank();
  const double age =
      last_report && last_report->range_pushes_at > 0
          ? MonotonicSeconds() - last_report->range_pushes_at
          : 0;
  std::string held;  // what the last report said each range held
  for (size_t range : ranges) {
    int64_t pushes = -1;
    if (last_report && last_report->range_pushes_at > 0) {
      auto found = last_report->range_pushes.find(range);
      pushes = found == last_report->range_pushes.end() ? 0
                                                         : static_cast<int64_t>(found->second);
    }
    if (pushes >= 0) {
      held += (held.empty() ? "" : ", ") + std::string("range ") + std::to_string(range) + " " +
              std::to_string(pushes) + " push(es)";
    }
    if (!lost_.Lose(range, rank, view_.epoch(), WallSeconds(), pushes, age)) continue;
    membership_.Record("range_lost", holder,
                       "\"range\": " + std::to_string(range) +
                           ", \"view_epoch\": " + std::to_string(view_.epoch()) +
                           ", \"losses\": " + std::to_string(lost_.ranges().at(range).losses) +
                           ", \"replication\": " + std::to_string(options_.replication) +
                           ", \"pushes_at_last_report\": " +
                           (pushes >= 0 ? std::to_string(pushes) : "null") +
                           ", \"report_age_s\": " + (pushes >= 0 ? JsonNumberOrNull(age) : "null"));
  }
  LOG(ERROR) << "key range(s) " << JoinRanges(ranges) << " lost every replica: server " << rank
             << " held them last, and what it acknowledged that no checkpoint holds is lost"
             << (options_.replication > 0 ? " (a second failure before its backups were whole)"
                                          : " (--replication=0 keeps no backup)")
             << (held.empty() ? "; no report of what they held came from it"
                              : "; by its last report (" + FormatSeconds(age) +
                                    " before it left) they held " + held +
                                    ", and it may have applied more since")
             << "; requests for them wait for a server started again with --rank " << rank
             << " (which restores them from the latest checkpoint), or for a server removed "
                "while alive that held them to come back with its copy (--rebuild_wait)";
}

void Scheduler::AfterDeparture(int id) {
  barriers_.Forget(id, members_);
  replies_.Forget(id);
  PublishView();  // and the checkpoints hear of the new membership
  changed_.notify_all();
}

}  // namespace keel
