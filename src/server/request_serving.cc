#include "server/request_serving.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <sstream>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/time.h"
#include "base/utf8.h"
#include "kv/wire_precision.h"

namespace keel {
namespace {
// Pushes a replica waiting for its range's copy keeps for after it.
constexpr size_t kMaxHeldPushes = 100000;
// Refusals logged one by one; after them, one in kRefusalLogEvery.
constexpr uint64_t kRefusalsLoggedEach = 10;
constexpr uint64_t kRefusalLogEvery = 1000;

// A request naming a key list this server does not hold (Meta.key_list):
// answered with unknown_key_list, so the worker sends its keys.
class UnknownKeyList : public Error {
 public:
  using Error::Error;
};

bool NamesKeyList(const proto::Meta& meta) {
  return meta.key_list() != 0 && meta.origin() == 0 &&
         (meta.command() == proto::PUSH || meta.command() == proto::PULL);
}

// The index of the first NaN or infinity among `count` floats, or `count`.
size_t FirstNonFinite(const float* values, size_t count) {
  // A branch-free pass first (all exponent bits set: NaN or infinity).
  uint32_t any = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, sizeof(bits));
    any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (!any) return count;
  size_t i = 0;
  while (i < count && std::isfinite(values[i])) ++i;
  return i;
}
}  // namespace

RequestServing::RequestServing(ServerState* state, const StalenessGate* gate, PassDown pass_down)
    : state_(*state), node_(state->node), gate_(*gate), pass_down_(std::move(pass_down)) {}

bool RequestServing::Serve(Message&& message, int64_t waited_us) {
  const proto::Meta& meta = message.meta;
  if (meta.response()) {
    // Answering a response could bounce between two nodes forever. A
    // replica's refusal of a push passed down for a view that has changed
    // since (its chain moved on) is expected, and needs no answer either.
    auto member = state_.members.find(meta.sender());
    if (member != state_.members.end() && member->second == proto::SERVER) {
      VLOG(1) << "ignored " << Describe(meta) << " from a replica: " << meta.error();
      return false;
    }
    NoteRefused(meta, "servers take requests, not responses");
    return false;
  }
  Message response;
  serving_list_ = nullptr;
  try {
    CheckCanServe(meta);
    // Only a primary says it kept a list (and only on a push it passes down).
    if (meta.origin() == 0) message.meta.clear_key_list_kept();
    message.meta.clear_unknown_key_list();
    // The list the request named, for its rows' slots while it is served.
    serving_list_ = NamesKeyList(meta) ? ResolveKeyList(&message) : nullptr;
    const bool cached_keys = serving_list_ != nullptr;
    DataRequest request = ParseDataRequest(message, cached_keys);
    if (NamesKeyList(meta) && !cached_keys) {
      const bool kept = state_.key_lists.Keep(meta.sender(), meta.key_list(), request.keys);
      if (kept) {
        state_.counters.key_lists_kept.fetch_add(1);
        // Served as the list (ServedList: the kept array is the request's),
        // so this very request's probes give the list its slots.
        serving_list_ = state_.key_lists.Find(meta.sender(), meta.key_list());
      }
      // A push carries it down its chain to the replica that acknowledges.
      message.meta.set_key_list_kept(kept);
      response.meta.set_key_list_kept(kept);
    }
    CheckDeclared(request);
    if (meta.command() == proto::DUMP) return ServeDump(meta, request);
    if (meta.origin() != 0 && meta.command() != proto::PUSH) {
      throw MakeError("only pushes are passed down a replica chain");
    }
    // A push passed down with no key admitted still carries the keys counted.
    if (request.keys.size() == 0 && request.unadmitted.size() == 0) return ServeEmpty(meta);
    const size_t range = RangeOfRequest(request);
    auto found = state_.shards.find(range);
    Shard* held = found == state_.shards.end() ? nullptr : &found->second;
    if (MovedAway(meta, held)) {
      response.meta.set_moved(true);
      state_.Reply(meta, response);
      return false;
    }
    if (!held) {
      throw MakeError("server ", node_->rank(), " holds no replica of key range ", range);
    }
    Shard& shard = *held;
    if (meta.command() == proto::PUSH) return ServePush(std::move(message), request, shard, range);
    ServePull(meta, request, shard, range, waited_us, &response);
  } catch (const UnknownKeyList& e) {
    // Expected after a view change or a restart: not counted as refused.
    VLOG(1) << Describe(meta) << ": " << e.what();
    response = Message();
    response.meta.set_unknown_key_list(true);
    response.meta.set_error(ValidUtf8(e.what()));
  } catch (const Error& e) {
    NoteRefused(meta, e.what());
    response = Message();
    response.meta.set_error(ValidUtf8(e.what()));
  } catch (const std::bad_alloc&) {
    // Tables and rows are made whole or not at all: the server goes on.
    const std::string why = "server " + std::to_string(node_->rank()) +
                            " ran out of memory serving it (table " + std::to_string(meta.table()) +
                            ")";
    NoteRefused(meta, why);
    response = Message();
    response.meta.set_error(why);
  }
  state_.Reply(meta, response);
  return false;
}

