// RequestServing: a server's answers to its workers' PUSH, PULL and DUMP (and
// to pushes passed down its chains), and the pulls held at the staleness gate.
//
// Each request is checked (the server can serve, the sender is a member in
// the role its request needs, the table is declared at its width, the keys
// lie in one range this server holds, a push's values are finite and its
// sequence within the dedupe window) and refused with an error naming the
// reason, counted and logged (rate-limited); a request for a range this
// server is no longer the primary of is answered as moved. A push is applied
// at most once per (origin, sequence), with key admission and eviction
// decided at the range's primary, and then passed down the range's chain
// through the PassDown it is given; a push passed down before the replica has
// its rows is held in the shard (bounded) for ChainReplication to serve once
// the copy arrives. A pull is answered with the rows' weights; one the gate
// does not admit yet is parked (acknowledged as held) and answered when it
// does, or refused when its sender leaves the view. A worker's push or pull
// may name a key list the server keeps (KeyListCache) instead of carrying its
// keys; one it does not hold is answered unknown_key_list, before anything is
// applied or recorded for dedupe. A push's values may travel as 16-bit
// (Meta.precision): they are widened and applied as float32, and passed down
// the chain as they came (or as float32 if the primary rewrote the push); a
// pull is answered in the precision it asked for.
//
// Threading: not synchronized; every method runs on the node's receive
// thread. The gate is read here and moved only by the owner, on that thread.
#ifndef KEEL_SERVER_REQUEST_SERVING_H_
#define KEEL_SERVER_REQUEST_SERVING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "kv/message.h"
#include "kv/node.h"
#include "kv/request_observer.h"
#include "kv/staleness_gate.h"
#include "server/server_state.h"
#include "server/shard.h"

namespace keel {

class RequestServing {
 public:
  // Passes an applied push to the next replica of `range`, or acknowledges it
  // to the worker `origin` if this server is the chain's last.
  using PassDown = std::function<void(const Message& push, size_t range, int origin)>;

  // `state` and `gate` must outlive this.
  RequestServing(ServerState* state, const StalenessGate* gate, PassDown pass_down);
  RequestServing(const RequestServing&) = delete;
  RequestServing& operator=(const RequestServing&) = delete;

  // Hears of every PUSH and PULL answered through ServeObserved.
  void SetObserver(RequestObserver observer) { observer_ = std::move(observer); }

  // Answers a request; returns true if it was a push applied now (not a
  // repeat, not refused).
  bool Serve(Message&& message, int64_t waited_us);
  // Serve, timed for the observer from `arrived` (MonotonicSeconds).
  bool ServeObserved(Message&& message, int64_t waited_us, double arrived);
  // Why `meta`'s sender may not send it: not a member of the view, or not in
  // the role its request needs; "" if it may.
  std::string SenderProblem(const proto::Meta& meta) const;

  // The gate's slot (key range, table) of a worker's PUSH or PULL, or of a
  // push passed down, from its first key (its keys frame, or the key list it
  // names); none if it names no key this server can find (Serve says why).
  std::optional<GateSlot> SlotOf(const Message& message) const;
  // Holds a pull of `slot` at the staleness gate and acknowledges it as held.
  void Park(Message&& message, const GateSlot& slot, double arrived);
  // Refuses the parked pulls of nodes no longer in the view.
  void RefuseParkedOfLeavers();
  // Answers the parked pulls the gate admits now.
  void WakeParked();

 private:
  struct Parked {
    Message message;
    GateSlot slot;
    double since;
  };

