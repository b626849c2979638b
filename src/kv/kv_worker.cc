#include "kv/kv_worker.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <thread>

#include "kv/error.h"

namespace keel {
namespace {

constexpr double kSpinSeconds = 50e-6;

void CheckKeys(const SharedArray<const Key>& keys) {
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) {
      throw MakeError("keys must be sorted and unique: key ", i, " (", keys[i],
                      ") does not follow key ", i - 1, " (", keys[i - 1], ")");
    }
  }
}

void CheckWidth(int width) {
  if (width <= 0 || static_cast<uint32_t>(width) > kMaxValueWidth) {
    throw MakeError("value width ", width, " is outside 1..", kMaxValueWidth);
  }
}

}  // namespace

KVWorker::KVWorker(Node* node) : node_(node) {
  node_->SetDataHandler([this](Message&& message) { OnResponse(std::move(message)); });
}

KVWorker::~KVWorker() { node_->Stop(); }

void KVWorker::Cancel(Handle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  CancelLocked(handle);
}

void KVWorker::CancelLocked(Handle handle) {
  for (auto it = parts_.begin(); it != parts_.end();) {
    it = it->second.handle == handle ? parts_.erase(it) : std::next(it);
  }
  requests_.erase(handle);
}

KVWorker::Handle KVWorker::Push(const SharedArray<const Key>& keys,
                                const SharedArray<const float>& values, int width, uint32_t table) {
  CheckWidth(width);
  if (values.size() != keys.size() * static_cast<size_t>(width)) {
    throw MakeError("push of ", keys.size(), " keys x width ", width, " needs ",
                    keys.size() * width, " values, got ", values.size());
  }
  CheckKeys(keys);
  return Send(proto::PUSH, keys, values, nullptr, width, table);
}

KVWorker::Handle KVWorker::Pull(const SharedArray<const Key>& keys, SharedArray<float>* values,
                                int width, uint32_t table) {
  CheckWidth(width);
  CheckKeys(keys);
  return Send(proto::PULL, keys, SharedArray<const float>(), values, width, table);
}

KVWorker::Handle KVWorker::Send(proto::Command command, const SharedArray<const Key>& keys,
                                const SharedArray<const float>& values, SharedArray<float>* out,
                                int width, uint32_t table) {
  auto ranges = node_->ranges();
  if (!ranges) throw MakeError("the worker has no cluster view yet (call Node::Start first)");
  const std::vector<size_t> bounds = ranges->Split(keys.data(), keys.size());

  struct Outgoing {
    int server_id;
    Message message;
  };
  std::vector<Outgoing> outgoing;
  Handle handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = ++next_handle_;
    Request& request = requests_[handle];
    request.out = out;
    for (size_t r = 0; r < ranges->num_ranges(); ++r) {
      const size_t begin = bounds[r], end = bounds[r + 1];
      if (begin == end) continue;
      int server_id;
      try {
        server_id = node_->ServerId(ranges->server(r));
      } catch (...) {
        CancelLocked(handle);
        throw;
      }
      Outgoing part{server_id, Message()};
      proto::Meta& meta = part.message.meta;
      meta.set_command(command);
      meta.set_sequence(node_->NextSequence());
      meta.set_clock(clock_.load());
      meta.set_key_count(end - begin);
      meta.set_value_width(width);
      meta.set_table(table);
      part.message.frames.push_back(AsBytes(keys.Slice(begin, end)));
      if (command == proto::PUSH) {
        part.message.frames.push_back(AsBytes(values.Slice(begin * width, end * width)));
      }
      parts_[meta.sequence()] =
          Part{handle, begin * width, (end - begin) * width, meta.clock(), command};
      ++request.unanswered;
      outgoing.push_back(std::move(part));
    }
    request.parts = request.unanswered;
    // Several parts are gathered into one array; a single part's message is
    // handed over as it is.
    const size_t count = keys.size() * static_cast<size_t>(width);
    if (out && request.parts > 1 && out->size() != count) {
      *out = SharedArray<float>::Allocate(count);
    }
    if (out && request.parts == 0) *out = SharedArray<float>();
  }
  // Sent outside the lock: a response may arrive before the last part leaves.
  try {
    for (Outgoing& part : outgoing) node_->Send(part.server_id, part.message);
  } catch (...) {
    Cancel(handle);
    throw;
  }
  return handle;
}

