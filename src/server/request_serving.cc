// KVServer's answers to PUSH, PULL and DUMP, and the shards and tables they
// address.
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "base/utf8.h"
#include "server/kv_server.h"

namespace keel {
namespace {
// Pushes a replica waiting for its range's copy keeps for after it.
constexpr size_t kMaxHeldPushes = 100000;
}  // namespace

bool KVServer::Serve(Message&& message, int64_t waited_us) {
  const proto::Meta& meta = message.meta;
  if (meta.response()) {
    // Answering a response could bounce between two nodes forever.
    rejected_.fetch_add(1);
    LOG(WARNING) << "ignored " << Describe(meta) << ": servers take requests, not responses";
    return false;
  }
  Message response;
  try {
    CheckCanServe(meta);
    DataRequest request = ParseDataRequest(message);
    if (meta.command() == proto::DUMP) return ServeDump(meta, request);
    if (meta.origin() != 0 && meta.command() != proto::PUSH) {
      throw MakeError("only pushes are passed down a replica chain");
    }
    if (request.keys.size() == 0) return ServeEmpty(meta);
    size_t range = 0;
    Shard& shard = ShardFor(request, &range);
    if (meta.command() == proto::PUSH) return ServePush(std::move(message), request, shard, range);
    ServePull(meta, request, shard, range, waited_us, &response);
  } catch (const Error& e) {
    rejected_.fetch_add(1);
    LOG(WARNING) << "rejected " << Describe(meta) << ": " << e.what();
    response.frames.clear();
    response.meta.set_error(ValidUtf8(e.what()));
  }
  Reply(meta, response);
  return false;
}

void KVServer::CheckCanServe(const proto::Meta& meta) const {
  if (std::string failed = failure(); !failed.empty()) throw Error(failed);
  if (view_epoch_ > 0 && !members_.count(meta.sender())) {
    throw MakeError("node ", meta.sender(), " is not in the cluster view (epoch ", view_epoch_,
                    "): it left the cluster");
  }
}

bool KVServer::ServeDump(const proto::Meta& meta, const DataRequest& request) {
  Message response = Dump(request.table, request.width);
  served_.fetch_add(1);
  Reply(meta, response);
  return false;
}

bool KVServer::ServeEmpty(const proto::Meta& meta) {
  Message response;
  served_.fetch_add(1);
  if (meta.command() == proto::PULL) {
    response.frames.push_back(AsBytes(SharedArray<float>()));
  }
  Reply(meta, response);
  return false;
}

bool KVServer::ServePush(Message&& message, const DataRequest& request, Shard& shard,
                         size_t range) {
  const proto::Meta& meta = message.meta;
  const int origin = meta.origin() != 0 ? meta.origin() : meta.sender();
  CheckPushRoute(meta, range);
  if (!shard.ready) {
    HoldPush(std::move(message), shard, range);
    return false;
  }
  ServerTable& table = TableFor(shard, range, request.table, request.width);
  int64_t staleness = 0;
  const bool applied = ApplyOnce(meta, request, origin, shard, table, range, &staleness);
  served_.fetch_add(1);
  // Every replica takes the step the primary took.
  if (applied && table.staleness_aware) message.meta.set_push_staleness(staleness);
  PassDown(message, range, origin);
  return applied;
}

void KVServer::CheckPushRoute(const proto::Meta& meta, size_t range) const {
  auto ranges = node_->ranges();
  if (meta.origin() == 0 && ranges->server(range) != node_->rank()) {
    throw MakeError("server ", node_->rank(), " is not the primary of key range ", range,
                    " (server ", ranges->server(range), " is)");
  }
  if (meta.origin() == 0) return;
  // Only the replica before this one in the range's chain passes pushes on.
  const int predecessor = ranges->Predecessor(range, node_->rank());
  int expected = -1;
  try {
    if (predecessor >= 0) expected = node_->ServerId(predecessor);
  } catch (const Error&) {
  }
  if (meta.sender() != expected) {
    throw MakeError("node ", meta.sender(), " passed on a push of key range ", range,
                    ", but it is not this server's predecessor in the range's chain");
  }
}

void KVServer::HoldPush(Message&& message, Shard& shard, size_t range) {
  // Passed down before this replica has the range: it goes on once the
  // range's copy (which will include it) has arrived. Past the bound,
  // dropped: the worker resends it.
  if (message.meta.origin() == 0) throw MakeError("key range ", range, " is not ready here");
  if (shard.held.size() < kMaxHeldPushes) shard.held.push_back(std::move(message));
}

bool KVServer::ApplyOnce(const proto::Meta& meta, const DataRequest& request, int origin,
                         Shard& shard, ServerTable& table, size_t range, int64_t* staleness) {
  if (!shard.applied[origin].Insert(meta.sequence())) {
    duplicates_.fetch_add(1);  // applied before: passed on and acknowledged all the same
    return false;
  }
  float step_scale = 1.0f;
  if (table.staleness_aware) {
    *staleness = StalenessOf(meta, request.table, shard, table);
    step_scale = StalenessStepScale(*staleness);
  }
  table.rows->Push(request.keys.data(), request.keys.size(), request.values.data(),
                   table.optimizer.get(), step_scale);
  ++table.version;
  if (shard.primary_since > 0 && meta.origin() == 0) {
    LOG(INFO) << "key range " << range << ": first push served since this server became "
              << "its primary, " << MonotonicSeconds() - shard.primary_since << " s ago";
    shard.primary_since = 0;
  }
  return true;
}

int64_t KVServer::StalenessOf(const proto::Meta& meta, uint32_t table_id, const Shard& shard,
                              const ServerTable& table) const {
  if (meta.origin() != 0) {
    return meta.has_push_staleness() ? PushStaleness::Clamp(meta.push_staleness()) : 0;
  }
  if (!meta.has_read_clock()) return 0;
  return shard.reads.Of(meta.sender(), table_id, meta.read_clock(), table.version);
}

void KVServer::ServePull(const proto::Meta& meta, const DataRequest& request, Shard& shard,
                         size_t range, int64_t waited_us, Message* response) {
  if (!shard.ready) throw MakeError("key range ", range, " is not ready here");
  ServerTable& served = TableFor(shard, range, request.table, request.width);
  if (served.staleness_aware) {
    shard.reads.RecordPull(meta.sender(), request.table, meta.clock(), served.version);
  }
  ParameterTable* table = served.rows.get();
  response->meta.set_min_clock(gate_.MinClock());
  response->meta.set_waited_us(waited_us);
  if (request.keys.size() == 1 && table->shares_rows()) {
    // One long row: sent straight from the table, copied only if a push
    // comes while it is still being sent.
    response->frames.push_back(AsBytes(table->SharedWeights(request.keys[0])));
  } else {
    auto values = SharedArray<float>::Allocate(request.keys.size() * request.width);
    table->Pull(request.keys.data(), request.keys.size(), values.data());
    response->frames.push_back(AsBytes(values));
  }
  served_.fetch_add(1);
}

Shard& KVServer::ShardFor(const DataRequest& request, size_t* range) {
  auto ranges = node_->ranges();
  if (!ranges) throw MakeError("this server has no cluster view yet");
  *range = ranges->RangeOf(request.keys[0]);
  if (request.keys[request.keys.size() - 1] > ranges->last(*range)) {
    throw MakeError("the request's keys span key ranges ", *range, " and ",
                    ranges->RangeOf(request.keys[request.keys.size() - 1]),
                    "; send one request per range");
  }
  auto shard = shards_.find(*range);
  if (shard == shards_.end()) {
    throw MakeError("server ", node_->rank(), " holds no replica of key range ", *range,
                    " (its primary is server ", ranges->server(*range), ")");
  }
  return shard->second;
}

ServerTable& KVServer::TableFor(Shard& shard, size_t range, uint32_t table, uint32_t width) {
  ServerTable& slot = shard.tables[table];
  if (!slot.rows) {
    auto spec = specs_.find(table);
    if (spec != specs_.end() && spec->second.width != 0 &&
        static_cast<uint32_t>(spec->second.width) != width) {
      shard.tables.erase(table);
      throw MakeError("table ", table, " has rows of width ", spec->second.width,
                      ", the request has width ", width);
    }
    const OptimizerOptions& options =
        spec != specs_.end() ? spec->second.optimizer : default_optimizer_;
    slot.optimizer = MakeOptimizer(options);
    slot.staleness_aware = options.staleness_aware;
    const int state = slot.optimizer->StateWidth(static_cast<int>(width));
    // The table is laid out for its key range.
    Key first = 0, last = ~Key{0};
    if (auto ranges = node_->ranges(); ranges && range < ranges->num_ranges()) {
      first = ranges->begin(range);
      last = ranges->last(range);
    }
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
  auto ranges = node_->ranges();
  for (const auto& [range, shard] : shards_) {
    // Each range's rows come from its primary only.
    if (!ranges || ranges->server(range) != node_->rank()) continue;
    auto found = shard.tables.find(table);
    if (found == shard.tables.end()) continue;
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

}  // namespace keel