KeyListCache::List* RequestServing::ResolveKeyList(Message* message) {
  const proto::Meta& meta = message->meta;
  // With its keys frame the request defines the list (kept after parsing).
  const size_t frames_without_keys = meta.command() == proto::PUSH ? 1 : 0;
  if (message->frames.size() != frames_without_keys) return nullptr;
  KeyListCache::List* list = state_.key_lists.Find(meta.sender(), meta.key_list());
  if (!list) {
    state_.counters.unknown_key_lists.fetch_add(1);
    throw UnknownKeyList("server " + std::to_string(node_->rank()) + " holds no key list " +
                         std::to_string(meta.key_list()) + " of node " +
                         std::to_string(meta.sender()) + " (send the keys again)");
  }
  const SharedArray<const Key>& keys = list->keys();
  if (keys.size() != meta.key_count()) {
    throw MakeError("key list ", meta.key_list(), " holds ", keys.size(),
                    " keys, the request says ", meta.key_count());
  }
  // The keys go down a chain with the push: a replica keeps no lists.
  message->frames.insert(message->frames.begin(), AsBytes(keys));
  state_.counters.key_list_hits.fetch_add(1);
  return list;
}

KeyListCache::List* RequestServing::ServedList(const DataRequest& request) const {
  // Key admission may have left out some of the list's keys.
  if (!serving_list_ || serving_list_->keys().data() != request.keys.data() ||
      serving_list_->keys().size() != request.keys.size()) {
    return nullptr;
  }
  return serving_list_;
}

void RequestServing::PushRows(const DataRequest& request, ServerTable& table, float step_scale) {
  ParameterTable& rows = *table.rows;
  const ApplyThreads threads = state_.ApplyThreadsFor(table);
  KeyListCache::List* list = ServedList(request);
  if (const std::vector<uint32_t>* slots = list ? list->SlotsIn(request.table, rows) : nullptr) {
    rows.PushSlots(slots->data(), slots->size(), request.values.data(), table.optimizer.get(),
                   step_scale, &threads);
    state_.counters.key_list_slot_hits.fetch_add(1);
    return;
  }
  std::vector<uint32_t> slots;
  const bool found =
      rows.Push(request.keys.data(), request.keys.size(), request.values.data(),
                table.optimizer.get(), step_scale, &threads, list ? &slots : nullptr);
  if (list) list->KeepSlotsIn(request.table, rows, found, std::move(slots));
}

void RequestServing::PullRows(const DataRequest& request, uint32_t table_id,
                              const ParameterTable& rows, float* out) const {
  KeyListCache::List* list = ServedList(request);
  if (const std::vector<uint32_t>* slots = list ? list->SlotsIn(table_id, rows) : nullptr) {
    rows.PullSlots(slots->data(), slots->size(), out);
    state_.counters.key_list_slot_hits.fetch_add(1);
    return;
  }
  // A list whose keys were not all found, with no row made or moved since,
  // would not be found now either (keys only in validation, never pushed).
  const bool keep = list && !list->FoundInVain(table_id, rows);
  std::vector<uint32_t> slots;
  const bool found =
      rows.Pull(request.keys.data(), request.keys.size(), out, keep ? &slots : nullptr);
  if (keep) list->KeepSlotsIn(table_id, rows, found, std::move(slots));
}