void KVWorker::OnResponse(Message&& message) {
  const proto::Meta& meta = message.meta;
  if (!meta.response()) {
    LOG(WARNING) << "worker ignored " << Describe(meta) << ": workers serve no requests";
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto part = parts_.find(meta.sequence());
  if (part == parts_.end()) {
    LOG(WARNING) << "ignored " << Describe(meta) << ": no such request outstanding";
    return;
  }
  Request& request = requests_[part->second.handle];
  if (meta.command() != part->second.command) {
    request.error = "node " + std::to_string(meta.sender()) + " answered a " +
                    proto::Command_Name(part->second.command) + " with a " +
                    (proto::Command_IsValid(meta.command()) ? proto::Command_Name(meta.command())
                                                            : std::string("unknown command"));
  } else if (!meta.error().empty()) {
    request.error = "server node " + std::to_string(meta.sender()) + ": " + meta.error();
  } else if (meta.command() == proto::DUMP) {
    request.dumped.push_back(std::move(message));
  } else if (meta.command() == proto::PULL) {
    // The gate's figures for this pull: how far ahead of the slowest worker
    // it was when answered, and how long it was held.
    const int64_t staleness = meta.min_clock() == std::numeric_limits<int64_t>::max()
                                  ? 0
                                  : part->second.clock - meta.min_clock();
    ++gate_stats_.pulls;
    gate_stats_.max_staleness = std::max(gate_stats_.max_staleness, staleness);
    ++gate_stats_.histogram[GateStats::Bucket(staleness)];
    if (meta.waited_us() > 0) {
      ++gate_stats_.waited;
      gate_stats_.waited_us += meta.waited_us();
    }
    const size_t expected = part->second.value_count * sizeof(float);
    if (message.frames.size() != 1 || message.frames[0].size() != expected) {
      request.error = "malformed pull response from node " + std::to_string(meta.sender());
    } else if (request.parts == 1) {
      *request.out = message.frames[0].As<float>();
    } else {
      std::memcpy(request.out->data() + part->second.value_offset, message.frames[0].data(),
                  expected);
    }
  }
  parts_.erase(part);
  if (--request.unanswered == 0) answered_.notify_all();
}

int GateStats::Bucket(int64_t staleness) {
  static const int64_t kBounds[kBuckets - 1] = {0, 1, 2, 4, 8, 16, 64};
  for (int b = 0; b < kBuckets - 1; ++b) {
    if (staleness <= kBounds[b]) return b;
  }
  return kBuckets - 1;
}

const char* GateStats::BucketName(int bucket) {
  static const char* kNames[kBuckets] = {"0", "1", "2", "3_4", "5_8", "9_16", "17_64", "over_64"};
  return kNames[bucket];
}

GateStats KVWorker::gate_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return gate_stats_;
}

void KVWorker::AnnounceClock(int64_t clock, bool wait, double timeout_s) {
  auto view = node_->view();
  if (!view) throw MakeError("the worker has no cluster view yet (call Node::Start first)");
  std::vector<std::pair<int, Message>> outgoing;
  Handle handle = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (wait) handle = ++next_handle_;
    for (const auto& node : view->nodes()) {
      if (node.role() != proto::SERVER) continue;
      Message message;
      message.meta.set_command(proto::CLOCK);
      message.meta.set_sequence(node_->NextSequence());
      message.meta.set_clock(clock);
      message.meta.set_ack(wait);
      if (wait) {
        parts_[message.meta.sequence()] = Part{handle, 0, 0, clock, proto::CLOCK};
        ++requests_[handle].unanswered;
      }
      outgoing.emplace_back(node.id(), std::move(message));
    }
  }
  for (auto& [server, message] : outgoing) node_->Send(server, message);
  if (wait) Wait(handle, timeout_s);
}

