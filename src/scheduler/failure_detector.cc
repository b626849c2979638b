#include "scheduler/failure_detector.h"

#include <glog/logging.h>

#include <algorithm>

namespace keel {
namespace {

// The monitor's round when no heartbeat deadline comes sooner (replacement
// timeouts expire with time too).
constexpr double kMonitorRoundS = 1;
// How far past a heartbeat deadline the monitor wakes, so that the silence
// it finds is past the timeout.
constexpr double kDeadlineSlackS = 0.001;

}  // namespace

FailureDetector::FailureDetector(double heartbeat_timeout_s, Watched watched)
    : heartbeat_timeout_s_(heartbeat_timeout_s), watched_(watched) {}

void FailureDetector::GiveEveryoneATimeout(double now) {
  for (auto& [id, member] : watched_.members)
    member.last_heartbeat = std::max(member.last_heartbeat, now);
}

void FailureDetector::StartClocks(double now) {
  GiveEveryoneATimeout(now);
  heard_any_ = now;
}

double FailureDetector::NextDeadline(double now) const {
  // While it hears nobody the deadlines are past: it looks often for the
  // first heartbeat heard again.
  if (HearsTooFew(now)) return now + std::min(kMonitorRoundS, heartbeat_timeout_s_ / 10);
  double next = now + kMonitorRoundS;
  for (const auto& [id, member] : watched_.members) {
    if (watched_.done.count(id) || member.reported_silent) continue;
    next = std::min(next, member.last_heartbeat + heartbeat_timeout_s_ + kDeadlineSlackS);
  }
  return next;
}

void FailureDetector::ForgiveOwnStall(double now, double stall) {
  // Below this a late round is the machine's scheduling noise.
  constexpr double kToleratedLateness = 0.5;
  if (stall <= kToleratedLateness) return;
  // The stall began at some unknown time before its round was due, and the
  // heartbeats that came meanwhile are still unread: no silence can be judged
  // until the nodes have had a whole timeout to be heard again (a node that
  // died meanwhile is found then, or at once by its closed connection).
  LOG(WARNING) << "the scheduler did not run for at least " << stall
               << " s (stopped or starved): every node gets a whole heartbeat timeout from now";
  GiveEveryoneATimeout(now);
}

bool FailureDetector::HearsTooFew(double now) const {
  if (!watched_.published) return false;
  int quiet = 0, undone = 0;
  for (const auto& [id, member] : watched_.members) {
    if (watched_.done.count(id)) continue;
    ++undone;
    quiet += now - member.last_heartbeat > heartbeat_timeout_s_ / 2 ? 1 : 0;
  }
  return quiet >= 2 && 2 * quiet > undone;
}

bool FailureDetector::HearsTheCluster(double now) {
  if (HearsTooFew(now)) {
    if (!deaf_) {
      deaf_ = true;
      ++deaf_spells_;
      LOG(WARNING) << "the scheduler has not heard from most of its nodes for "
                   << heartbeat_timeout_s_ / 2
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
  GiveEveryoneATimeout(now);
  return false;
}

void FailureDetector::HeardFromAMember(double now) {
  if (watched_.published && heard_any_ > 0 && now - heard_any_ > heartbeat_timeout_s_ / 2) {
    // Heard from none for half the timeout: every node gets a whole timeout.
    if (!deaf_) {
      ++deaf_spells_;
      LOG(WARNING) << "the scheduler heard from none of its nodes for " << now - heard_any_
                   << " s: every node gets a whole heartbeat timeout from now";
    }
    GiveEveryoneATimeout(now);
  }
  heard_any_ = std::max(heard_any_, now);  // a relayed heartbeat is dated back
}

std::vector<std::pair<int, double>> FailureDetector::FindSilent(double now) {
  std::vector<std::pair<int, double>> silent;
  for (auto& [id, member] : watched_.members) {
    if (watched_.done.count(id)) continue;
    const double silence = now - member.last_heartbeat;
    if (silence <= heartbeat_timeout_s_) continue;
    // A node marked silent before the first view and never heard from since
    // (it died then) is removed once the view is out: its rank is free for a
    // replacement. Only a node of a restarted scheduler's earlier run
    // heartbeats before that view, so only its silence is logged (the others
    // start heartbeats with their first view; the monitor's note of who has
    // registered says what holds it).
    if (watched_.published) {
      silent.emplace_back(id, silence);
    } else if (!member.reported_silent) {
      member.reported_silent = true;
      if (member.rejoined) {
        LOG(WARNING) << proto::Role_Name(member.info.role()) << " " << member.info.rank()
                     << " (node " << id << " at " << member.info.address() << ") silent for "
                     << silence << " s";
      }
    }
  }
  return silent;
}

void FailureDetector::Suspect(int id, const Member& member, Suspects& suspects) {
  if (suspects.Add(id, member.info.address())) {
    ++suspected_;
    LOG(INFO) << proto::Role_Name(member.info.role()) << " " << member.info.rank() << " (node "
              << id << " at " << member.info.address()
              << "): its connection closed; probing its address";
  }
}

std::string FailureDetector::Judge(int id, const Member& member, const std::string& address,
                                   const AddressProbe& probe) {
  const std::string who = proto::Role_Name(member.info.role()) + " " +
                          std::to_string(member.info.rank()) + " (node " + std::to_string(id) +
                          " at " + address + ")";
  if (!probe.refused) {
    ++suspects_cleared_;
    LOG(INFO) << who << " stays: its connection closed, but "
              << (probe.failure.empty() ? "it answers at its address"
                                        : "its address did not refuse the probe (" + probe.failure +
                                              "); heartbeats decide");
    return "";
  }
  const std::string reason = "its connection closed and " + address + " refuses connections";
  if (!watched_.published) {
    LOG(WARNING) << who << ": " << reason << " (it keeps its rank until the cluster is complete)";
    return "";
  }
  return reason;
}

}  // namespace keel
