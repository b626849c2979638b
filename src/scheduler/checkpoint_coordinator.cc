#include "scheduler/checkpoint_coordinator.h"

#include <glog/logging.h>

#include <algorithm>
#include <ctime>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "base/utf8.h"
#include "kv/node.h"
#include "scheduler/control_message.h"

namespace keel {
namespace {

// The "checkpoint" timeline line: `started` is when the copy began
// (monotonic seconds), recorded as Unix seconds.
void RecordCommit(TimelineWriter* timeline, const std::string& id, double started, uint64_t bytes,
                  const proto::CheckpointManifest& manifest, const std::string& error) {
  const double seconds = MonotonicSeconds() - started;
  timeline->Record("checkpoint", "\"id\": " + JsonQuote(id) +
                                     ", \"started\": " + JsonUnixTime(WallSeconds() - seconds) +
                                     ", \"seconds\": " + JsonNumberOrNull(seconds) +
                                     ", \"files\": " + std::to_string(manifest.files_size()) +
                                     ", \"bytes\": " + std::to_string(bytes) +
                                     (error.empty() ? "" : ", \"error\": " + JsonQuote(error)));
}

}  // namespace

CheckpointCoordinator::CheckpointCoordinator(CheckpointOptions options, Send send,
                                             Committed committed)
    : options_(std::move(options)), send_(std::move(send)), committed_(std::move(committed)) {
  if (options_.every < 0) throw MakeError("--checkpoint_every must be >= 0");
  if (options_.full_every < 1) throw MakeError("--checkpoint_full_every must be >= 1");
  if (!options_.resume.empty()) {
    auto [uri, spec] = SplitResumeSpec(options_.resume, options_.uri);
    CheckpointStore resume_store(uri);
    resume_id_ = resume_store.Resolve(spec);
    const proto::CheckpointManifest manifest = resume_store.Verify(resume_id_);
    resumed_ = manifest;
    resume_uri_ = uri;
    LOG(INFO) << "resuming from checkpoint " << resume_id_ << " in " << uri << " (epoch "
              << manifest.epoch() << ", minibatch " << manifest.batch() << ", written by "
              << manifest.num_servers() << " server(s) and " << manifest.num_workers()
              << " worker(s))";
    if (!options_.uri.empty() && uri == options_.uri) {
      last_committed_ = resume_id_;
      last_started_ = resume_id_;
      depths_[resume_id_] = manifest.delta_depth();
    }
  }
  if (enabled()) {
    store_ = std::make_unique<CheckpointStore>(options_.uri);
    const std::string latest = store_->Latest();
    if (resume_uri_ != options_.uri && !options_.takes_over) RefuseEarlierJobs();
    if (latest > last_committed_) last_committed_ = latest;
    commit_thread_ = std::thread([this] { CommitLoop(); });
  }
}

void CheckpointCoordinator::RefuseEarlierJobs() {
  const std::vector<std::string> committed = store_->Committed();
  if (committed.empty()) return;
  throw MakeError("--checkpoint_uri ", options_.uri, " holds ", committed.size(),
                  " checkpoint(s) of an earlier job (the latest ", committed.back(),
                  "), and this job does not resume from them: its own would mix with them. "
                  "Go on from them with --resume=latest, or give this job a folder of its own "
                  "(`keel checkpoint ls ",
                  options_.uri, "` lists them)");
}

CheckpointCoordinator::~CheckpointCoordinator() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  if (commit_thread_.joinable()) commit_thread_.join();
}

void CheckpointCoordinator::FillView(proto::ClusterView* view) const {
  view->set_checkpoint_every(enabled() ? options_.every : -1);
  view->set_checkpoint_uri(options_.uri);
  view->set_resume_uri(resume_uri_);
  view->set_resume_checkpoint(resume_id_);
  view->set_checkpoint_delta(enabled() && options_.delta && options_.full_every > 1);
}

std::string CheckpointCoordinator::DeltaBase(bool committed_only, int* depth) const {
  *depth = 0;
  // Only on the checkpoint copied last, committed or still being written
  // (not abandoned), by this job (or resumed from).
  if (!options_.delta || last_started_.empty()) return "";
  int base_depth = 0;
  if (auto committed = depths_.find(last_started_); committed != depths_.end()) {
    base_depth = committed->second;
  } else if (auto writing = writing_.find(last_started_);
             !committed_only && writing != writing_.end()) {
    base_depth = writing->second.planned_depth;
  } else {
    return "";
  }
  if (base_depth + 1 >= options_.full_every) return "";
  *depth = base_depth + 1;
  return last_started_;
}

void CheckpointCoordinator::Answer(int node, uint64_t sequence, const std::string& error,
                                   bool preemption) {
  Message reply = ControlMessage(proto::CHECKPOINT);
  reply.meta.set_sequence(sequence);
  reply.meta.set_error(ValidUtf8(error));
  reply.meta.set_preempt(preemption);
  send_(node, reply);
}

