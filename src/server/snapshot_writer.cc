#include "server/snapshot_writer.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "base/checksum.h"
#include "base/error.h"
#include "base/time.h"
#include "kv/node.h"

namespace keel {
namespace {

void SortByKey(SnapshotTable* table) {
  const size_t width = table->row_width;
  std::vector<size_t> order(table->keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return table->keys[a] < table->keys[b]; });
  std::vector<uint64_t> keys(order.size());
  std::vector<float> rows(table->rows.size());
  for (size_t i = 0; i < order.size(); ++i) {
    keys[i] = table->keys[order[i]];
    std::memcpy(rows.data() + i * width, table->rows.data() + order[i] * width,
                sizeof(float) * width);
  }
  table->keys = std::move(keys);
  table->rows = std::move(rows);
  if (!table->pushed_at.empty()) {
    std::vector<uint64_t> pushed_at(order.size());
    for (size_t i = 0; i < order.size(); ++i) pushed_at[i] = table->pushed_at[order[i]];
    table->pushed_at = std::move(pushed_at);
  }
}

}  // namespace

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
  for (SnapshotTable& table : job.snapshot.tables) {
    SortByKey(&table);
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
  const std::string bytes = EncodeSnapshot(job.snapshot, &checksum);
  CheckpointStore store(job.uri);
  store.PutFile(job.checkpoint, file.name(), bytes);
  file.set_bytes(bytes.size());
  file.set_rows(rows);
  file.set_checksum(ChecksumHex(checksum));
  LOG(INFO) << "checkpoint " << job.checkpoint << ": wrote " << rows
            << (job.snapshot.delta ? " changed" : "") << " rows (" << bytes.size() << " bytes) to "
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