std::optional<GateSlot> RequestServing::SlotOf(const Message& message) const {
  const proto::Meta& meta = message.meta;
  const size_t frames_without_keys = meta.command() == proto::PUSH ? 1 : 0;
  SharedArray<const Key> keys;
  if (message.frames.size() > frames_without_keys) {
    const Bytes& frame = message.frames[0];
    if (frame.size() < sizeof(Key) || frame.size() % sizeof(Key) != 0) return std::nullopt;
    keys = frame.As<const Key>();
  } else if (NamesKeyList(meta)) {
    const KeyListCache::List* list = state_.key_lists.Find(meta.sender(), meta.key_list());
    if (!list || list->keys().size() == 0) return std::nullopt;
    keys = list->keys();
  } else {
    return std::nullopt;
  }
  auto ranges = node_->ranges();
  if (!ranges) return std::nullopt;
  return GateSlot(static_cast<uint32_t>(ranges->RangeOf(keys[0])), meta.table());
}

void RequestServing::Park(Message&& message, const GateSlot& slot, double arrived) {
  // Held until the slowest worker catches up; nothing waits on a thread. The
  // worker hears so at once, and stops counting the wait as a lost request
  // (kv/kv_worker.h). A copy it sent again to ask is not held twice.
  const int sender = message.meta.sender();
  const uint64_t sequence = message.meta.sequence();
  const bool repeated = std::any_of(parked_.begin(), parked_.end(), [&](const Parked& parked) {
    return parked.message.meta.sender() == sender && parked.message.meta.sequence() == sequence;
  });
  Message held;
  held.meta.set_held(true);
  state_.Reply(message.meta, held);
  if (repeated) return;
  parked_.push_back(Parked{std::move(message), slot, arrived});
  state_.counters.parked_total.fetch_add(1);
}

void RequestServing::RefuseParkedOfLeavers() {
  // Pulls held for nodes that left are refused now, not held forever.
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (state_.members.count(it->message.meta.sender())) {
      ++it;
      continue;
    }
    Message message = std::move(it->message);
    it = parked_.erase(it);
    Serve(std::move(message), 0);
  }
}

void RequestServing::WakeParked() {
  if (parked_.empty()) return;
  const double now = MonotonicSeconds();
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (!gate_.Admits(it->slot, it->message.meta.clock())) {
      ++it;
      continue;
    }
    const double since = it->since;
    const int64_t waited_us = static_cast<int64_t>((now - since) * 1e6);
    Message message = std::move(it->message);
    it = parked_.erase(it);
    ServeObserved(std::move(message), std::max<int64_t>(waited_us, 1), since);
  }
}

bool RequestServing::ServeObserved(Message&& message, int64_t waited_us, double arrived) {
  if (!observer_) return Serve(std::move(message), waited_us);
  const proto::Meta meta = message.meta;
  RequestRecord record;
  record.command = meta.command();
  record.server_rank = node_->rank();
  record.table = meta.table();
  for (const Bytes& frame : message.frames) record.bytes += frame.size();
  const bool applied = Serve(std::move(message), waited_us);
  if (record.command != proto::PUSH && record.command != proto::PULL) return applied;
  if (record.command == proto::PULL) {
    record.bytes += uint64_t{meta.key_count()} * meta.value_width() * sizeof(float);
  }
  record.seconds = MonotonicSeconds() - arrived;
  observer_(record);
  return applied;
}

void RequestServing::NoteRefused(const proto::Meta& meta, const std::string& why) {
  const uint64_t refused = state_.counters.rejected.fetch_add(1) + 1;
  if (refused <= kRefusalsLoggedEach || refused % kRefusalLogEvery == 0) {
    LOG(WARNING) << "refused " << Describe(meta) << ": " << why << " (" << refused
                 << " requests refused so far)";
  }
}

