#include "scheduler/barriers.h"

#include <glog/logging.h>

#include "kv/node.h"
#include "scheduler/control_message.h"

namespace keel {

BarrierTable::BarrierTable(Send send) : send_(std::move(send)) {}

void BarrierTable::Arrive(const proto::Meta& meta, const Members& members, bool whole) {
  const int group = meta.barrier_group();
  if (group == 0 || (group & ~kAllGroup) != 0) {
    LOG(WARNING) << "ignored a barrier with group mask " << group << " from node " << meta.sender();
    return;
  }
  const std::string& tag = meta.barrier_tag();
  if (!tag.empty() && released_tags_[group].count(tag)) {
    // The group passed this point before this node joined: it goes on.
    Release(meta.sender(), group, meta.barrier_id());
    return;
  }
  waiting_[group][meta.sender()] = {meta.barrier_id(), tag};
  if (whole) TryRelease(group, members);
}

void BarrierTable::ReleaseReady(const Members& members) {
  for (auto& [group, waiting] : waiting_) TryRelease(group, members);
}

void BarrierTable::Passed(int group, const std::string& tag) {
  if (tag.empty() || group == 0 || (group & ~kAllGroup) != 0) return;
  released_tags_[group].insert(tag);
  // A node that arrived before it heard the group had passed (its release
  // lost with the earlier scheduler) goes on now.
  auto& waiting = waiting_[group];
  for (auto it = waiting.begin(); it != waiting.end();) {
    if (it->second.second == tag) {
      Release(it->first, group, it->second.first);
      it = waiting.erase(it);
    } else {
      ++it;
    }
  }
}

void BarrierTable::Forget(int id, const Members& members, bool whole) {
  for (auto& [group, waiting] : waiting_) {
    waiting.erase(id);
    if (whole) TryRelease(group, members);
  }
}

void BarrierTable::TryRelease(int group, const Members& members) {
  auto& waiting = waiting_[group];
  if (waiting.empty() || waiting.size() < CountInGroup(members, group)) return;
  const std::string tag = waiting.begin()->second.second;
  for (const auto& [id, barrier] : waiting) {
    if (barrier.second != tag) {
      LOG(WARNING) << "barrier of group " << group << ": node " << id << " waits at '"
                   << barrier.second << "', others at '" << tag << "'";
      return;
    }
  }
  for (const auto& [id, barrier] : waiting) Release(id, group, barrier.first);
  if (!tag.empty()) released_tags_[group].insert(tag);
  waiting.clear();
}

void BarrierTable::Release(int node, int group, uint64_t barrier_id) {
  Message release = ControlMessage(proto::BARRIER);
  release.meta.set_barrier_group(group);
  release.meta.set_barrier_id(barrier_id);
  send_(node, release);
}

}  // namespace keel
