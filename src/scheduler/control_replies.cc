#include "scheduler/control_replies.h"

namespace keel {

bool ControlReplies::Tracked(proto::Command command) {
  return command == proto::BARRIER || command == proto::CHECKPOINT || command == proto::ORPHANS;
}

uint64_t ControlReplies::KeyOf(const proto::Meta& meta) {
  return meta.command() == proto::BARRIER ? meta.barrier_id() : meta.sequence();
}

ControlReplies::Seen ControlReplies::OnRequest(int node, const proto::Meta& request) {
  const uint64_t key = KeyOf(request);
  auto [it, added] = entries_.try_emplace({node, request.command()});
  Entry& entry = it->second;
  if (!added && key < entry.key) return Seen::kPending;  // a stale copy
  if (!added && key == entry.key) return entry.answered ? Seen::kAnswered : Seen::kPending;
  entry = Entry();
  entry.key = key;
  return Seen::kNew;
}

void ControlReplies::OnAnswer(int node, const Message& answer) {
  auto it = entries_.find({node, answer.meta.command()});
  if (it == entries_.end() || it->second.key != KeyOf(answer.meta)) return;
  it->second.answered = true;
  it->second.answer = answer;
}

const Message& ControlReplies::answer(int node, proto::Command command) const {
  return entries_.at({node, command}).answer;
}

void ControlReplies::Forget(int node) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->first.first == node ? entries_.erase(it) : std::next(it);
  }
}

}  // namespace keel