void RequestServing::CheckCanServe(const proto::Meta& meta) const {
  if (std::string failed = state_.failure(); !failed.empty()) throw Error(failed);
  if (std::string problem = SenderProblem(meta); !problem.empty()) throw Error(problem);
}

std::string RequestServing::SenderProblem(const proto::Meta& meta) const {
  if (state_.view_epoch == 0) return "this server has no cluster view yet";
  auto member = state_.members.find(meta.sender());
  if (member == state_.members.end()) {
    return MakeError("node ", meta.sender(), " is not in the cluster view (epoch ",
                     state_.view_epoch, "): it left the cluster or never joined")
        .what();
  }
  const bool passed_down = meta.origin() != 0;
  const proto::Role needed = passed_down ? proto::SERVER : proto::WORKER;
  if (member->second == needed) return "";
  return MakeError("node ", meta.sender(), " is a ", proto::Role_Name(member->second),
                   passed_down ? ": only servers pass pushes on"
                               : ": only workers send PUSH, PULL, DUMP and CLOCK")
      .what();
}

void RequestServing::CheckDeclared(const DataRequest& request) const {
  if (state_.specs.empty()) return;  // no declarations: tables as first used
  auto spec = state_.specs.find(request.table);
  if (spec == state_.specs.end()) {
    std::ostringstream declared;
    for (const auto& [id, unused] : state_.specs) {
      declared << (declared.tellp() > 0 ? ", " : "") << id;
    }
    throw MakeError("table ", request.table, " is not one of the job's tables (", declared.str(),
                    ")");
  }
  const int width = spec->second.width;
  if (width != 0 && static_cast<uint32_t>(width) != request.width) {
    throw MakeError("table ", request.table, " has rows of width ", width,
                    ", the request has width ", request.width);
  }
}

void RequestServing::CheckFinite(const DataRequest& request) {
  const size_t count = request.values.size();
  const size_t bad = FirstNonFinite(request.values.data(), count);
  if (bad == count) return;
  state_.counters.non_finite.fetch_add(1);
  throw MakeError("push to table ", request.table, " has a non-finite value (", request.values[bad],
                  ") at key ", bad / request.width, " of ", request.keys.size(), ", column ",
                  bad % request.width, ": refused whole, nothing applied");
}

bool RequestServing::ServeDump(const proto::Meta& meta, const DataRequest& request) {
  Message response = meta.summarize() ? Summarize(request.table, request.width)
                                      : Dump(request.table, request.width, meta.dump_from());
  state_.counters.served.fetch_add(1);
  state_.Reply(meta, response);
  return false;
}

bool RequestServing::ServeEmpty(const proto::Meta& meta) {
  Message response;
  state_.counters.served.fetch_add(1);
  if (meta.command() == proto::PULL) {
    response.frames.push_back(AsBytes(SharedArray<float>()));
  }
  state_.Reply(meta, response);
  return false;
}

