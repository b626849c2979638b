// Members: the nodes in the cluster view, as the scheduler tracks them.
// Plain data, not synchronized: the scheduler reads and changes it under its
// lock.
#ifndef KEEL_SCHEDULER_MEMBERS_H_
#define KEEL_SCHEDULER_MEMBERS_H_

#include <cstddef>
#include <map>
#include <set>
#include <string>

#include "keel.pb.h"

namespace keel {

struct Member {
  proto::NodeInfo info;          // role, id, rank, advertised address
  double last_heartbeat = 0;     // MonotonicSeconds() when last heard from
  bool reported_silent = false;  // logged as silent and not heard from since
  // The connection (Message::route) its admitted REGISTER came on: every
  // message claiming its id must come on it.
  std::string route;
  bool rejoined = false;  // a node of an earlier run of a restarted scheduler
  // The answer its REGISTER got: a repeated REGISTER on its route gets it again.
  proto::Meta answer;
  // A server's latest report of the pushes each key range's rows reflect on
  // it (HEARTBEAT range_pushes), and when it came (MonotonicSeconds()).
  std::map<size_t, uint64_t> range_pushes;
  double range_pushes_at = 0;
  // The epoch of the latest view sent to it (0: none): the next goes to it as
  // a delta from that one (see Scheduler::SendView).
  uint64_t view_epoch = 0;
};

// By node id.
using Members = std::map<int, Member>;

// A server removed for silence, whose process may come back with the ranges
// it held (HeldCopy), until its rank registers again.
struct FormerHolder {
  int id = 0;
  double removed_at = 0;        // MonotonicSeconds()
  std::set<size_t> ranges;      // those it was a whole replica of
  std::string checkpoint_then;  // the latest committed checkpoint then ("" none)
};
// By server rank.
using FormerHolders = std::map<int, FormerHolder>;

// The node ids of the members with `role`.
std::set<int> MemberIds(const Members& members, proto::Role role);

// How many members belong to barrier group `group` (a mask of RoleBit).
size_t CountInGroup(const Members& members, int group);

}  // namespace keel

#endif  // KEEL_SCHEDULER_MEMBERS_H_