void CheckpointCoordinator::OnWorker(int node, int rank, const proto::Meta& meta,
                                     const std::set<int>& workers, const std::set<int>& servers,
                                     int num_servers) {
  proto::WorkerCursor cursor = meta.cursor();
  cursor.set_rank(rank);
  if (cursor.epoch_done()) {
    finished_[node] = cursor;
    // Awaited only to be sent again if lost: nothing waits for the answer.
    if (meta.sequence() != 0) Answer(node, meta.sequence(), "");
  } else {
    if (!enabled()) {
      Answer(node, meta.sequence(), "checkpoints are not enabled (--checkpoint_uri)");
      return;
    }
    ready_[node] = Ready{cursor, meta.sequence(), meta.final()};
    if (meta.has_trainer()) trainer_ = meta.trainer();
  }
  TryStart(workers, servers, num_servers);
}

void CheckpointCoordinator::OnMembership(const std::set<int>& workers, const std::set<int>& servers,
                                         int num_servers) {
  for (auto it = ready_.begin(); it != ready_.end();) {
    it = workers.count(it->first) ? std::next(it) : ready_.erase(it);
  }
  for (auto it = copies_left_.begin(); it != copies_left_.end();) {
    it = servers.count(*it) ? std::next(it) : copies_left_.erase(it);
  }
  // A server that left before writing its snapshot: that checkpoint is lost.
  std::vector<std::string> abandoned;
  for (auto& [id, writing] : writing_) {
    for (auto it = writing.servers_left.begin(); it != writing.servers_left.end();) {
      if (servers.count(*it)) {
        ++it;
        continue;
      }
      writing.error += (writing.error.empty() ? "" : "; ") + std::string("server node ") +
                       std::to_string(*it) + " left before writing its snapshot";
      it = writing.servers_left.erase(it);
    }
    if (writing.servers_left.empty() && !writing.error.empty()) abandoned.push_back(id);
  }
  for (const std::string& id : abandoned) FinishCommit(id, writing_[id].error);
  if (!copying_.empty() && copies_left_.empty()) ReleaseCopyWaiters();
  TryStart(workers, servers, num_servers);
}

void CheckpointCoordinator::TryStart(const std::set<int>& workers, const std::set<int>& servers,
                                     int num_servers) {
  // No checkpoint without servers to copy (a scheduler before its view).
  if (!copying_.empty() || ready_.empty() || workers.empty() || servers.empty()) return;
  // Once the preemption checkpoint began, no other: the job ends after it.
  if (preempting_ && !preempt_id_.empty()) return;
  if (!preempting_) AnswerPassedPoints(workers);
  if (ready_.empty()) return;
  const Ready& first = ready_.begin()->second;
  const bool preemption = preempting_ && preempt_id_.empty() && !first.final;
  if (!(preemption ? AllStoppedIn(first, workers) : AllAt(first, workers))) return;
  const uint64_t batch = PointBatch(first, preemption);
  const std::string id = CheckpointId(first.cursor.epoch(), batch);
  if (!last_committed_.empty() && id <= last_committed_) {
    // Resumed from this very point: it is on storage already.
    for (const auto& [node, ready] : ready_) Answer(node, ready.sequence, "", preemption);
    ready_.clear();
    if (preemption) {
      preempt_id_ = last_committed_;
      preempt_over_ = true;
    }
    return;
  }
  if (first.final && !preemption && options_.delta && !writing_.empty()) {
    // The final checkpoint waits for those still being written, so that it
    // may be a delta of a committed one (FinishCommit starts it).
    final_held_ = {workers, servers, num_servers};
    return;
  }
  if (preemption) preempt_id_ = id;
  int depth = 0;
  // The job's last checkpoint (final, or the preemption's) must not be lost
  // with a base that fails after it: it builds on a committed one only (the
  // final one waited for it above; the preemption's has no time to).
  const std::string delta_base = DeltaBase(first.final || preemption, &depth);
  Writing& writing = writing_[id];
  writing.delta_base = delta_base;
  writing.planned_depth = depth;
  last_started_ = id;
  writing.started = MonotonicSeconds();
  FillManifest(id, first, batch, workers, num_servers, &writing.manifest);
  TakeWaiters(&writing, preemption);
  copying_ = id;
  copies_left_ = servers;
  writing.servers_left = servers;
  LOG(INFO) << "checkpoint " << id << (preemption ? " (preemption)" : "")
            << ": servers copy their rows"
            << (delta_base.empty() ? "" : " changed since " + delta_base);
  for (int server : servers) {
    Message request;
    request.meta.set_command(proto::SNAPSHOT);
    request.meta.set_checkpoint(id);
    request.meta.set_checkpoint_uri(options_.uri);
    request.meta.set_delta_base(delta_base);
    send_(server, request);
  }
}