  // A worker's request naming a key list without its keys frame: puts the
  // kept keys in as its first frame and returns the list; null if it carries
  // its keys. Throws UnknownKeyList if none are kept under the id, Error if
  // their count is not the request's.
  KeyListCache::List* ResolveKeyList(Message* message);
  // The list being served if `request`'s keys are all of it, else null.
  KeyListCache::List* ServedList(const DataRequest& request) const;
  // ParameterTable::Push and Pull of `request`'s rows, through the slots the
  // list it named keeps (found on its first use, or after a table's layout
  // changed).
  void PushRows(const DataRequest& request, ServerTable& table, float step_scale);
  void PullRows(const DataRequest& request, uint32_t table_id, const ParameterTable& rows,
                float* out) const;
  // The node id of this server's predecessor in `range`'s chain; -1 if none.
  int PredecessorId(size_t range) const;
  // Whether `meta`, a worker's PUSH or PULL, is for a key range this server
  // is not the primary of now (`shard`: its replica of the range, or null if
  // it has none): answered as moved.
  bool MovedAway(const proto::Meta& meta, const Shard* shard) const;
  // Throws Error if this server cannot serve, or SenderProblem finds one.
  void CheckCanServe(const proto::Meta& meta) const;
  // Throws Error unless the job declared `request`'s table at its width (see
  // KVServer's constructor).
  void CheckDeclared(const DataRequest& request) const;
  // Throws Error naming the first NaN or infinity among a push's values.
  void CheckFinite(const DataRequest& request);
  // Counts and logs (rate-limited) a refused request; the answer carries `why`.
  void NoteRefused(const proto::Meta& meta, const std::string& why);
  bool ServeDump(const proto::Meta& meta, const DataRequest& request);
  bool ServeEmpty(const proto::Meta& meta);
  // Applies a push once, then passes it down the chain (PassDown); a push
  // passed down before the shard has its rows is held. Returns true if it was
  // applied now.
  bool ServePush(Message&& message, const DataRequest& request, Shard& shard, size_t range);
  // Eviction: a push with a clock above every one before advances the
  // table's clock (and starts a new stamp of its rows).
  void AdvanceTableClock(int64_t clock, ServerTable* table);
  // Key admission at the primary: drops from `request` the keys without a
  // row that have not yet been pushed admit_after times (counting this push).
  // The keys dropped go to `unadmitted` (ascending), for the replicas.
  void Admit(DataRequest* request, ServerTable* table, std::vector<Key>* unadmitted);
  // A replica's counting of a push passed down: the keys its primary
  // counted (the admitted ones without a row, and the unadmitted), in the
  // primary's order.
  void CountAsPrimaryDid(const DataRequest& request, ServerTable* table);
  // Drops from `request` the keys without a row in `table`.
  void KeepKeysWithRows(DataRequest* request, const ServerTable& table);
  // Keeps the keys (and their values) at the indices `kept` (ascending).
  void KeepOnly(const std::vector<size_t>& kept, DataRequest* request);
  // Eviction at the primary: once every eighth of the window, removes the
  // rows not pushed in the table's last evict_after clocks; returns their
  // keys, ascending, for the replicas.
  std::vector<Key> Sweep(Shard* shard, ServerTable* table);
  // Removes the rows of `keys` (noting them for a delta checkpoint).
  void EraseRows(const Key* keys, size_t count, Shard* shard, ServerTable* table);
  // Throws Error unless a push of `range` came from the right place: a
  // worker's to the range's primary, a passed-down one from the predecessor.
  void CheckPushRoute(const proto::Meta& meta, size_t range) const;
  // Holds a push passed down before `shard` has its rows (bounded).
  void HoldPush(Message&& message, Shard& shard, size_t range);
  // Applies `request` to `table` unless `origin` sent its sequence before,
  // its step scaled by the push's staleness (set in `*staleness`) if the
  // table is staleness-aware.
  bool ApplyOnce(const proto::Meta& meta, const DataRequest& request, int origin, Shard& shard,
                 ServerTable& table, size_t range, int64_t* staleness);
  // The staleness of a push to `table`: measured (PushStaleness) for a
  // worker's, the primary's figure for a passed-down one.
  int64_t StalenessOf(const proto::Meta& meta, uint32_t table_id, const Shard& shard,
                      const ServerTable& table) const;
  void ServePull(const proto::Meta& meta, const DataRequest& request, Shard& shard, size_t range,
                 int64_t waited_us, Message* response);
  // The key range `request`'s keys lie in; throws Error if they span more
  // than one, or this server has no view yet.
  size_t RangeOfRequest(const DataRequest& request) const;
  // One page of the rows of the ranges this server is primary of: those with
  // keys >= `from`, in key order, at most page_bytes of them (dump_more set
  // if more remain).
  Message Dump(uint32_t table, uint32_t width, Key from) const;
  // Their count and the sum of their weights' squares (DUMP with summarize).
  Message Summarize(uint32_t table, uint32_t width) const;
  // Calls visit(key, row) for every row of `table` in the ranges this server
  // is primary of; throws Error if the table's rows are not `width` wide.
  void ForEachPrimaryRow(uint32_t table, uint32_t width,
                         const std::function<void(Key, const float*)>& visit) const;

  ServerState& state_;
  Node* const node_;
  const StalenessGate& gate_;
  PassDown pass_down_;
  RequestObserver observer_;
  std::list<Parked> parked_;
  // The kept key list the request being served named (null: none); set by
  // Serve, which is not re-entered.
  KeyListCache::List* serving_list_ = nullptr;
};

}  // namespace keel

#endif  // KEEL_SERVER_REQUEST_SERVING_H_
