// Failure detection: nodes silent past the heartbeat timeout leave the view,
// and so, at once, do nodes whose connection closed and whose address
// refuses connections; and what their departure changes (ranks left vacant,
// chains closing over a departed server, barriers and checkpoints no longer
// waiting for them).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>

#include "base/json.h"
#include "base/time.h"
#include "scheduler/scheduler.h"

namespace keel {
namespace {

// The monitor's round when no heartbeat deadline comes sooner (replacement
// timeouts expire with time too).
constexpr double kMonitorRoundS = 1;
// How far past a heartbeat deadline the monitor wakes, so that the silence
// it finds is past the timeout.
constexpr double kDeadlineSlackS = 0.001;

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
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const double wake = NextSilenceDeadline(MonotonicSeconds());
    changed_.wait_for(lock, std::chrono::duration<double>(std::max(wake - MonotonicSeconds(), 0.0)),
                      [this] { return stopping_; });
    const double now = MonotonicSeconds();
    ForgiveOwnStall(now, now - wake);
    monitor_ran_ = now;
    if (HearsTheCluster(now)) {
      for (const auto& [id, silence] : FindSilent(MonotonicSeconds())) {
        RemoveMember(id, "no heartbeat for " + std::to_string(silence) + " s");
      }
    }
    shares_.AnswerExpired();  // replacement timeouts expire with time
    changed_.notify_all();
  }
}

double Scheduler::NextSilenceDeadline(double now) const {
  // While it hears nobody the deadlines are past: it looks often for the
  // first heartbeat heard again.
  if (HearsTooFew(now)) return now + std::min(kMonitorRoundS, options_.heartbeat_timeout_s / 10);
  double next = now + kMonitorRoundS;
  for (const auto& [id, member] : members_) {
    if (done_.count(id) || member.reported_silent) continue;
    next = std::min(next, member.last_heartbeat + options_.heartbeat_timeout_s + kDeadlineSlackS);
  }
  return next;
}

void Scheduler::OnConnectionClosed(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || shut_down_ || done_.count(id)) return;
  const auto member = members_.find(id);
  if (member == members_.end()) return;
  if (suspects_->Add(id, member->second.info.address())) {
    ++suspected_;
    LOG(INFO) << proto::Role_Name(member->second.info.role()) << " " << member->second.info.rank()
              << " (node " << id << " at " << member->second.info.address()
              << "): its connection closed; probing its address";
  }
}

void Scheduler::OnSuspectProbed(int id, const std::string& address, const AddressProbe& probe) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || shut_down_ || done_.count(id)) return;
  const auto member = members_.find(id);
  if (member == members_.end() || member->second.info.address() != address) return;
  const std::string who = proto::Role_Name(member->second.info.role()) + " " +
                          std::to_string(member->second.info.rank()) + " (node " +
                          std::to_string(id) + " at " + address + ")";
  if (!probe.refused) {
    ++suspects_cleared_;
    LOG(INFO) << who << " stays: its connection closed, but "
              << (probe.failure.empty() ? "it answers at its address"
                                        : "its address did not refuse the probe (" + probe.failure +
                                              "); heartbeats decide");
    return;
  }
  const std::string reason = "its connection closed and " + address + " refuses connections";
  if (!published_) {
    LOG(WARNING) << who << ": " << reason << " (it keeps its rank until the cluster is complete)";
    return;
  }
  RemoveMember(id, reason);
}

void Scheduler::RemoveMember(int id, const std::string& reason) {
  // Gone already: a drained server let go by an earlier removal's moves.
  if (!members_.count(id)) return;
  if (members_.at(id).info.role() == proto::SERVER) {
    RemoveServer(id, reason);
  } else {
    RemoveWorker(id, reason);
  }
}

void Scheduler::ForgiveOwnStall(double now, double stall) {
  // Below this a late round is the machine's scheduling noise.
  constexpr double kToleratedLateness = 0.5;
  if (stall <= kToleratedLateness) return;
  // The stall began at some unknown time before its round was due, and the
  // heartbeats that came meanwhile are still unread: no silence can be judged
  // until the nodes have had a whole timeout to be heard again (a node that
  // died meanwhile is found then, or at once by its closed connection).
  LOG(WARNING) << "the scheduler did not run for at least " << stall
               << " s (stopped or starved): every node gets a whole heartbeat timeout from now";
  for (auto& [id, member] : members_) member.last_heartbeat = std::max(member.last_heartbeat, now);
}