void KVWorker::Dump(uint32_t table, int width, std::vector<Key>* keys, std::vector<float>* values,
                    double timeout_s) {
  CheckWidth(width);
  auto view = node_->view();
  if (!view) throw MakeError("the worker has no cluster view yet (call Node::Start first)");
  std::vector<int> servers;
  for (const auto& node : view->nodes()) {
    if (node.role() == proto::SERVER) servers.push_back(node.id());
  }
  std::vector<std::pair<int, Message>> outgoing;
  Handle handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = ++next_handle_;
    Request& request = requests_[handle];
    for (int server : servers) {
      Message message;
      message.meta.set_command(proto::DUMP);
      message.meta.set_sequence(node_->NextSequence());
      message.meta.set_value_width(width);
      message.meta.set_table(table);
      parts_[message.meta.sequence()] = Part{handle, 0, 0, 0, proto::DUMP};
      ++request.unanswered;
      outgoing.emplace_back(server, std::move(message));
    }
    request.parts = request.unanswered;
  }
  for (auto& [server, message] : outgoing) node_->Send(server, message);

  std::vector<Message> dumped;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    Request& request = requests_[handle];
    if (!answered_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                            [&] { return request.unanswered == 0; })) {
      throw MakeError("dump of table ", table, ": ", request.unanswered,
                      " server(s) did not answer within ", timeout_s, " s");
    }
    const std::string error = std::move(request.error);
    dumped = std::move(request.dumped);
    requests_.erase(handle);
    if (!error.empty()) throw MakeError("dump of table ", table, " failed: ", error);
  }
  std::vector<std::pair<Key, size_t>> order;  // key, index into rows
  std::vector<const float*> rows;
  std::vector<SharedArray<const float>> alive;  // what rows point into
  for (const Message& message : dumped) {
    if (message.frames.size() != 2) throw MakeError("malformed dump response");
    auto part_keys = message.frames[0].As<const Key>();
    auto part_values = message.frames[1].As<const float>();
    if (part_values.size() != part_keys.size() * static_cast<size_t>(width)) {
      throw MakeError("malformed dump response: ", part_keys.size(), " keys, ", part_values.size(),
                      " values");
    }
    for (size_t i = 0; i < part_keys.size(); ++i) {
      order.emplace_back(part_keys[i], rows.size());
      rows.push_back(part_values.data() + i * width);
    }
    alive.push_back(part_values);
  }
  std::sort(order.begin(), order.end());
  keys->resize(order.size());
  values->resize(order.size() * width);
  for (size_t i = 0; i < order.size(); ++i) {
    (*keys)[i] = order[i].first;
    std::memcpy(values->data() + i * width, rows[order[i].second], sizeof(float) * width);
  }
}

void KVWorker::Wait(Handle handle, double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = requests_.find(handle);
  if (it == requests_.end()) throw MakeError("request ", handle, " is not outstanding");
  // References to map elements survive rehashing; iterators do not.
  Request& request = it->second;
  // Small requests come back within tens of microseconds: yield the core for
  // a moment before sleeping, which saves the wake-up on the way back.
  const double spin_until = MonotonicSeconds() + kSpinSeconds;
  while (request.unanswered != 0 && MonotonicSeconds() < spin_until) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  // A node dropped from the view gets no answers: it stops waiting.
  const double deadline = MonotonicSeconds() + timeout_s;
  while (!answered_.wait_for(lock, std::chrono::duration<double>(std::min(
                                       0.5, std::max(0.0, deadline - MonotonicSeconds()))),
                             [&] { return request.unanswered == 0; })) {
    if (node_->removed()) {
      requests_.erase(handle);
      throw MakeError("request ", handle, ": this node left the cluster");
    }
    if (MonotonicSeconds() >= deadline) {
      throw MakeError("request ", handle, ": ", request.unanswered,
                      " server(s) did not answer within ", timeout_s, " s");
    }
  }
  const std::string error = std::move(request.error);
  requests_.erase(handle);
  if (!error.empty()) throw MakeError("request ", handle, " failed: ", error);
}

size_t KVWorker::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_.size();
}

}  // namespace keel
