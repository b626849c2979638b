// KeyListCache: the key lists a server keeps for its workers (key caching, as
// in the Parameter Server paper): a worker that sends the same keys again
// names them by a short id instead of sending them (see Meta.key_list).
//
// With each list, for up to kSlotTables tables it was used with, the slots
// of its keys' rows (ParameterTable::FindSlots, as the push or pull that
// probed them answers them), valid while the table's layout stays the same:
// a list pushed or pulled again is neither received nor probed again.
//
// Lists are kept per (sender, id) and never replaced by a different list
// (ids are unique per worker). Bounds: each sender may keep at most `lists`
// lists and `bytes` bytes of keys, and all senders together `total_bytes`; a
// list past a bound is not kept (the request is served all the same, and the
// worker hears that it was not kept; a list costs kBytesPerKey a key), so nothing a worker still
// names is dropped to make room, and a peer cannot grow the server's memory past the bounds. The
// whole cache is dropped at every view change (ranges move, servers come and go, rows are restored:
// Clear) and a sender's lists when it leaves the view (ForgetSendersUnless).
//
// Threading: not synchronized; a server touches it on its receive thread.
#ifndef KEEL_SERVER_KEY_LIST_CACHE_H_
#define KEEL_SERVER_KEY_LIST_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "kv/keys.h"
#include "kv/parameter_table.h"
#include "kv/shared_array.h"

namespace keel {

struct KeyCacheBounds {
  size_t lists = 1024;              // per sender
  size_t bytes = size_t{256} << 20;  // of keys, per sender
  size_t total_bytes = size_t{512} << 20;
  // Throws Error naming a bound that is zero.
  void Check() const;
};

class KeyListCache {
 public:
  // Tables a list keeps the slots of (the latest used).
  static constexpr size_t kSlotTables = 2;
  // What a list costs against the bounds, per key: the key, and a 4-byte
  // slot in each of kSlotTables tables.
  static constexpr size_t kBytesPerKey = sizeof(Key) + 4 * kSlotTables;

  class List {
   public:
    explicit List(SharedArray<const Key> keys) : keys_(std::move(keys)) {}
    const SharedArray<const Key>& keys() const { return keys_; }
    // The slots of the rows of keys() in table `table` if found while
    // `rows` had the layout it has now; null otherwise.
    const std::vector<uint32_t>* SlotsIn(uint32_t table, const ParameterTable& rows) const;
    // Keeps `slots` as those of table `table`: ParameterTable::FindSlots'
    // answer for keys() in `rows` as it is now (`found` its return), which a
    // push or pull of keys() answers from its own probes. Slots only spare
    // work: out of memory, none are kept (a push already applied must not
    // fail for them).
    void KeepSlotsIn(uint32_t table, const ParameterTable& rows, bool found,
                     std::vector<uint32_t> slots) noexcept;
    // Whether keys() were looked for in `rows` and not all found, and the
    // table has made or moved no row since: they would not be found now.
    bool FoundInVain(uint32_t table, const ParameterTable& rows) const;

   private:
    struct TableSlots {
      uint32_t table = 0;
      ParameterTable::Layout layout;
      size_t rows = 0;  // the table's rows when they were looked for
      bool found = false;
      std::vector<uint32_t> slots;
    };
    SharedArray<const Key> keys_;
    std::vector<TableSlots> tables_;  // the latest used last
  };

  explicit KeyListCache(KeyCacheBounds bounds = KeyCacheBounds()) : bounds_(bounds) {}

  void set_bounds(const KeyCacheBounds& bounds) { bounds_ = bounds; }
  const KeyCacheBounds& bounds() const { return bounds_; }

  // Keeps `keys` (sorted, checked by the caller) under (sender, id) unless a
  // bound forbids it or another list is kept under that id; returns whether
  // (sender, id) names `keys` now. Holds a reference to the array, no copy.
  bool Keep(int sender, uint64_t id, const SharedArray<const Key>& keys);
  // The list kept under (sender, id), or null. Valid until Clear or
  // ForgetSendersUnless.
  List* Find(int sender, uint64_t id);

  // Drops every list (a view change).
  void Clear();
  // Drops the lists of the senders for which `keep` is false.
  void ForgetSendersUnless(const std::function<bool(int sender)>& keep);

  size_t lists() const { return entries_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  struct SenderTotals {
    size_t lists = 0;
    size_t bytes = 0;
  };

  KeyCacheBounds bounds_;
  std::map<std::pair<int, uint64_t>, List> entries_;
  std::map<int, SenderTotals> senders_;
  size_t bytes_ = 0;
};

}  // namespace keel

#endif  // KEEL_SERVER_KEY_LIST_CACHE_H_
