// HeldCopy: what a server the scheduler removed while it was alive (paused,
// or cut off past the heartbeat timeout) keeps of its key ranges when it
// starts over as a new process.
//
// Its rows may be the freshest copy left of a range that lost every other
// replica meanwhile (its backup role ended when it was removed, and the
// range's last server then died). Before starting over the server writes
// the ranges it was a whole replica of in its last view to a checkpoint
// store of its own (a folder under the temporary directory), with the pushes
// each reflected (RangePushes), and the new process brings that HeldCopy in
// its REGISTER. The scheduler decides whether to rebuild a range from it
// (Scheduler::UseHeldCopy); if so the registration answer names the copy as
// the checkpoint to restore, as it names the latest checkpoint otherwise.
// What the copy lacks is only what the range's last holder acknowledged
// after the copy's server was removed.
//
// The ranges' at-most-once records go with the copy (HeldApplied, beside it):
// a push the copy holds that its worker sends again to the rebuilt range (it
// got no answer: the server was paused) is recognised and not applied twice.
#ifndef KEEL_SERVER_HELD_COPY_H_
#define KEEL_SERVER_HELD_COPY_H_

#include <cstddef>
#include <set>
#include <string>

#include "keel.pb.h"
#include "server/server_state.h"

namespace keel {

// Writes the ranges of `state` that are whole (Shard::ready) to a checkpoint
// in a new folder `folder` (emptied first) and returns what the REGISTER
// carries. Call only while nothing else touches `state` (the node stopped).
// Throws Error if the copy cannot be written.
proto::HeldCopy WriteHeldCopy(const ServerState& state, int rank, const std::string& folder);

// The copy's description saved beside it, and read back by the new process
// (throws Error naming the file if it cannot be read).
void SaveHeldCopy(const proto::HeldCopy& held, const std::string& folder);
proto::HeldCopy LoadHeldCopy(const std::string& folder);

// Loads into `state` the at-most-once records the copy `held` kept for the
// ranges in `ranges` (throws Error naming the file if it cannot be read).
void RestoreHeldApplied(const proto::HeldCopy& held, const std::set<size_t>& ranges,
                        ServerState* state);

// The folder a server started as process `pid` keeps its copy in.
std::string HeldCopyFolder(int pid);

}  // namespace keel

#endif  // KEEL_SERVER_HELD_COPY_H_