bool RequestServing::ServePush(Message&& message, const DataRequest& request, Shard& shard,
                               size_t range) {
  const proto::Meta& meta = message.meta;
  const int origin = meta.origin() != 0 ? meta.origin() : meta.sender();
  if (meta.origin() != 0 && meta.epoch() < state_.view_epoch &&
      PredecessorId(range) != meta.sender()) {
    // Passed down for an older view, by a server that is no longer this
    // one's predecessor (the chain moved on): dropped. The worker, which has
    // no acknowledgement, sends it again along the new chain.
    VLOG(1) << "dropped " << Describe(meta) << ": passed down for view " << meta.epoch()
            << " by a server no longer before this one in key range " << range << "'s chain";
    return false;
  }
  CheckPushRoute(meta, range);
  CheckFinite(request);
  if (!shard.ready) {
    HoldPush(std::move(message), shard, range);
    return false;
  }
  if (meta.origin() == 0 && (!request.evicted.empty() || !request.unadmitted.empty())) {
    throw MakeError(
        "a worker's push carries evicted or unadmitted keys (only a primary passes "
        "them down)");
  }
  ServerTable& table = state_.TableFor(shard, range, request.table, request.width);
  const bool fresh = shard.applied[origin].Classify(meta.sequence()) == DedupeWindow::Verdict::kNew;
  if (fresh) AdvanceTableClock(meta.clock(), &table);
  // The primary decides which keys are admitted and which rows are evicted;
  // the replicas apply what it passes down.
  DataRequest admitted = request;
  const bool filters = meta.origin() == 0 && table.admit_after > 1;
  std::vector<Key> unadmitted;
  if (filters && fresh) Admit(&admitted, &table, &unadmitted);
  // A replica counts the pushes of keys without rows as its primary did, so
  // that it admits alike once promoted.
  if (meta.origin() != 0 && fresh && table.admit_after > 1) CountAsPrimaryDid(request, &table);
  // A repeat passed down again (a replica may have missed the first copy)
  // carries only the keys that have rows here: those the first admitted.
  if (filters && !fresh) KeepKeysWithRows(&admitted, table);
  int64_t staleness = 0;
  const bool applied = ApplyOnce(meta, admitted, origin, shard, table, range, &staleness);
  state_.counters.served.fetch_add(1);
  if (applied && !request.evicted.empty()) {
    EraseRows(request.evicted.data(), request.evicted.size(), &shard, &table);
  }
  std::vector<Key> evicted;
  if (applied && meta.origin() == 0 && admitted.keys.size() > 0) evicted = Sweep(&shard, &table);
  if (admitted.keys.size() != request.keys.size() || !evicted.empty()) {
    if (admitted.keys.size() == 0 && unadmitted.empty()) {
      // A repeat with nothing admitted: nothing for the replicas to do.
      Message response;
      state_.Reply(meta, response);
      return applied;
    }
    // Rewritten: the values go down as the float32 this server applied.
    message.frames = {AsBytes(admitted.keys), AsBytes(admitted.values)};
    message.meta.set_precision(proto::WIRE_FP32);
    message.meta.set_key_count(admitted.keys.size());
    message.meta.set_evicted_count(evicted.size());
    message.meta.set_unadmitted_count(unadmitted.size());
    for (const std::vector<Key>* list : {&evicted, &unadmitted}) {
      if (list->empty()) continue;
      auto keys = SharedArray<Key>::Allocate(list->size());
      std::copy(list->begin(), list->end(), keys.data());
      message.frames.push_back(AsBytes(keys));
    }
  }
  // Every replica takes the step the primary took.
  if (applied && table.staleness_aware) message.meta.set_push_staleness(staleness);
  pass_down_(message, range, origin);
  return applied;
}

void RequestServing::AdvanceTableClock(int64_t clock, ServerTable* table) {
  if (table->evict_after == 0 || clock <= table->push_clock) return;
  table->push_clock = clock;
  ++table->clock;
  table->clock_stamps[table->clock] = table->rows->AdvanceStamp();
  // Only the clocks a sweep can still ask for are kept (a replica never sweeps).
  if (table->clock > table->evict_after) {
    table->clock_stamps.erase(table->clock_stamps.begin(),
                              table->clock_stamps.lower_bound(table->clock - table->evict_after));
  }
}

void RequestServing::KeepKeysWithRows(DataRequest* request, const ServerTable& table) {
  std::vector<size_t> kept;
  for (size_t i = 0; i < request->keys.size(); ++i) {
    if (table.rows->Find(request->keys[i])) kept.push_back(i);
  }
  KeepOnly(kept, request);
}

void RequestServing::Admit(DataRequest* request, ServerTable* table, std::vector<Key>* unadmitted) {
  if (!table->admission) {
    table->admission = std::make_unique<AdmissionSketch>(table->admit_sketch_width);
  }
  const size_t count = request->keys.size();
  std::vector<size_t> kept;
  state_.counters.admitted_keys.fetch_add(AdmitKeys(request->keys.data(), count, *table, &kept));
  state_.counters.unadmitted_pushes.fetch_add(count - kept.size());
  unadmitted->clear();
  for (size_t i = 0, k = 0; i < count; ++i) {
    if (k < kept.size() && kept[k] == i) {
      ++k;
    } else {
      unadmitted->push_back(request->keys[i]);
    }
  }
  KeepOnly(kept, request);
}

