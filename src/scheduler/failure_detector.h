// FailureDetector: judges which members the scheduler has lost, from their
// heartbeats' silence and from the probes of those whose connection closed.
//
// A member silent past the heartbeat timeout is lost (before the first view it
// is only logged, once). Silence is not judged while the scheduler itself is
// likelier the one cut off: while most members (at least two, more than half
// of those not done) have not been heard for half the timeout, after a spell
// in which it heard none, or after its own monitor ran late (stopped or
// starved); every member then gets a whole timeout from the moment it hears
// them again. A member whose connection closed is a suspect (Suspects probes
// its address) and is lost if its address refuses connections.
//
// It reads and updates only the members' heartbeat clocks and silence marks
// and reads which workers are done and whether a view went out, all the
// scheduler's state it is given; it removes no one: Departures, which owns
// it, removes the members it names.
//
// Not synchronized: Departures calls it under the scheduler's lock (from its receive
// thread, its monitor loop and the suspects' probe threads).
#ifndef KEEL_SCHEDULER_FAILURE_DETECTOR_H_
#define KEEL_SCHEDULER_FAILURE_DETECTOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kv/van.h"
#include "scheduler/members.h"
#include "scheduler/suspects.h"

namespace keel {

class FailureDetector {
 public:
  // The scheduler's state it watches (it outlives the detector).
  struct Watched {
    Members& members;
    // Workers that reported the end of their job (node id -> error): no
    // longer expected to send heartbeats.
    const std::map<int, std::string>& done;
    const bool& published;  // a view has gone out
  };

  FailureDetector(double heartbeat_timeout_s, Watched watched);

  // The first view goes out at `now`: every member's silence counts from
  // then (nodes send heartbeats once they have a view), not from its
  // registration.
  void StartClocks(double now);
  // When the monitor is to look next: when the next member may fall silent
  // past the timeout (now + 1 s if none sooner; sooner while it hears too
  // few).
  double NextDeadline(double now) const;
  // The monitor's round came `stall` seconds later than it was due (the
  // scheduler was stopped, SIGSTOP, or starved of CPU): the heartbeats that
  // arrived meanwhile are still unread, and the stall began at some unknown
  // time before: no silence can be judged. Beyond 0.5 s late, every member's
  // last heartbeat becomes `now`.
  void ForgiveOwnStall(double now, double stall);
  // Whether the scheduler hears enough of its members to judge silence at
  // `now`: not while most of them have not been heard for half the timeout,
  // once the view is out. Their silence is then likelier its own isolation
  // (a partition, its network, a stall in reading) than the failure of most
  // of them at once, so no member is removed for silence meanwhile (a closed
  // connection to an address that refuses connections still removes one at
  // once). The round that finds it hearing enough again gives every member a
  // whole timeout from then and judges none: the others' held heartbeats may
  // come later, their TCP resends backing off.
  bool HearsTheCluster(double now);
  // A message from a member at `now`. The first after a spell in which none
  // was heard for half the timeout gives every member a whole timeout.
  void HeardFromAMember(double now);
  // The members silent past the timeout at `now`, with how long, to remove;
  // before the first view they are only logged (once).
  std::vector<std::pair<int, double>> FindSilent(double now);

  // Member `id`'s connection closed: it becomes a suspect, probed by
  // `suspects` (counted and logged unless its probes are under way already).
  void Suspect(int id, const Member& member, Suspects& suspects);
  // Suspect `id`, probed at `address` (its member's), got `probe`: why it is
  // to be removed, or "" if it stays (its address answered or did not refuse;
  // or before the first view, when it keeps its rank). Logs either way.
  std::string Judge(int id, const Member& member, const std::string& address,
                    const AddressProbe& probe);

  // See SchedulerStatus.
  uint64_t deaf_spells() const { return deaf_spells_; }
  uint64_t suspected() const { return suspected_; }
  uint64_t suspects_cleared() const { return suspects_cleared_; }

 private:
  // Whether most members are quiet at `now` (above).
  bool HearsTooFew(double now) const;
  // Every member's last heartbeat becomes at least `now`.
  void GiveEveryoneATimeout(double now);

  const double heartbeat_timeout_s_;
  Watched watched_;
  double heard_any_ = 0;  // MonotonicSeconds() a member was last heard from
  bool deaf_ = false;     // in a spell of hearing too few (HearsTheCluster)
  uint64_t deaf_spells_ = 0;
  uint64_t suspected_ = 0, suspects_cleared_ = 0;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_FAILURE_DETECTOR_H_
