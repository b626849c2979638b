// ControlReplies: what the scheduler remembers of the control requests nodes
// await (BARRIER, CHECKPOINT, ORPHANS), so that a request a node sends again
// is never taken twice: answered again if its answer went out (and was lost),
// ignored while it is still pending.
//
// Nodes send an awaited request again until it is answered (Node resends on
// its heartbeat thread), because control messages can be lost like any other
// (--faults_on_control drops them on purpose). Each node awaits at most one
// request of each command at a time, and its keys (the barrier id for
// BARRIER, the request's sequence otherwise) only grow, so one entry per node
// and command is enough: a key below the entry's is a stale copy.
//
// Not synchronized: the scheduler calls it under its own lock.
#ifndef KEEL_SCHEDULER_CONTROL_REPLIES_H_
#define KEEL_SCHEDULER_CONTROL_REPLIES_H_

#include <cstdint>
#include <map>
#include <utility>

#include "kv/message.h"

namespace keel {

class ControlReplies {
 public:
  enum class Seen {
    kNew,       // take it
    kPending,   // a copy of one being handled, or a stale one: ignore it
    kAnswered,  // answered already: answer() holds the answer to send again
  };

  // Whether `command` is one whose requests are awaited and sent again.
  static bool Tracked(proto::Command command);
  // The request's key: its barrier id (BARRIER) or sequence.
  static uint64_t KeyOf(const proto::Meta& meta);

  // A tracked request from `node`; records it when it is new.
  Seen OnRequest(int node, const proto::Meta& request);
  // An answer about to go to `node`; kept if it answers the request recorded.
  void OnAnswer(int node, const Message& answer);
  // The answer kept for `node`'s latest request of `command` (OnRequest said
  // kAnswered).
  const Message& answer(int node, proto::Command command) const;
  // `node` left: its entries go.
  void Forget(int node);

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t key = 0;
    bool answered = false;
    Message answer;
  };
  std::map<std::pair<int, proto::Command>, Entry> entries_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_CONTROL_REPLIES_H_
