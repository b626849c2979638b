// ChainReplication: a server's part in its key ranges' replica chains.
//
// Passes a push its request serving applied to the next replica of the range
// (or, on the chain's last, acknowledges it to the worker); follows each view
// (creates the shards of ranges this server joined, drops those it left,
// notes promotions to primary); and runs REPLICA_SYNC: a replica joining a
// chain asks its predecessor for the range (whole, as a pre-copy in rounds
// and slices while the range moves here, or only the changes since its
// pre-copy), takes the pages of the copy, and then serves the pushes held
// meanwhile; as a predecessor, it answers such requests (wire form in
// shard_copy.h).
//
// It calls back into its owner only through Hooks: to serve a held push, and
// to say that a replica's readiness changed.
//
// Failures: an exception of any kind (Keel's Error, std::bad_alloc, one from
// protobuf or the standard library) while passing a push down, asking for a
// copy, making or sending one, telling the scheduler, or serving a held push
// is logged with the range and the node, and leaves the chain as if that
// message had been lost: a push not acknowledged is resent by its worker, a
// request for a copy not sent goes again at the next view, and the other held
// pushes are still served.
//
// Threading: not synchronized; every method runs on the node's receive thread
// (it touches the shards).
#ifndef KEEL_SERVER_CHAIN_REPLICATION_H_
#define KEEL_SERVER_CHAIN_REPLICATION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include "io/checkpoint.h"
#include "kv/message.h"
#include "kv/node.h"
#include "server/server_state.h"
#include "server/shard.h"

namespace keel {

class ChainReplication {
 public:
  struct Hooks {
    // Serves a push passed down and held while its range's copy was on its
    // way, once the copy has arrived (as if it had just arrived).
    std::function<void(Message&&)> serve_held;
    // A replica's readiness (ready, ranges waiting, pushes held) changed.
    std::function<void()> readiness_changed;
  };

  // `state` must outlive this.
  ChainReplication(ServerState* state, Hooks hooks);
  ChainReplication(const ChainReplication&) = delete;
  ChainReplication& operator=(const ChainReplication&) = delete;

  // Passes an applied push to the next replica of `range`, or acknowledges it
  // to the worker (node `origin`) if this is the last.
  void PassDown(const Message& push, size_t range, int origin);
  // Creates the shards of ranges this server joined and drops those it left.
  void UpdateShards(const proto::ClusterView& view, const RangeMap& ranges, bool first_view);
  // Asks the predecessor of every range still waiting for its rows.
  void AskForRanges(const RangeMap& ranges);
  // REPLICA_SYNC: answers a request for a range, or takes a range's copy.
  // The sender is a server of the current view.
  void OnReplicaSync(Message&& message);

 private:
  void DropLeftShards(const proto::ClusterView& view, const RangeMap& ranges);
  // Marks the shards this server became the primary of (a promotion).
  void NotePromotions(const RangeMap& ranges);
  void AddJoinedShards(const proto::ClusterView& view, const RangeMap& ranges, bool first_view);
  // Asks server `predecessor` for `range`, unless it was asked already: a
  // pre-copy if the shard is pre-copying, only the changes since the
  // pre-copy if it has one from that server, else the whole range.
  void AskPredecessor(size_t range, Shard& shard, int predecessor);
  // Asks node `id` for `range` (as AskPredecessor), unless it was asked already.
  void AskNode(size_t range, Shard& shard, int id);
  // A round of a pre-copy arrived from node `from`: asks for another, or is done.
  void PrecopyRound(size_t range, Shard& shard, int from);
  void AnswerShardRequest(const proto::Meta& meta, size_t range);
  // Takes one page of a copy (`message`): the first replaces `shard`'s rows
  // and dedupe windows, the others add theirs. Throws Error if the page is
  // out of order, malformed or does not fit.
  void TakeShardCopy(const Message& message, Shard& shard, size_t range);
  // Sends `range`'s rows and dedupe windows to node `to`, answering
  // `sequence`: every row, or (`since`, by table) only those changed since
  // a pre-copy (tables not in `since` whole).
  // `take`, if given, makes each table's copy instead (a slice, laid over
  // earlier slices: `adds` marks the pages delta; `slices` is echoed, 0 if
  // the slices end with this one).
  using TableCopier = std::function<SnapshotTable(uint32_t, const ServerTable&)>;
  void SendShardCopy(size_t range, const Shard& shard, int to, uint64_t sequence,
                     const std::map<uint32_t, uint32_t>* since = nullptr,
                     const TableCopier* take = nullptr, bool adds = false, uint32_t slices = 0);
  // One slice of a pre-copy's whole round for node meta.sender().
  void SendPrecopySlice(const proto::Meta& meta, size_t range, Shard& shard);
  // A pre-copy or its delta asked by node `to` (AnswerShardRequest).
  void AnswerPrecopy(const proto::Meta& meta, size_t range, Shard& shard);
  // Keeps each table's stamp now for node `to`'s next delta, and starts new ones.
  void RecordPrecopy(int to, Shard* shard);
  // A pre-copy arrived: tells the scheduler.
  void PrecopyDone(size_t range, Shard& shard, int from);
  // The shard has its rows: answers the replicas that asked for it meanwhile,
  // tells the scheduler, and lets the pushes held meanwhile go on.
  void ShardReady(size_t range, Shard& shard);

  ServerState& state_;
  Node* const node_;
  Hooks hooks_;
};

}  // namespace keel

#endif  // KEEL_SERVER_CHAIN_REPLICATION_H_