void CheckpointCoordinator::AnswerPassedPoints(const std::set<int>& workers) {
  for (auto it = ready_.begin(); it != ready_.end();) {
    const proto::WorkerCursor& point = it->second.cursor;
    const bool passed =
        !it->second.final && std::any_of(workers.begin(), workers.end(), [&](int worker) {
          return worker != it->first && Past(worker, point);
        });
    if (!passed) {
      ++it;
      continue;
    }
    LOG(WARNING) << "worker " << point.rank() << " is at epoch " << point.epoch() << " minibatch "
                 << point.batches() << ", which the other workers have passed: it goes on "
                 << "without a checkpoint there";
    Answer(it->first, it->second.sequence, "");
    it = ready_.erase(it);
  }
}

bool CheckpointCoordinator::Past(int node, const proto::WorkerCursor& point) const {
  const auto at = [&](const proto::WorkerCursor& cursor) {
    return std::make_pair(cursor.epoch(), cursor.batches());
  };
  auto ready = ready_.find(node);
  if (ready != ready_.end()) return !ready->second.final && at(ready->second.cursor) > at(point);
  // A share finished at or after the point passed it (one that ended
  // before it never reaches it: AllAt counts that one as ready).
  auto done = finished_.find(node);
  return done != finished_.end() && at(done->second) >= at(point);
}

bool CheckpointCoordinator::AllStoppedIn(const Ready& point, const std::set<int>& workers) const {
  const int epoch = point.cursor.epoch();
  for (int worker : workers) {
    auto ready = ready_.find(worker);
    if (ready != ready_.end()) {
      if (ready->second.cursor.epoch() != epoch || ready->second.final) return false;
      continue;
    }
    auto done = finished_.find(worker);
    if (done == finished_.end() || done->second.epoch() != epoch) return false;
  }
  return true;
}

uint64_t CheckpointCoordinator::PointBatch(const Ready& first, bool preemption) const {
  uint64_t batch = first.cursor.batches();
  if (!preemption) return batch;
  for (const auto& [node, ready] : ready_) batch = std::max(batch, ready.cursor.batches());
  return batch;
}

bool CheckpointCoordinator::PreemptionOver(std::string* id, std::string* error) const {
  if (!preempt_over_) return false;
  *id = preempt_error_.empty() ? preempt_id_ : "";
  *error = preempt_error_;
  return true;
}

bool CheckpointCoordinator::AllAt(const Ready& point, const std::set<int>& workers) const {
  const int epoch = point.cursor.epoch();
  const uint64_t batch = point.cursor.batches();
  for (int worker : workers) {
    auto ready = ready_.find(worker);
    if (ready != ready_.end()) {
      if (ready->second.cursor.epoch() != epoch || ready->second.cursor.batches() != batch ||
          ready->second.final != point.final) {
        return false;  // still on its way (cannot happen while the others wait)
      }
      continue;
    }
    auto done = finished_.find(worker);
    const bool past = !point.final && done != finished_.end() && done->second.epoch() == epoch &&
                      done->second.batches() < batch;
    if (!past) return false;
  }
  return true;
}

void CheckpointCoordinator::FillManifest(const std::string& id, const Ready& point, uint64_t batch,
                                         const std::set<int>& workers, int num_servers,
                                         proto::CheckpointManifest* manifest) const {
  manifest->set_format_version(1);
  manifest->set_id(id);
  manifest->set_epoch(point.cursor.epoch());
  manifest->set_batch(batch);
  manifest->set_final(point.final);
  manifest->set_created(UtcTimestamp());
  manifest->set_num_servers(num_servers);
  manifest->set_num_workers(static_cast<int>(workers.size()));
  manifest->set_previous(last_committed_);
  *manifest->mutable_trainer() = trainer_;
  for (int worker : workers) {
    auto ready = ready_.find(worker);
    proto::WorkerCursor* cursor = manifest->add_workers();
    *cursor = ready != ready_.end() ? ready->second.cursor : finished_.at(worker);
    // A finished share is its minibatches and examples like any other: the
    // resumed worker skips them and counts them (a cursor marked done would
    // be skipped without its examples counting towards the epoch).
    cursor->set_epoch_done(false);
  }
}

void CheckpointCoordinator::TakeWaiters(Writing* writing, bool preemption) {
  for (const auto& [node, ready] : ready_) {
    if (ready.final || preemption) {
      writing->final_waiters[node] = ready.sequence;
    } else {
      copy_waiters_[node] = ready.sequence;
    }
  }
  ready_.clear();
}

void CheckpointCoordinator::ReleaseCopyWaiters() {
  for (const auto& [worker, sequence] : copy_waiters_) Answer(worker, sequence, "");
  copy_waiters_.clear();
  copying_.clear();
}