bool Scheduler::HearsTooFew(double now) const {
  if (!published_) return false;
  int quiet = 0, undone = 0;
  for (const auto& [id, member] : members_) {
    if (done_.count(id)) continue;
    ++undone;
    quiet += now - member.last_heartbeat > options_.heartbeat_timeout_s / 2 ? 1 : 0;
  }
  return quiet >= 2 && 2 * quiet > undone;
}

bool Scheduler::HearsTheCluster(double now) {
  if (HearsTooFew(now)) {
    if (!deaf_) {
      deaf_ = true;
      ++deaf_spells_;
      LOG(WARNING) << "the scheduler has not heard from most of its nodes for "
                   << options_.heartbeat_timeout_s / 2
                   << " s: it is likelier cut off from them (a partition, its own network) than "
                      "they all failed at once, so it removes none for silence until it hears "
                      "from most of them again";
    }
    return false;
  }
  if (!deaf_) return true;
  deaf_ = false;
  LOG(WARNING) << "the scheduler hears most of its nodes again: every node gets a whole "
                  "heartbeat timeout from now";
  for (auto& [id, member] : members_) member.last_heartbeat = std::max(member.last_heartbeat, now);
  return false;
}

void Scheduler::HeardFromAMember(double now) {
  if (published_ && heard_any_ > 0 && now - heard_any_ > options_.heartbeat_timeout_s / 2) {
    // Heard from none for half the timeout: every node gets a whole timeout.
    if (!deaf_) {
      ++deaf_spells_;
      LOG(WARNING) << "the scheduler heard from none of its nodes for " << now - heard_any_
                   << " s: every node gets a whole heartbeat timeout from now";
    }
    for (auto& [id, member] : members_)
      member.last_heartbeat = std::max(member.last_heartbeat, now);
  }
  heard_any_ = now;
}

std::vector<std::pair<int, double>> Scheduler::FindSilent(double now) {
  std::vector<std::pair<int, double>> silent;
  for (auto& [id, member] : members_) {
    if (done_.count(id)) continue;
    const double silence = now - member.last_heartbeat;
    if (silence <= options_.heartbeat_timeout_s) continue;
    // A node logged as silent before the first view and never heard from
    // since (it died then) is removed once the view is out: its rank is free
    // for a replacement.
    if (published_) {
      silent.emplace_back(id, silence);
    } else if (!member.reported_silent) {
      member.reported_silent = true;
      LOG(WARNING) << proto::Role_Name(member.info.role()) << " " << member.info.rank() << " (node "
                   << id << " at " << member.info.address() << ") silent for " << silence << " s";
    }
  }
  return silent;
}

void Scheduler::RemoveWorker(int id, const std::string& reason) {
  const Member member = members_[id];
  LOG(WARNING) << "worker " << member.info.rank() << " (node " << id << " at "
               << member.info.address() << ") leaves the cluster: " << reason;
  membership_.Record("leave", member.info, "\"reason\": " + JsonQuote(reason));
  members_.erase(id);
  removed_.emplace(id, reason);
  worker_ranks_.erase(member.info.rank());
  done_.erase(id);
  shares_.WorkerLeft(id, member.info.rank(), reason);
  AfterDeparture(id);
}

void Scheduler::RemoveServer(int id, const std::string& reason) {
  const Member member = members_[id];
  const int rank = member.info.rank();
  members_.erase(id);
  removed_.emplace(id, reason);
  server_ranks_.erase(rank);
  // Vacant even if it was being drained: a range it held alone waits for its
  // replacement (which restores it, then hands it on: the drain goes on).
  server_vacant_[rank] = MonotonicSeconds();
  const RangeChains::Departure departure = chains_.RemoveServer(rank);
  membership_.Record("leave", member.info, ServerLeaveFields(reason, departure));
  const std::string moved = Promotions(departure);
  const std::string alone = JoinRanges(departure.alone);
  LOG(WARNING) << "server " << rank << " (node " << id << " at " << member.info.address()
               << ") leaves the cluster: " << reason << (moved.empty() ? "" : "; " + moved)
               << (alone.empty()
                       ? "; no acknowledged update is lost (its ranges have live replicas)"
                       : "; requests for key range(s) " + alone +
                             ", which no other replica holds, wait for a server "
                             "started again with --rank " +
                             std::to_string(rank));
  AfterDeparture(id);
  AdvanceMoves();  // a move may wait on it no more
}

void Scheduler::AfterDeparture(int id) {
  barriers_.Forget(id, members_);
  replies_.Forget(id);
  PublishView();  // and the checkpoints hear of the new membership
  changed_.notify_all();
}

}  // namespace keel
