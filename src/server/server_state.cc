#include "server/server_state.h"

#include <glog/logging.h>

#include <memory>
#include <utility>

#include "base/error.h"

namespace keel {

std::string ServerState::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

void ServerState::Fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  failure_ = why;
}

ServerTable& ServerState::TableFor(Shard& shard, size_t range, uint32_t table, uint32_t width) {
  auto found = shard.tables.find(table);
  if (found != shard.tables.end()) {
    if (static_cast<uint32_t>(found->second.rows->weight_width()) != width) {
      throw MakeError("table ", table, " has rows of width ", found->second.rows->weight_width(),
                      ", the request has width ", width);
    }
    return found->second;
  }
  // Made whole before it joins the shard: an allocation that fails leaves no
  // table without rows behind.
  auto spec = specs.find(table);
  const OptimizerOptions& options =
      spec != specs.end() ? spec->second.optimizer : default_optimizer;
  ServerTable made;
  made.optimizer = MakeOptimizer(options);
  for (int part = 1; apply_pool && part < apply_pool->size(); ++part) {
    made.apply_optimizers.push_back(MakeOptimizer(options));
  }
  made.staleness_aware = options.staleness_aware;
  const int state = made.optimizer->StateWidth(static_cast<int>(width));
  // The table is laid out for its key range.
  Key first = 0, last = ~Key{0};
  if (auto ranges = node->ranges(); ranges && range < ranges->num_ranges()) {
    first = ranges->begin(range);
    last = ranges->last(range);
  }
  made.rows = std::make_unique<ParameterTable>(
      static_cast<int>(width), state, spec != specs.end() ? spec->second.initializer : nullptr,
      first, last);
  if (spec != specs.end()) {
    const TableSpec& declared = spec->second;
    if (declared.admit_after > 1) {
      made.admit_after = declared.admit_after;
      made.admit_sketch_width = AdmissionSketch::WidthFor(declared.admit_sketch_bytes);
    }
    made.evict_after = declared.evict_after;
  }
  if (track_changes || made.evict_after > 0) made.rows->EnableStamps();
  return shard.tables.emplace(table, std::move(made)).first->second;
}

void ServerState::Reply(const proto::Meta& request, Message& response) {
  proto::Meta& meta = response.meta;
  meta.set_command(request.command());
  meta.set_sequence(request.sequence());
  meta.set_table(request.table());
  if (meta.key_count() == 0) meta.set_key_count(request.key_count());
  meta.set_value_width(request.value_width());
  meta.set_send(request.send());
  meta.set_response(true);
  // The last replica acknowledges a push for its chain's primary.
  if (request.key_list_kept()) meta.set_key_list_kept(true);
  try {
    node->Send(request.sender(), response);
  } catch (const Error& e) {
    LOG(WARNING) << "could not answer " << Describe(request) << ": " << e.what();
  }
}

}  // namespace keel