void RequestServing::CountAsPrimaryDid(const DataRequest& request, ServerTable* table) {
  if (!table->admission) {
    table->admission = std::make_unique<AdmissionSketch>(table->admit_sketch_width);
  }
  // The primary counted every key of the push without a row, in key order:
  // those it admitted (no row here yet either) and those it did not.
  const Key* admitted = request.keys.data();
  const Key* admitted_end = admitted + request.keys.size();
  const Key* dropped = request.unadmitted.data();
  const Key* dropped_end = dropped + request.unadmitted.size();
  while (admitted != admitted_end || dropped != dropped_end) {
    if (dropped == dropped_end || (admitted != admitted_end && *admitted < *dropped)) {
      if (!table->rows->Find(*admitted)) table->admission->Add(*admitted);
      ++admitted;
    } else {
      table->admission->Add(*dropped++);
    }
  }
}

void RequestServing::KeepOnly(const std::vector<size_t>& kept, DataRequest* request) {
  const size_t width = request->width;
  if (kept.size() == request->keys.size()) return;
  auto keys = SharedArray<Key>::Allocate(kept.size());
  auto values = SharedArray<float>::Allocate(kept.size() * width);
  for (size_t j = 0; j < kept.size(); ++j) {
    keys[j] = request->keys[kept[j]];
    std::memcpy(values.data() + j * width, request->values.data() + kept[j] * width,
                sizeof(float) * width);
  }
  request->keys = keys;
  request->values = values;
}

std::vector<Key> RequestServing::Sweep(Shard* shard, ServerTable* table) {
  // A scan of the table's stamps every eighth of the window.
  const uint64_t every = std::max<uint64_t>(1, table->evict_after / 8);
  // At fixed clocks (a multiple of `every`), so that a resumed table, its
  // clock restored, sweeps where the uninterrupted one did.
  if (table->evict_after == 0 || table->clock <= table->evict_after || table->clock % every != 0) {
    return {};
  }
  // Rows last pushed before this clock go.
  const uint64_t oldest_kept = table->clock - table->evict_after + 1;
  auto first_kept = table->clock_stamps.lower_bound(oldest_kept);
  if (first_kept == table->clock_stamps.end()) return {};
  std::vector<Key> evicted = table->rows->StampedBefore(first_kept->second);
  table->clock_stamps.erase(table->clock_stamps.begin(), first_kept);
  std::sort(evicted.begin(), evicted.end());
  EraseRows(evicted.data(), evicted.size(), shard, table);
  state_.counters.evicted_rows.fetch_add(evicted.size());
  return evicted;
}

void RequestServing::EraseRows(const Key* keys, size_t count, Shard* shard, ServerTable* table) {
  for (size_t i = 0; i < count; ++i) {
    // A delta checkpoint lists the keys removed since its base.
    if (table->rows->Erase(keys[i]) && !shard->tracked.empty()) table->removed.push_back(keys[i]);
  }
}

bool RequestServing::MovedAway(const proto::Meta& meta, const Shard* shard) const {
  // A worker's request for a range this server is not the primary of: the
  // range moved on (live resharding, a promotion) after the worker routed it,
  // perhaps while its view changed under it, so its epoch may even be this
  // view's; the worker sends it where its view says once it has this one.
  if (meta.origin() != 0) return false;
  if (meta.command() != proto::PUSH && meta.command() != proto::PULL) return false;
  return !shard || !shard->primary;
}

int RequestServing::PredecessorId(size_t range) const {
  auto ranges = node_->ranges();
  const int predecessor = ranges ? ranges->Predecessor(range, node_->rank()) : -1;
  try {
    return predecessor >= 0 ? node_->ServerId(predecessor) : -1;
  } catch (const Error&) {
    return -1;
  }
}

void RequestServing::CheckPushRoute(const proto::Meta& meta, size_t range) const {
  auto ranges = node_->ranges();
  if (meta.origin() == 0 && ranges->server(range) != node_->rank()) {
    throw MakeError("server ", node_->rank(), " is not the primary of key range ", range,
                    " (server ", ranges->server(range), " is)");
  }
  if (meta.origin() == 0) return;
  // Only the replica before this one in the range's chain passes pushes on.
  if (meta.sender() != PredecessorId(range)) {
    throw MakeError("node ", meta.sender(), " passed on a push of key range ", range,
                    ", but it is not this server's predecessor in the range's chain");
  }
}

