// BarrierTable: the barriers the scheduler runs for the nodes.
//
// A node waits at a barrier of a group (a mask of RoleBit: servers, workers or
// both) until every member of that group waits at it, all with the same tag;
// then every one of them is released. The tags of released barriers are
// remembered, so a node that arrives at a tag its group has passed already (it
// joined later, say as a replacement) is released at once. A node that leaves
// the view is no longer waited for.
//
// Not synchronized: the scheduler calls it under its lock.
#ifndef KEEL_SCHEDULER_BARRIERS_H_
#define KEEL_SCHEDULER_BARRIERS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "keel.pb.h"
#include "kv/message.h"
#include "scheduler/members.h"

namespace keel {

class BarrierTable {
 public:
  // Sends a release to a node (the scheduler stamps it).
  using Send = std::function<void(int node_id, Message& message)>;

  explicit BarrierTable(Send send);

  // A BARRIER request from `meta.sender()`, a member. Releases the group if
  // everyone in `members` that belongs to it now waits at the same tag and
  // `whole`: before a restarted scheduler's first view, `members` holds only
  // the nodes registered with it so far, and a node that has not yet may be
  // on its way to the same barrier, so the arrival only waits (ReleaseReady
  // looks again once the view is out). A group mask naming no role, or an
  // unknown one, is logged and ignored.
  void Arrive(const proto::Meta& meta, const Members& members, bool whole);

  // Releases every group whose members in `members` all wait at one tag: when
  // the membership has become whole (the first view).
  void ReleaseReady(const Members& members);

  // A node of an earlier run of a restarted scheduler was released from
  // `tag` of `group`: a node waiting there (its release lost with the
  // earlier scheduler) is released now, and one arriving later at once. An
  // empty tag or a group mask naming no role is ignored.
  void Passed(int group, const std::string& tag);

  // Node `id` has left (`members` no longer holds it): barriers stop waiting
  // for it, and those it alone held back are released if `whole` (as in
  // Arrive).
  void Forget(int id, const Members& members, bool whole);

 private:
  // Releases `group`'s barrier if every member of it has arrived at one tag.
  void TryRelease(int group, const Members& members);
  void Release(int node, int group, uint64_t barrier_id);

  Send send_;
  // Per group: the nodes waiting, with the barrier id and tag each used.
  std::map<int, std::map<int, std::pair<uint64_t, std::string>>> waiting_;
  // Tagged barriers already released, per group.
  std::map<int, std::set<std::string>> released_tags_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_BARRIERS_H_