void CheckpointCoordinator::OnServer(int node, const proto::Meta& meta) {
  if (meta.response()) {  // copied
    if (meta.checkpoint() != copying_) return;
    copies_left_.erase(node);
    if (copies_left_.empty()) ReleaseCopyWaiters();
    return;
  }
  auto found = writing_.find(meta.checkpoint());
  if (found == writing_.end()) return;
  Writing& writing = found->second;
  if (!writing.servers_left.erase(node)) return;
  if (!meta.error().empty()) {
    writing.error += (writing.error.empty() ? "" : "; ") + meta.error();
  } else {
    *writing.manifest.add_files() = meta.file();
  }
  if (!writing.servers_left.empty()) return;
  if (!writing.error.empty()) {
    FinishCommit(meta.checkpoint(), writing.error);
    return;
  }
  writing.complete = true;
  CommitInOrder();
}

void CheckpointCoordinator::CommitInOrder() {
  // In the order they were taken: a checkpoint waits until every earlier one
  // is committed or abandoned, so LATEST and the pruning that follows a
  // commit never pass a delta still waiting for its base.
  for (auto it = writing_.begin(); it != writing_.end(); ++it) {
    Writing& writing = it->second;
    if (writing.queued) continue;
    if (!writing.complete) return;
    const std::string id = it->first;
    const bool delta = std::any_of(writing.manifest.files().begin(), writing.manifest.files().end(),
                                   [](const proto::CheckpointFile& file) { return file.delta(); });
    if (delta) {
      if (writing.delta_base.empty()) {
        FinishCommit(id, "a server wrote a delta where none was asked for");
        return;  // FinishCommit went on with the rest
      }
      if (writing_.count(writing.delta_base)) return;  // its base is still being committed
      auto depth = depths_.find(writing.delta_base);
      if (depth == depths_.end()) {
        FinishCommit(id,
                     "it is a delta of checkpoint " + writing.delta_base + ", which was abandoned");
        return;
      }
      writing.manifest.set_delta_of(writing.delta_base);
      writing.manifest.set_delta_depth(depth->second + 1);
    }
    writing.queued = true;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      queue_.push_back(writing.manifest);
    }
    queue_changed_.notify_all();
  }
}

void CheckpointCoordinator::FinishCommit(const std::string& id, const std::string& error) {
  auto found = writing_.find(id);
  if (found == writing_.end()) return;
  Writing& writing = found->second;
  uint64_t bytes = 0;
  for (const auto& file : writing.manifest.files()) bytes += file.bytes();
  if (timeline_) RecordCommit(timeline_, id, writing.started, bytes, writing.manifest, error);
  if (error.empty()) {
    LOG(INFO) << "checkpoint " << id << " committed: " << writing.manifest.files_size()
              << " file(s), " << bytes << " bytes"
              << (writing.manifest.delta_of().empty()
                      ? ""
                      : " (a delta of " + writing.manifest.delta_of() + ")")
              << ", " << MonotonicSeconds() - writing.started << " s after the copy began";
    if (id > last_committed_) last_committed_ = id;
    depths_[id] = writing.manifest.delta_depth();
    ++stats_.committed;
    stats_.last_committed_at = MonotonicSeconds();
    stats_.last_seconds = stats_.last_committed_at - writing.started;
    stats_.last_bytes = bytes;
  } else {
    ++stats_.abandoned;
    LOG(ERROR) << "checkpoint " << id << " abandoned: " << error;
  }
  const bool preemption = id == preempt_id_;
  if (preemption) {
    preempt_over_ = true;
    preempt_error_ = error;
  }
  for (const auto& [worker, sequence] : writing.final_waiters) {
    Answer(worker, sequence, error, preemption);
  }
  writing_.erase(found);  // `error` and `id` may be its own: not used after this
  CommitInOrder();
  if (final_held_ && writing_.empty()) {
    const HeldFinal held = *final_held_;
    final_held_.reset();
    TryStart(held.workers, held.servers, held.num_servers);
  }
}

void CheckpointCoordinator::CommitLoop() {
  std::unique_lock<std::mutex> lock(queue_mutex_);
  while (true) {
    queue_changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    proto::CheckpointManifest manifest = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::string error;
    try {
      store_->Commit(manifest);
    } catch (const std::exception& e) {
      error = std::string("commit failed: ") + e.what();
    }
    if (error.empty() && options_.keep > 0) {
      try {
        for (const std::string& deleted : store_->Prune(options_.keep)) {
          LOG(INFO) << "deleted checkpoint " << deleted << " (--keep_checkpoints " << options_.keep
                    << ")";
        }
      } catch (const std::exception& e) {
        LOG(WARNING) << "old checkpoints not deleted: " << e.what();
      }
    }
    committed_(manifest.id(), error);
    lock.lock();
  }
}

}  // namespace keel
