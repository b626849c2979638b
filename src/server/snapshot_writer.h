// SnapshotWriter: writes a server's checkpoint snapshots in the background.
//
// The server copies its rows on its receive thread (so the copy is exactly
// the state at the checkpoint) and hands them here; one writer thread sorts,
// encodes and stores them in order and reports each result. Safe for
// concurrent use without external synchronization.
#ifndef KEEL_SERVER_SNAPSHOT_WRITER_H_
#define KEEL_SERVER_SNAPSHOT_WRITER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "checkpoint.pb.h"
#include "io/checkpoint.h"

namespace keel {

class SnapshotWriter {
 public:
  // Called on the writer thread after each snapshot: `file` describes what
  // was written, or `error` says why nothing was.
  using Done = std::function<void(const std::string& checkpoint, const proto::CheckpointFile& file,
                                  const std::string& error)>;

  explicit SnapshotWriter(Done done);
  // Finishes the snapshots already queued, then stops.
  ~SnapshotWriter();

  // Queues `snapshot` (its tables' rows need not be sorted) for checkpoint
  // `checkpoint` under storage `uri`.
  void Write(const std::string& uri, const std::string& checkpoint, ServerSnapshot snapshot);

 private:
  struct Job {
    std::string uri, checkpoint;
    ServerSnapshot snapshot;
  };
  void Loop();
  proto::CheckpointFile WriteOne(Job& job);

  Done done_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace keel

#endif  // KEEL_SERVER_SNAPSHOT_WRITER_H_
