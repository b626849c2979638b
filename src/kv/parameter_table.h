// ParameterTable: the rows of one table on one server.
//
// An open-addressing hash table (linear probing, load at most 3/4) of
// fixed-width float rows: the weights, then the optimizer's state. A narrow
// row sits in its slot beside its key.
//
// Keys arrive mixed (MixKey), so they are spread evenly over the table's key
// range, and in sorted batches. The home slot of a key is therefore its
// position within the range, scaled to the capacity: order-preserving, so a
// sorted batch walks the slots in order and memory is read sequentially. If
// keys turn out clustered (keys that were not mixed, or that fill only part
// of the range: one long probe, or more than a few slots probed per row, when
// inserting or when growing), the table switches to a Fibonacci hash of the
// key, which does not care, so the slots probed stay a small multiple of the
// rows placed (probes()). No heap allocation per key: the
// slot array grows by half (any capacity: slots are found by multiplying, not masking; on
// transparent huge pages when large), so it holds between 1/2 and 3/4 of its slots once past its
// first size, and a row costs its slot's bytes times 4/3 to 2 (`keel bench kv --mode=memory`). Wide
// rows (kSharedRowBytes and up: a dense model's few long rows) each live in a reference-counted
// block, so a pull can send a row without copying it; a push to a row that is still being sent
// copies it first (copy on write). Not synchronized: a server touches a table from one thread.
// Views from SharedWeights may be read from any thread. A push may be applied by several threads
// (ApplyThreads), each stepping its own part of the push's rows; the calling thread resolves
// the rows and waits for them all.
//
// Only pushes (and FindOrInsert) create rows: a read of a key without a row answers the weights its
// row would start from (the initializer's, else zeros) and stores nothing, so reading keys costs
// no memory and a key read then pushed ends exactly as one only pushed. Exception safety: if a row
// cannot be made or the slots cannot grow (std::bad_alloc, or an initializer that throws), the
// table is left as it was before that key: no key without its row.
#ifndef KEEL_KV_PARAMETER_TABLE_H_
#define KEEL_KV_PARAMETER_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "kv/huge_page_allocator.h"
#include "kv/keys.h"
#include "kv/optimizer.h"
#include "kv/shared_array.h"

namespace keel {

class ThreadPool;

// The threads a push's rows are stepped with (ParameterTable::Push, PushSlots): the push's rows
// in pool->size() contiguous parts, part 0 on the calling thread through the push's own
// optimizer, part i through (*optimizers)[i - 1]. Every optimizer must be made from the same
// options as the push's (optimizers keep no row state, so any of them gives a row the same
// bits). A push of fewer than kMinRowsPerPart rows a part runs on the caller's thread alone:
// waking a thread costs more than stepping that many rows.
struct ApplyThreads {
  static constexpr size_t kMinRowsPerPart = 4096;
  ThreadPool* pool = nullptr;
  const std::vector<std::unique_ptr<Optimizer>>* optimizers = nullptr;
  // The parts a push of `rows` rows is stepped in: 1 to pool->size().
  int PartsFor(size_t rows) const;
};

class ParameterTable {
 public:
  // Fills a new row's weights (the state is zeroed by the table). The default
  // leaves weights at zero.
  using Initializer = std::function<void(Key key, float* weights, int width)>;

  // Holds keys in [first_key, last_key] (any key is accepted; keys outside
  // the range only lose the ordered layout's speed).
  ParameterTable(int weight_width, int state_width, Initializer initializer = nullptr,
                 Key first_key = 0, Key last_key = ~Key{0});

  // True while slots follow key order (see above).
  bool ordered() const { return ordered_; }

