// Starting over: a node the scheduler removed from the view while it was
// alive (paused, or cut off past the heartbeat timeout) replaces itself with
// a new process of the same command line (exec), which registers again and
// takes its rank back if it is still free. A worker goes on from its rank's
// last progress report; a server comes back as its rank's replacement and
// copies its ranges from their other replicas (server/server_restart.h keeps
// what it held). The old process's requests are refused by the servers (not
// from a member), so nothing stale is applied.
//
// Free functions; RejoinAsNewProcess and StartOverIfRemoved do not return
// when the node starts over.
#ifndef KEEL_LAUNCH_START_OVER_H_
#define KEEL_LAUNCH_START_OVER_H_

#include <string>
#include <vector>

#include "kv/node.h"

namespace keel {

// Replaces this process with `argv` run again (KEEL_REJOINS counts the
// times). Throws Error if exec fails.
[[noreturn]] void RejoinAsNewProcess(const std::vector<std::string>& argv);

// A server's command line as its rank's replacement: with --rank=`rank`
// (the rank whose ranges it held), without --join (one that joined the
// running job has a rank now).
std::vector<std::string> AsReplacement(const std::vector<std::string>& argv, int rank);

// Whether a node the scheduler dropped from the view starts over (at most 3
// times in a row, so a node that keeps losing its place gives up with its
// error instead).
bool ShouldStartOver(const Node& node);

// A worker whose job failed: if the failure came from leaving the view (its
// requests refused), the scheduler says so at the next heartbeat (waited for
// up to 3 heartbeat intervals and a second), and the worker starts over.
// Returns if it does not.
void StartOverIfRemoved(Node* node, const std::vector<std::string>& argv,
                        double heartbeat_interval_s);

}  // namespace keel

#endif  // KEEL_LAUNCH_START_OVER_H_
