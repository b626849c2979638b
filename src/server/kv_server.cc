#include "server/kv_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "io/checkpoint.h"
#include "kv/error.h"
#include "kv/kv_worker.h"

namespace keel {

static_assert(2 * kResendSequenceHorizon <= DedupeWindow::kDefaultCapacity,
              "a resent request must still be in the server's dedupe window");

KVServer::KVServer(Node* node, const OptimizerOptions& default_optimizer,
                   std::map<uint32_t, TableSpec> tables, int64_t staleness)
    : node_(node),
      default_optimizer_(default_optimizer),
      specs_(std::move(tables)),
      gate_(staleness) {
  node_->SetViewHandler([this](const proto::ClusterView& view) { OnView(view); });
  // Check every optimizer now, not at the first request.
  MakeOptimizer(default_optimizer_);
  for (const auto& [id, spec] : specs_) MakeOptimizer(spec.optimizer);
  node_->SetDataHandler([this](Message&& message) { Handle(std::move(message)); });
  node_->SetControlHandler([this](Message&& message) {
    if (message.meta.command() == proto::SNAPSHOT) {
      OnSnapshot(message.meta);
    } else {
      LOG(WARNING) << "ignored unexpected " << Describe(message.meta);
    }
  });
  writer_ = std::make_unique<SnapshotWriter>(
      [this](const std::string& checkpoint, const proto::CheckpointFile& file,
             const std::string& error) {
        Message report;
        report.meta.set_command(proto::SNAPSHOT);
        report.meta.set_checkpoint(checkpoint);
        *report.meta.mutable_file() = file;
        report.meta.set_error(error);
        try {
          node_->SendToScheduler(report);
        } catch (const std::exception& e) {
          LOG(WARNING) << "checkpoint " << checkpoint << ": could not report: " << e.what();
        }
      });
}

KVServer::~KVServer() {
  writer_.reset();  // snapshots already copied are written and reported first
  node_->Stop();
}

std::string KVServer::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

void KVServer::OnSnapshot(const proto::Meta& meta) {
  const double begin = MonotonicSeconds();
  ServerSnapshot snapshot;
  snapshot.server_rank = node_->rank();
  if (auto ranges = node_->ranges()) {
    for (size_t r = 0; r < ranges->num_ranges(); ++r) {
      if (ranges->server(r) == node_->rank()) {
        snapshot.spans.emplace_back(ranges->begin(r), ranges->last(r));
      }
    }
  }
  uint64_t rows = 0;
  for (const auto& [id, table] : tables_) {
    SnapshotTable copy;
    copy.table = id;
    copy.weight_width = static_cast<uint32_t>(table.rows->weight_width());
    copy.row_width = static_cast<uint32_t>(table.rows->row_width());
    copy.keys.reserve(table.rows->size());
    copy.rows.reserve(table.rows->size() * copy.row_width);
    table.rows->ForEach([&](Key key, const float* row) {
      copy.keys.push_back(key);
      copy.rows.insert(copy.rows.end(), row, row + copy.row_width);
    });
    rows += copy.keys.size();
    snapshot.tables.push_back(std::move(copy));
  }
  LOG(INFO) << "checkpoint " << meta.checkpoint() << ": copied " << rows << " rows in "
            << MonotonicSeconds() - begin << " s";
  Message reply;
  reply.meta.set_command(proto::SNAPSHOT);
  reply.meta.set_response(true);
  reply.meta.set_sequence(meta.sequence());
  reply.meta.set_checkpoint(meta.checkpoint());
  node_->SendToScheduler(reply);
  writer_->Write(meta.checkpoint_uri(), meta.checkpoint(), std::move(snapshot));
}

void KVServer::Restore(const std::string& uri, const std::string& id) {
  const double begin = MonotonicSeconds();
  CheckpointStore store(uri);
  const proto::CheckpointManifest manifest = store.ReadManifest(id);
  std::vector<std::pair<Key, Key>> mine;
  auto ranges = node_->ranges();
  for (size_t r = 0; ranges && r < ranges->num_ranges(); ++r) {
    if (ranges->server(r) == node_->rank()) mine.emplace_back(ranges->begin(r), ranges->last(r));
  }
  auto overlaps = [&](Key first, Key last) {
    for (const auto& [begin_key, last_key] : mine) {
      if (first <= last_key && begin_key <= last) return true;
    }
    return false;
  };
  uint64_t loaded = 0;
  int files = 0;
  for (const proto::CheckpointFile& file : manifest.files()) {
    bool relevant = file.spans().empty();
    for (const proto::KeySpan& span : file.spans()) relevant |= overlaps(span.first(), span.last());
    if (!relevant) continue;
    ++files;
    const std::string where = store.storage()->UriOf(id + "/" + file.name());
    const std::string bytes = store.GetFile(id, file.name());
    const ServerSnapshot snapshot = DecodeSnapshot(bytes, where);
    for (const SnapshotTable& saved : snapshot.tables) {
      Table& table = TableFor(saved.table, saved.weight_width);
      if (static_cast<uint32_t>(table.rows->row_width()) != saved.row_width) {
        throw MakeError(where, ": table ", saved.table, " rows have ", saved.row_width,
                        " floats (weights and optimizer state); this job's optimizer ",
                        table.optimizer->name(), " needs ", table.rows->row_width(),
                        " (resume with the optimizer the checkpoint was written with)");
      }
      for (const auto& [first, last] : mine) {
        auto it = std::lower_bound(saved.keys.begin(), saved.keys.end(), first);
        for (; it != saved.keys.end() && *it <= last; ++it) {
          const size_t index = static_cast<size_t>(it - saved.keys.begin());
          std::memcpy(table.rows->FindOrInsert(*it), saved.rows.data() + index * saved.row_width,
                      sizeof(float) * saved.row_width);
          ++loaded;
        }
      }
    }
  }
  LOG(INFO) << "resumed from checkpoint " << id << ": loaded " << loaded << " rows of "
            << files << " snapshot file(s) in " << MonotonicSeconds() - begin << " s";
}

KVServer::Table& KVServer::TableFor(uint32_t table, uint32_t width) {
  Table& slot = tables_[table];
  if (!slot.rows) {
    auto spec = specs_.find(table);
    if (spec != specs_.end() && spec->second.width != 0 &&
        static_cast<uint32_t>(spec->second.width) != width) {
      tables_.erase(table);
      throw MakeError("table ", table, " has rows of width ", spec->second.width,
                      ", the request has width ", width);
    }
    slot.optimizer =
        MakeOptimizer(spec != specs_.end() ? spec->second.optimizer : default_optimizer_);
    const int state = slot.optimizer->StateWidth(static_cast<int>(width));
    // The table is laid out for the key range this server holds.
    Key first = ~Key{0}, last = 0;
    auto ranges = node_->ranges();
    for (size_t r = 0; ranges && r < ranges->num_ranges(); ++r) {
      if (ranges->server(r) != node_->rank()) continue;
      first = std::min(first, ranges->begin(r));
      last = std::max(last, ranges->last(r));
    }
    if (first > last) first = 0, last = ~Key{0};
    slot.rows = std::make_unique<ParameterTable>(
        static_cast<int>(width), state, spec != specs_.end() ? spec->second.initializer : nullptr,
        first, last);
  } else if (static_cast<uint32_t>(slot.rows->weight_width()) != width) {
    throw MakeError("table ", table, " has rows of width ", slot.rows->weight_width(),
                    ", the request has width ", width);
  }
  return slot;
}

Message KVServer::Dump(uint32_t table, uint32_t width) {
  std::vector<std::pair<Key, const float*>> rows;
  auto found = tables_.find(table);
  if (found != tables_.end()) {
    if (static_cast<uint32_t>(found->second.rows->weight_width()) != width) {
      throw MakeError("table ", table, " has rows of width ", found->second.rows->weight_width(),
                      ", the request has width ", width);
    }
    found->second.rows->ForEach([&](Key key, const float* row) { rows.emplace_back(key, row); });
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto keys = SharedArray<Key>::Allocate(rows.size());
  auto values = SharedArray<float>::Allocate(rows.size() * width);
  for (size_t i = 0; i < rows.size(); ++i) {
    keys[i] = rows[i].first;
    std::memcpy(values.data() + i * width, rows[i].second, sizeof(float) * width);
  }
  Message response;
  response.meta.set_key_count(rows.size());
  response.frames.push_back(AsBytes(keys));
  response.frames.push_back(AsBytes(values));
  return response;
}

void KVServer::Reply(const proto::Meta& request, Message& response) {
  proto::Meta& meta = response.meta;
  meta.set_command(request.command());
  meta.set_sequence(request.sequence());
  meta.set_table(request.table());
  if (meta.key_count() == 0) meta.set_key_count(request.key_count());
  meta.set_value_width(request.value_width());
  meta.set_response(true);
  try {
    node_->Send(request.sender(), response);
  } catch (const Error& e) {
    LOG(WARNING) << "could not answer " << Describe(request) << ": " << e.what();
  }
}

void KVServer::Handle(Message&& message) {
  const proto::Meta& meta = message.meta;
  if (view_epoch_ > 0 && !members_.count(meta.sender())) {
    // Refused (Serve says why); it must not count at the staleness gate.
    Serve(std::move(message), 0);
    return;
  }
  if (!meta.response() && meta.command() == proto::CLOCK) {
    OnClock(meta);
    return;
  }
  if (!meta.response() && meta.command() == proto::PULL && !gate_.Admits(meta.clock())) {
    // Held until the slowest worker catches up; nothing waits on a thread.
    parked_.push_back(Parked{std::move(message), MonotonicSeconds()});
    parked_total_.fetch_add(1);
    return;
  }
  const int sender = meta.sender();
  const int64_t clock = meta.clock();
  // A repeated push does not move the gate either: a late copy must not
  // count a worker that has left since.
  const bool applied = Serve(std::move(message), 0);
  if (applied && clock > 0) {
    gate_.Advance(sender, clock);
    WakeParked();
  }
}

void KVServer::OnClock(const proto::Meta& meta) {
  // Acknowledged announcements may be resent: apply each once. (A late copy
  // of a leave must not remove a worker that has joined again since.)
  if (meta.ack() && !applied_[meta.sender()].Insert(meta.sequence())) {
    duplicates_.fetch_add(1);
    Message response;
    Reply(meta, response);
    return;
  }
  if (meta.clock() == kLeaveClock) {
    gate_.Remove(meta.sender());
  } else {
    gate_.Advance(meta.sender(), meta.clock());
  }
  if (meta.ack()) {
    Message response;
    Reply(meta, response);
  }
  WakeParked();
}

void KVServer::OnView(const proto::ClusterView& view) {
  std::string replace_uri;
  const std::string replace_from = node_->restore_checkpoint(&replace_uri);
  if (!restored_ && (!view.resume_checkpoint().empty() || !replace_from.empty())) {
    restored_ = true;
    try {
      // A resumed job, or a server replacing one that left.
      if (!replace_from.empty()) {
        Restore(replace_uri, replace_from);
      } else {
        Restore(view.resume_uri(), view.resume_checkpoint());
      }
    } catch (const std::exception& e) {
      LOG(ERROR) << "cannot resume: " << e.what();
      std::lock_guard<std::mutex> lock(failure_mutex_);
      failure_ = std::string("cannot resume: ") + e.what();
    }
  }
  std::set<int> workers;
  members_.clear();
  view_epoch_ = view.epoch();
  for (const auto& node : view.nodes()) {
    if (node.role() == proto::WORKER) workers.insert(node.id());
    members_.insert(node.id());
  }
  gate_.RemoveMissing(workers);
  // Pulls held for nodes that left are refused now, not held forever.
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (members_.count(it->message.meta.sender())) {
      ++it;
      continue;
    }
    Message message = std::move(it->message);
    it = parked_.erase(it);
    Serve(std::move(message), 0);
  }
  WakeParked();
}

void KVServer::WakeParked() {
  if (parked_.empty()) return;
  const double now = MonotonicSeconds();
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (!gate_.Admits(it->message.meta.clock())) {
      ++it;
      continue;
    }
    const int64_t waited_us = static_cast<int64_t>((now - it->since) * 1e6);
    Message message = std::move(it->message);
    it = parked_.erase(it);
    Serve(std::move(message), std::max<int64_t>(waited_us, 1));
  }
}