void RequestServing::HoldPush(Message&& message, Shard& shard, size_t range) {
  // Passed down before this replica has the range: it goes on once the
  // range's copy (which will include it) has arrived. Past the bound,
  // dropped: the worker resends it.
  if (message.meta.origin() == 0) throw MakeError("key range ", range, " is not ready here");
  if (shard.held.size() < kMaxHeldPushes) shard.held.push_back(std::move(message));
}

bool RequestServing::ApplyOnce(const proto::Meta& meta, const DataRequest& request, int origin,
                               Shard& shard, ServerTable& table, size_t range, int64_t* staleness) {
  DedupeWindow& window = shard.applied[origin];
  switch (window.Classify(meta.sequence())) {
    case DedupeWindow::Verdict::kRepeat:
      state_.counters.duplicates.fetch_add(
          1);  // applied before: passed on and acknowledged all the same
      return false;
    case DedupeWindow::Verdict::kOutOfWindow:
      state_.counters.out_of_window.fetch_add(1);
      throw MakeError("sequence ", meta.sequence(), " of node ", origin,
                      " is outside the window of its newest applied push to key range ", range,
                      " (", window.newest(), ", window -", DedupeWindow::kMaxBehind, "/+",
                      DedupeWindow::kMaxAhead, "): a forgery, or a copy too late to tell");
    case DedupeWindow::Verdict::kNew:
      break;
  }
  float step_scale = 1.0f;
  if (table.staleness_aware) {
    *staleness = StalenessOf(meta, request.table, shard, table);
    step_scale = StalenessStepScale(*staleness);
  }
  PushRows(request, table, step_scale);
  // Recorded once applied: a push that failed (out of memory) may come again.
  window.Insert(meta.sequence());
  ++table.version;
  state_.range_pushes.Add(range);
  if (table.staleness_aware && meta.origin() == 0)
    shard.reads.RecordPush(meta.sender(), request.table);
  if (shard.primary_since > 0 && meta.origin() == 0) {
    LOG(INFO) << "key range " << range << ": first push served since this server became "
              << "its primary, " << MonotonicSeconds() - shard.primary_since << " s ago";
    shard.primary_since = 0;
  }
  return true;
}

int64_t RequestServing::StalenessOf(const proto::Meta& meta, uint32_t table_id, const Shard& shard,
                                    const ServerTable& table) const {
  if (meta.origin() != 0) {
    return meta.has_push_staleness() ? PushStaleness::Clamp(meta.push_staleness()) : 0;
  }
  if (!meta.has_read_clock()) return 0;
  return shard.reads.Of(meta.sender(), table_id, meta.read_clock(), table.version);
}

void RequestServing::ServePull(const proto::Meta& meta, const DataRequest& request, Shard& shard,
                               size_t range, int64_t waited_us, Message* response) {
  if (!shard.ready) throw MakeError("key range ", range, " is not ready here");
  ServerTable& served = state_.TableFor(shard, range, request.table, request.width);
  if (served.staleness_aware) {
    shard.reads.RecordPull(meta.sender(), request.table, meta.clock(), served.version);
  }
  ParameterTable* table = served.rows.get();
  response->meta.set_min_clock(
      gate_.MinClock(GateSlot(static_cast<uint32_t>(range), request.table)));
  response->meta.set_waited_us(waited_us);
  // The answer travels in the precision the pull asked for, but fp16 as fp32
  // when a weight lies past its range (NarrowToSend); the answer says which.
  SharedArray<const float> values;
  if (request.keys.size() == 1 && table->shares_rows()) {
    // One long row: sent straight from the table, copied only if a push
    // comes while it is still being sent (a key without a row: its initial
    // weights, made for this answer).
    values = table->SharedWeights(request.keys[0]);
  } else {
    auto rows = SharedArray<float>::Allocate(request.keys.size() * request.width);
    PullRows(request, request.table, *table, rows.data());
    values = rows;
  }
  OutgoingFrame frame = NarrowToSend(values, meta.precision());
  response->meta.set_precision(frame.precision);
  response->frames.push_back(std::move(frame.bytes));
  state_.counters.served.fetch_add(1);
}

