// ServerState: what a KVServer and its collaborators (SnapshotRestore,
// ChainReplication, RequestServing) share: the node, the job's table
// declarations, the shards (this server's replicas of its key ranges), the
// current view's members, and the counters KVServer reports.
//
// Threading: the shards, members and view epoch are touched only on the
// node's receive thread (where every data, control and view handler runs),
// so they take no lock. The counters are atomics, read from any thread.
// failure() and Fail() take failure_mutex_, which guards only the failure's
// text (no other lock is taken while it is held).
#ifndef KEEL_SERVER_SERVER_STATE_H_
#define KEEL_SERVER_SERVER_STATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "base/thread_pool.h"
#include "kv/message.h"
#include "kv/node.h"
#include "kv/optimizer.h"
#include "kv/table_spec.h"
#include "server/key_list_cache.h"
#include "server/shard.h"

namespace keel {

// KVServer's counters (see its accessors for what each counts).
struct ServerCounters {
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> duplicates{0};
  std::atomic<uint64_t> served{0};
  std::atomic<uint64_t> parked_total{0};
  std::atomic<uint64_t> non_finite{0};
  std::atomic<uint64_t> out_of_window{0};
  std::atomic<uint64_t> admitted_keys{0};
  std::atomic<uint64_t> unadmitted_pushes{0};
  std::atomic<uint64_t> evicted_rows{0};
  std::atomic<uint64_t> key_lists_kept{0};
  std::atomic<uint64_t> key_list_hits{0};
  std::atomic<uint64_t> key_list_slot_hits{0};
  std::atomic<uint64_t> unknown_key_lists{0};
  std::atomic<size_t> remembered_senders{0};
  std::atomic<size_t> remembered_readers{0};
};

// Per key range: the pushes its rows here reflect (those applied here, and
// those the copy it took from another replica reflected there), for the
// heartbeats. Thread-safe: the receive thread counts, the heartbeat reads.
class RangePushCounts {
 public:
  void Add(size_t range) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[range];
  }
  void Set(size_t range, uint64_t pushes) {
    std::lock_guard<std::mutex> lock(mutex_);
    counts_[range] = pushes;
  }
  uint64_t Get(size_t range) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = counts_.find(range);
    return found == counts_.end() ? 0 : found->second;
  }
  std::map<size_t, uint64_t> All() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counts_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<size_t, uint64_t> counts_;
};

struct ServerState {
  ServerState(Node* node, const OptimizerOptions& default_optimizer,
              std::map<uint32_t, TableSpec> specs)
      : node(node), default_optimizer(default_optimizer), specs(std::move(specs)) {}
  ServerState(const ServerState&) = delete;
  ServerState& operator=(const ServerState&) = delete;

  // Why the server cannot serve (a checkpoint that failed to load); "" if it can.
  std::string failure() const;
  void Fail(const std::string& why);

  // Table `table` of `shard` (this server's replica of key range `range`),
  // created with its spec on first use; throws Error if its rows are not
  // `width` wide.
  ServerTable& TableFor(Shard& shard, size_t range, uint32_t table, uint32_t width);

  // Sends `response` as the answer to `request` (a failure to send is logged).
  void Reply(const proto::Meta& request, Message& response);

  // The threads `table`'s pushes are stepped with (kv/parameter_table.h).
  ApplyThreads ApplyThreadsFor(const ServerTable& table) const {
    return {apply_pool.get(), &table.apply_optimizers};
  }

  Node* const node;
  const OptimizerOptions default_optimizer;
  const std::map<uint32_t, TableSpec> specs;
  std::map<size_t, Shard> shards;  // by range index
  // The view asks for delta checkpoints: tables stamp their rows' changes.
  bool track_changes = false;
  // Node ids in the current view and their roles: requests from anyone else
  // (a node that left the view and came back from a pause) are refused.
  std::map<int, proto::Role> members;
  uint64_t view_epoch = 0;
  // The most bytes of rows one DUMP answer or one REPLICA_SYNC page carries.
  size_t page_bytes = kPageBytes;
  ServerCounters counters;
  RangePushCounts range_pushes;
  // Key lists kept for the workers' requests (key caching).
  KeyListCache key_lists;
  // The threads a push's rows are stepped with besides the receive thread,
  // which waits for them (--server_apply_threads); nullptr: the receive
  // thread alone. Tables made while it is set get an optimizer per thread.
  std::unique_ptr<ThreadPool> apply_pool;

 private:
  mutable std::mutex failure_mutex_;
  std::string failure_;
};

}  // namespace keel

#endif  // KEEL_SERVER_SERVER_STATE_H_