bool KVServer::Serve(Message&& message, int64_t waited_us) {
  const proto::Meta& meta = message.meta;
  Message response;
  bool applied = false;
  try {
    if (meta.response()) throw MakeError("servers take requests, not responses");
    if (std::string failed = failure(); !failed.empty()) throw Error(failed);
    if (view_epoch_ > 0 && !members_.count(meta.sender())) {
      throw MakeError("node ", meta.sender(), " is not in the cluster view (epoch ", view_epoch_,
                      "): it left the cluster");
    }
    DataRequest request = ParseDataRequest(message);
    if (meta.command() == proto::DUMP) {
      response = Dump(request.table, request.width);
      served_.fetch_add(1);
      Reply(meta, response);
      return false;
    }
    Table& entry = TableFor(request.table, request.width);
    ParameterTable* table = entry.rows.get();
    if (meta.command() == proto::PUSH) {
      if (applied_[meta.sender()].Insert(meta.sequence())) {
        table->Push(request.keys.data(), request.keys.size(), request.values.data(),
                    entry.optimizer.get());
        applied = true;
      } else {
        duplicates_.fetch_add(1);  // applied before: acknowledged as a success below
      }
    } else {
      response.meta.set_min_clock(gate_.MinClock());
      response.meta.set_waited_us(waited_us);
      if (request.keys.size() == 1 && table->shares_rows()) {
        // One long row: sent straight from the table, copied only if a push
        // comes while it is still being sent.
        response.frames.push_back(AsBytes(table->SharedWeights(request.keys[0])));
      } else {
        auto values = SharedArray<float>::Allocate(request.keys.size() * request.width);
        table->Pull(request.keys.data(), request.keys.size(), values.data());
        response.frames.push_back(AsBytes(values));
      }
    }
    served_.fetch_add(1);
  } catch (const Error& e) {
    rejected_.fetch_add(1);
    LOG(WARNING) << "rejected " << Describe(meta) << ": " << e.what();
    response.frames.clear();
    response.meta.set_error(e.what());
  }
  Reply(meta, response);
  return applied;
}

}  // namespace keel