size_t RequestServing::RangeOfRequest(const DataRequest& request) const {
  auto ranges = node_->ranges();
  if (!ranges) throw MakeError("this server has no cluster view yet");
  // Every key a request names lies in one range (the first list's).
  size_t range = 0;
  bool found = false;
  for (const SharedArray<const Key>* keys :
       {&request.keys, &request.unadmitted, &request.evicted}) {
    if (keys->size() == 0) continue;
    const size_t first = ranges->RangeOf((*keys)[0]);
    const size_t last = ranges->RangeOf((*keys)[keys->size() - 1]);
    if (!found) range = first;
    found = true;
    if (first != range || last != range) {
      throw MakeError("the request's keys span key ranges ", std::min(first, range), " and ",
                      std::max(last, range), "; send one request per range");
    }
  }
  return range;
}

void RequestServing::ForEachPrimaryRow(uint32_t table, uint32_t width,
                                       const std::function<void(Key, const float*)>& visit) const {
  auto ranges = node_->ranges();
  for (const auto& [range, shard] : state_.shards) {
    // Each range's rows come from its primary only.
    if (!ranges || ranges->server(range) != node_->rank()) continue;
    auto found = shard.tables.find(table);
    if (found == shard.tables.end()) continue;
    if (static_cast<uint32_t>(found->second.rows->weight_width()) != width) {
      throw MakeError("table ", table, " has rows of width ", found->second.rows->weight_width(),
                      ", the request has width ", width);
    }
    found->second.rows->ForEach(visit);
  }
}

Message RequestServing::Summarize(uint32_t table, uint32_t width) const {
  uint64_t rows = 0;
  double square_sum = 0;
  ForEachPrimaryRow(table, width, [&](Key, const float* row) {
    ++rows;
    for (uint32_t column = 0; column < width; ++column) {
      square_sum += static_cast<double>(row[column]) * row[column];
    }
  });
  Message response;
  response.meta.mutable_summary()->set_rows(rows);
  response.meta.mutable_summary()->set_weight_square_sum(square_sum);
  return response;
}

Message RequestServing::Dump(uint32_t table, uint32_t width, Key from) const {
  const size_t page_rows = RowsPerPage(state_.page_bytes, width);
  const auto by_key = [](const auto& a, const auto& b) { return a.first < b.first; };
  // The page's rows: the `page_rows` smallest keys >= from, found in one pass
  // that never holds more than twice as many.
  std::vector<std::pair<Key, const float*>> rows;
  bool more = false;
  ForEachPrimaryRow(table, width, [&](Key key, const float* row) {
    if (key < from) return;
    rows.emplace_back(key, row);
    if (rows.size() >= 2 * page_rows) {
      std::nth_element(rows.begin(), rows.begin() + page_rows, rows.end(), by_key);
      rows.resize(page_rows);
      more = true;
    }
  });
  if (rows.size() > page_rows) {
    std::nth_element(rows.begin(), rows.begin() + page_rows, rows.end(), by_key);
    rows.resize(page_rows);
    more = true;
  }
  std::sort(rows.begin(), rows.end(), by_key);
  auto keys = SharedArray<Key>::Allocate(rows.size());
  auto values = SharedArray<float>::Allocate(rows.size() * width);
  for (size_t i = 0; i < rows.size(); ++i) {
    keys[i] = rows[i].first;
    std::memcpy(values.data() + i * width, rows[i].second, sizeof(float) * width);
  }
  Message response;
  response.meta.set_key_count(rows.size());
  // The last possible key ends every page after it.
  response.meta.set_dump_more(more && !rows.empty() && rows.back().first != ~Key{0});
  response.frames.push_back(AsBytes(keys));
  response.frames.push_back(AsBytes(values));
  return response;
}

}  // namespace keel