  int weight_width() const { return weight_width_; }
  int row_width() const { return row_width_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  // Bytes the table holds: its slots, and its wide rows' blocks.
  size_t memory_bytes() const {
    return slots_.capacity() + (shares_rows_ ? size_ * row_width_ * sizeof(float) : 0);
  }

  // Rows of at least this many bytes are kept in blocks of their own.
  static constexpr size_t kSharedRowBytes = 64 << 10;
  bool shares_rows() const { return shares_rows_; }

  // The row of `key`, created on first touch, to modify. Valid until the next
  // insertion.
  float* FindOrInsert(Key key);
  // The row of `key`, or nullptr if it was never touched.
  const float* Find(Key key) const;

  // Applies gradients (keys.size() x weight_width, row-major) to the rows of
  // `keys` through `optimizer`, creating rows on first touch; each step
  // scaled by `step_scale` (Optimizer::UpdateRows); with `threads`, rows
  // are stepped in parts on its threads (the rows themselves are found or
  // made on the calling thread). Keys must be distinct. If it throws (out of
  // memory), the rows of an earlier part of the batch may have been updated.
  // With `slots`, also answers FindSlots(keys, count, slots) as it stands
  // after the push (every key then has a row), from the push's own probes: no
  // second pass. Returns what FindSlots returns (false without `slots`).
  bool Push(const Key* keys, size_t count, const float* gradients, Optimizer* optimizer,
            float step_scale = 1.0f, const ApplyThreads* threads = nullptr,
            std::vector<uint32_t>* slots = nullptr);
  // Copies the weights of `keys` into `out` (count x weight_width); a key
  // without a row reads as its initial weights. Creates no row. With `slots`,
  // also answers FindSlots(keys, count, slots) from the pull's own probes (a
  // key without a row: false, `slots` cleared). Returns what FindSlots
  // returns (false without `slots`).
  bool Pull(const Key* keys, size_t count, float* out,
            std::vector<uint32_t>* slots = nullptr) const;

  // The weights of `key` as a view that stays unchanged after later pushes;
  // for a key without a row, a new array of its initial weights (no row is
  // created). Requires shares_rows().
  SharedArray<const float> SharedWeights(Key key) const;

  // Calls visit(key, row) for every row, in no particular order.
  void ForEach(const std::function<void(Key, const float*)>& visit) const;

  // Stamps: with them on, every row carries the value of stamp() when it was
  // last pushed or made (FindOrInsert counts as a change), so the rows
  // changed since a moment are those stamped after the stamp() of that
  // moment (the caller advances it). 4 bytes a row; off until enabled, and
  // the rows already held then count as changed.
  void EnableStamps();
  bool stamped() const { return !stamps_.empty(); }
  uint32_t stamp() const { return stamp_; }
  // Starts a new stamp: rows changed from now on are told apart from those
  // changed before. Returns the new stamp.
  uint32_t AdvanceStamp() { return ++stamp_; }
  // Rebuilds so far (growth, or a change of layout): rows keep their slots
  // while it stays the same.
  uint64_t generation() const { return generation_; }
  // Slots passed over so far on the way to a free one, beyond each key's
  // home slot, by insertions and rebuilds: the work the layout costs.
  uint64_t probes() const { return probes_; }
  // Room for `more` new keys without growing. A sorted batch must land on a
  // table sized for all of it, or in the ordered layout its first keys crowd
  // the first slots. Throws std::bad_alloc (the table unchanged) if the
  // slots cannot grow.
  void Reserve(size_t more);
  // Calls visit(key, row) for the rows in slots [begin, end) (the key ~0's
  // row when end > capacity()). Rows keep their slots until the table is
  // rebuilt (generation()) or a row is erased: slices of a capacity() taken
  // within one generation see every row once.
  void ForEachInSlots(size_t begin, size_t end,
                      const std::function<void(Key, const float*)>& visit) const;
  // Calls visit(key, row) for every row stamped after `stamp` (all rows
  // without stamps), in no particular order.
  void ForEachChangedSince(uint32_t stamp,
                           const std::function<void(Key, const float*)>& visit) const;
  // The keys of the rows last stamped before `stamp` (none without stamps).
  std::vector<Key> StampedBefore(uint32_t stamp) const;
  // Calls visit(key, row, its stamp) for every row stamped after `since`
  // (all rows, stamp 0, without stamps).
  void ForEachStamped(uint32_t since,
                      const std::function<void(Key, const float*, uint32_t)>& visit) const;
  // Sets the stamp of `key`'s row (if it has one) and, with `counter`, the
  // table's stamp(): restoring stamps saved with the rows (no row may then
  // carry a stamp above `counter`).
  void SetStamp(Key key, uint32_t stamp);
  void SetStampCounter(uint32_t counter) { stamp_ = counter; }

  // Removes the row of `key`; false if it had none. Later reads of `key`
  // answer its initial weights again.
  bool Erase(Key key);

  // Slots (a server's kept key lists, server/key_list_cache.h): where the
  // rows of a list of keys are, so that a list pushed or pulled again is not
  // probed again. A layout names this table and how its rows lie; it changes
  // whenever a row may have moved (a rebuild, an erasure), never when a row
  // is added, and no two tables of a process share one.
  struct Layout {
    uint64_t table = 0;
    uint64_t version = 0;
    bool operator==(const Layout& other) const {
      return table == other.table && version == other.version;
    }
  };
  Layout layout() const { return {serial_, generation_ + erasures_}; }
  // The slots of the rows of `keys` into `slots`; false (and `slots`
  // cleared) if a key has no row or a slot does not fit 32 bits.
  bool FindSlots(const Key* keys, size_t count, std::vector<uint32_t>* slots) const;
  // Push and Pull through `slots` found by FindSlots while layout() was what
  // it is now (required, not checked); distinct slots for PushSlots.
  void PushSlots(const uint32_t* slots, size_t count, const float* gradients, Optimizer* optimizer,
                 float step_scale = 1.0f, const ApplyThreads* threads = nullptr);
  void PullSlots(const uint32_t* slots, size_t count, float* out) const;

 private:
  // Marks a free slot; the key with this value has the extra slot at capacity().
  static constexpr Key kFree = ~Key{0};
  // FindIndex's answer for a key without a row.
  static constexpr size_t kNoSlot = ~size_t{0};

  size_t SlotOf(Key key) const {
    if (ordered_) {
      const size_t slot =
          static_cast<size_t>((static_cast<unsigned __int128>(key - first_key_) * scale_) >> 64);
      // Only a key outside the range lands past the end.
      return slot < capacity_ ? slot : slot % capacity_;
    }
    // The mixed key's high bits, scaled to the capacity.
    return static_cast<size_t>(
        (static_cast<unsigned __int128>(key * 0x9E3779B97F4A7C15ULL) * capacity_) >> 64);
  }
  // The slot after `index`, wrapping at the end.
  size_t NextSlot(size_t index) const { return index + 1 == capacity_ ? 0 : index + 1; }
  // Whether a table of `capacity` slots holding `rows` rows is past its load.
  static bool Overloaded(size_t rows, size_t capacity) { return rows * 4 > capacity * 3; }
  // The capacity a table grows to from `capacity`.
  static size_t Grown(size_t capacity) { return capacity + capacity / 2; }
  // Slots per key of the range, times 2^64.
  void SetScale();
  char* SlotAt(size_t index) { return slots_.data() + index * slot_bytes_; }
  const char* SlotAt(size_t index) const { return slots_.data() + index * slot_bytes_; }
  // A slot's key: slots are 4-byte aligned (a narrow row is not padded to 8
  // bytes), so the key is copied rather than referenced.
  Key KeyAt(size_t index) const {
    Key key;
    std::memcpy(&key, SlotAt(index), sizeof(Key));
    return key;
  }
  void SetKey(size_t index, Key key) { std::memcpy(SlotAt(index), &key, sizeof(Key)); }
  const float* Row(size_t index) const {
    return shares_rows_ ? blocks_[index].get()
                        : reinterpret_cast<const float*>(SlotAt(index) + sizeof(Key));
  }
  // The row to modify: a shared row still referenced elsewhere is copied first.
  float* MutableRow(size_t index);
  // The index of `key`'s slot, its row created on first touch.
  size_t FindOrInsertIndex(Key key);
  // The index of `key`'s slot, or kNoSlot if it has no row.
  size_t FindIndex(Key key) const;
  // From `home` on, the first slot holding `key` or free (key != kFree).
  size_t ProbeFrom(size_t home, Key key) const;
  // Fills `weights` with the weights a new row of `key` starts from.
  void InitialWeights(Key key, float* weights) const;
  // Makes the row of `key` in slot `index`, then writes the key there: if
  // anything throws, the slot stays free.
  void CreateRow(size_t index, Key key);
  // Sets capacity_ and the hashing that depends on it; marks every slot free.
  void SetCapacity(size_t capacity);
  void Grow() { Rebuild(Grown(capacity_), ordered_); }
  // Moves every row into new slots of `capacity`, laid out in key order if
  // `ordered` (by hash instead if that turns out too costly: clustered keys).
  // The new slots are allocated first: if that fails, the table is unchanged.
  void Rebuild(size_t capacity, bool ordered);
  // rows[i] = the row of keys[i] to modify, made on first touch and
  // stamped, found once (a rebuild on the way: found again); with `slots`,
  // slots[i] = its slot index (valid in the layout at the end).
  void ResolveRows(const Key* keys, size_t count, float** rows, uint32_t* slots = nullptr);
  // PushSlots on the calling thread.
  void PushSlotRange(const uint32_t* slots, size_t count, const float* gradients,
                     Optimizer* optimizer, float step_scale);
  // Calls visit(i, slot index) for each key, prefetching ahead.
  template <typename Visit>
  void ForBatch(const Key* keys, size_t count, Visit visit);
  // Calls visit(i, slot index or kNoSlot) for each key, prefetching ahead.
  template <typename Visit>
  void ForBatchFound(const Key* keys, size_t count, Visit visit) const;
  // Whether the slot indices of a table of this capacity fit FindSlots' 32 bits.
  bool SlotsFit() const { return capacity_ < std::numeric_limits<uint32_t>::max(); }
  void Prefetch(Key key) const;
  // The cache lines of slot `index` (its key and a narrow row).
  void PrefetchSlot(size_t index) const;
  void Stamp(size_t index) {
    if (!stamps_.empty()) stamps_[index] = stamp_;
  }
  // Moves slot `from`'s key, row and stamp to the free slot `to`; `from` is
  // then free.
  void MoveSlot(size_t from, size_t to);

  int weight_width_;
  int row_width_;
  Initializer initializer_;
  bool shares_rows_;
  size_t slot_bytes_;  // the key, then the row unless shared; a multiple of 4
  size_t capacity_ = 0;
  bool ordered_ = true;
  uint64_t generation_ = 0;  // rebuilds so far
  uint64_t erasures_ = 0;    // rows erased so far (each may move others)
  uint64_t serial_;          // this table's own, in the process (Layout)
  uint64_t probes_ = 0;      // see probes()
  // Since the layout was made: probes, and rows placed (by the rebuild, then
  // by insertions). See OrderedTooCostly.
  uint64_t ordered_probes_ = 0;
  uint64_t ordered_rows_ = 0;
  Key first_key_;
  Key last_key_;
  uint64_t scale_ = 0;  // ordered layout: slot = (key - first_key) * scale >> 64
  size_t size_ = 0;
  bool has_free_key_ = false;
  std::vector<char, HugePageAllocator<char>> slots_;  // capacity + 1 slots
  std::vector<std::shared_ptr<float[]>> blocks_;      // wide rows: capacity + 1
  std::vector<uint32_t> stamps_;                      // capacity + 1 when enabled
  uint32_t stamp_ = 1;
  std::vector<float*> push_rows_;  // a push's rows, when it is stepped in parts
};

}  // namespace keel

#endif  // KEEL_KV_PARAMETER_TABLE_H_
