#include "scheduler/members.h"

#include "kv/node.h"

namespace keel {

std::set<int> MemberIds(const Members& members, proto::Role role) {
  std::set<int> ids;
  for (const auto& [id, member] : members) {
    if (member.info.role() == role) ids.insert(id);
  }
  return ids;
}

size_t CountInGroup(const Members& members, int group) {
  size_t count = 0;
  for (const auto& [id, member] : members) {
    if (group & RoleBit(member.info.role())) ++count;
  }
  return count;
}

}  // namespace keel
