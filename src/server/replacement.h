// Replacement: what the scheduler told a server that took the rank of a
// server that left, in its answer to the server's registration
// (Node::registration).
//
// A replacement's key ranges come from live replicas (their chains name it
// as a backup) or, where none is left, from the checkpoint the scheduler
// names; a range it is primary of counts as newly promoted. A view over the
// node, cheap to make where needed; safe to call from any thread once the
// node has started.
#ifndef KEEL_SERVER_REPLACEMENT_H_
#define KEEL_SERVER_REPLACEMENT_H_

#include <string>

#include "kv/node.h"

namespace keel {

class Replacement {
 public:
  // `node` must outlive the object.
  explicit Replacement(const Node& node) : node_(node) {}

  // This server took the rank of a server that left.
  bool replaces() const;
  // The checkpoint its key ranges come from where no replica is left ("" if
  // none); `*uri`: where that checkpoint is.
  std::string restore_checkpoint(std::string* uri) const;

 private:
  const Node& node_;
};

}  // namespace keel

#endif  // KEEL_SERVER_REPLACEMENT_H_
