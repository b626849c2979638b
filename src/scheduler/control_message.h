// ControlMessage: the start of every message the scheduler sends a node.
#ifndef KEEL_SCHEDULER_CONTROL_MESSAGE_H_
#define KEEL_SCHEDULER_CONTROL_MESSAGE_H_

#include "keel.pb.h"
#include "kv/message.h"
#include "kv/node.h"

namespace keel {

// A message carrying `command` from the scheduler, marked as a response (the
// scheduler only answers requests or tells nodes what changed). The sender
// stamps the view epoch.
inline Message ControlMessage(proto::Command command) {
  Message message = CommandMessage(command);
  message.meta.set_sender(kSchedulerId);
  message.meta.set_response(true);
  return message;
}

}  // namespace keel

#endif  // KEEL_SCHEDULER_CONTROL_MESSAGE_H_
