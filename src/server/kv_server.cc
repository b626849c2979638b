#include "server/kv_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "kv/error.h"

namespace keel {

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
}

KVServer::~KVServer() { node_->Stop(); }

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
  const bool push = !meta.response() && meta.command() == proto::PUSH;
  const int sender = meta.sender();
  const int64_t clock = meta.clock();
  Serve(std::move(message), 0);
  if (push && clock > 0) {
    gate_.Advance(sender, clock);
    WakeParked();
  }
}

void KVServer::OnClock(const proto::Meta& meta) {
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
  std::set<int> workers;
  for (const auto& node : view.nodes()) {
    if (node.role() == proto::WORKER) workers.insert(node.id());
  }
  gate_.RemoveMissing(workers);
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

void KVServer::Serve(Message&& message, int64_t waited_us) {
  const proto::Meta& meta = message.meta;
  Message response;
  try {
    if (meta.response()) throw MakeError("servers take requests, not responses");
    DataRequest request = ParseDataRequest(message);
    if (meta.command() == proto::DUMP) {
      response = Dump(request.table, request.width);
      served_.fetch_add(1);
      Reply(meta, response);
      return;
    }
    Table& entry = TableFor(request.table, request.width);
    ParameterTable* table = entry.rows.get();
    if (meta.command() == proto::PUSH) {
      if (applied_[meta.sender()].Insert(meta.sequence())) {
        table->Push(request.keys.data(), request.keys.size(), request.values.data(),
                    entry.optimizer.get());
      } else {
        duplicates_.fetch_add(1);
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
}

}  // namespace keel
