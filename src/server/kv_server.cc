#include "server/kv_server.h"

#include <algorithm>

#include <glog/logging.h>

#include "kv/error.h"

namespace keel {

KVServer::KVServer(Node* node, const OptimizerOptions& optimizer)
    : node_(node), optimizer_(MakeOptimizer(optimizer)) {
  node_->SetDataHandler([this](Message&& message) { Handle(std::move(message)); });
}

ParameterTable* KVServer::TableFor(uint32_t table, uint32_t width) {
  auto& slot = tables_[table];
  if (!slot) {
    const int state = optimizer_->StateWidth(static_cast<int>(width));
    // The table is laid out for the key range this server holds.
    Key first = ~Key{0}, last = 0;
    auto ranges = node_->ranges();
    for (size_t r = 0; ranges && r < ranges->num_ranges(); ++r) {
      if (ranges->server(r) != node_->rank()) continue;
      first = std::min(first, ranges->begin(r));
      last = std::max(last, ranges->last(r));
    }
    if (first > last) first = 0, last = ~Key{0};
    slot = std::make_unique<ParameterTable>(static_cast<int>(width), state, nullptr, first, last);
  } else if (static_cast<uint32_t>(slot->weight_width()) != width) {
    throw MakeError("table ", table, " has rows of width ", slot->weight_width(),
                    ", the request has width ", width);
  }
  return slot.get();
}

void KVServer::Reply(const proto::Meta& request, Message& response) {
  proto::Meta& meta = response.meta;
  meta.set_command(request.command());
  meta.set_sequence(request.sequence());
  meta.set_table(request.table());
  meta.set_key_count(request.key_count());
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
  Message response;
  try {
    if (meta.response()) throw MakeError("servers take requests, not responses");
    DataRequest request = ParseDataRequest(message);
    ParameterTable* table = TableFor(request.table, request.width);
    if (meta.command() == proto::PUSH) {
      if (applied_[meta.sender()].Insert(meta.sequence())) {
        table->Push(request.keys.data(), request.keys.size(), request.values.data(),
                    optimizer_.get());
      } else {
        duplicates_.fetch_add(1);
      }
    } else if (request.keys.size() == 1 && table->shares_rows()) {
      // One long row: sent straight from the table, copied only if a push
      // comes while it is still being sent.
      response.frames.push_back(AsBytes(table->SharedWeights(request.keys[0])));
    } else {
      auto values = SharedArray<float>::Allocate(request.keys.size() * request.width);
      table->Pull(request.keys.data(), request.keys.size(), values.data());
      response.frames.push_back(AsBytes(values));
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
