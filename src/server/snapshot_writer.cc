#include "server/snapshot_writer.h"

#include <glog/logging.h>

#include <algorithm>

#include "base/checksum.h"
#include "base/error.h"
#include "base/time.h"
#include "kv/node.h"

namespace keel {

SnapshotWriter::SnapshotWriter(Done done) : done_(std::move(done)) {
  thread_ = std::thread([this] { Loop(); });
}

SnapshotWriter::~SnapshotWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SnapshotWriter::Write(const std::string& uri, const std::string& checkpoint,
                           ServerSnapshot snapshot) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Job{uri, checkpoint, std::move(snapshot)});
  }
  changed_.notify_all();
}

proto::CheckpointFile SnapshotWriter::WriteOne(Job& job) {
  const double begin = MonotonicSeconds();
  proto::CheckpointFile file;
  file.set_name(SnapshotFileName(job.snapshot.server_rank));
  file.set_server_rank(job.snapshot.server_rank);
  file.set_delta(job.snapshot.delta);
  uint64_t rows = 0;
  // In place, and then written as it is encoded: besides the copy, the
  // writer holds 4 bytes a row and a 1 MiB buffer, never the file whole.
  SortSnapshotTables(&job.snapshot);
  for (SnapshotTable& table : job.snapshot.tables) {
    // A key evicted, pushed again and evicted again is listed once.
    std::sort(table.deleted.begin(), table.deleted.end());
    table.deleted.erase(std::unique(table.deleted.begin(), table.deleted.end()),
                        table.deleted.end());
    rows += table.keys.size();
  }
  for (const auto& [first, last] : job.snapshot.spans) {
    proto::KeySpan* span = file.add_spans();
    span->set_first(first);
    span->set_last(last);
  }
  uint64_t checksum = 0;
  CheckpointStore store(job.uri);
  const uint64_t bytes = store.PutFilePieces(
      job.checkpoint, file.name(),
      [&](const Storage::PieceSink& sink) { checksum = WriteSnapshot(job.snapshot, sink); });
  file.set_bytes(bytes);
  file.set_rows(rows);
  file.set_checksum(ChecksumHex(checksum));
  LOG(INFO) << "checkpoint " << job.checkpoint << ": wrote " << rows
            << (job.snapshot.delta ? " changed" : "") << " rows (" << bytes << " bytes) to "
            << store.storage()->UriOf(job.checkpoint) << " in " << MonotonicSeconds() - begin
            << " s";
  return file;
}

void SnapshotWriter::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    proto::CheckpointFile file;
    std::string error;
    try {
      file = WriteOne(job);
    } catch (const std::exception& e) {
      error = e.what();
      LOG(ERROR) << "checkpoint " << job.checkpoint << ": snapshot not written: " << error;
    }
    done_(job.checkpoint, file, error);
    lock.lock();
  }
}

}  // namespace keel
