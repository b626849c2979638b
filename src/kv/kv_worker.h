// KVWorker: a worker's push/pull client for the parameter servers.
//
// Keys are sorted, unique uint64 in the mixed key space (see MixKey and
// MixedKeySet); values are floats, `width` per key, row-major. A batch is split
// across servers by key range and sent without copying. Push and Pull return at
// once with a handle; Wait blocks until every server involved has answered.
//
// A part of a request goes to the primary of its key range. A request that
// gets no answer is resent with the same (sender, sequence), to whichever
// server is the range's primary by then (a promoted backup, or a replacement)
// (see RequestRetry): servers apply a push at most once per sequence and
// answer a repeated one as a success, pulls and dumps are idempotent, and a
// response to a request already answered is ignored. So a worker survives
// lost messages (TransportFaults) without counting a gradient twice.
//
// A pull the staleness gate holds is acknowledged by its server at once (a
// PULL response marked `held`, no values), and answered when the gate opens.
// The acknowledgement is the round-trip sample (when the pull was sent once);
// the answer, which includes the time held, is none. A held pull is not
// resent on the estimate but polled, each poll waiting twice as long as the
// one before (the first after one estimate), so a pull held for T seconds is
// sent about log2(T / estimate) more times, and a lost answer costs at most
// about the time it had been held. Each acknowledgement counts as hearing
// from the server: a pull held for long does not fail for want of an answer.
// Why: unacknowledged, a held pull looks lost. Resent on the estimate it
// would go again at every doubling of the wait, each copy held and answered
// with its values when the gate opens; its answer would be a sample inflated
// by the hold; and it would fail once held past the give-up time.
//
// Key caching (SetKeyCache; off unless set): a push or pull whose keys for a
// server are a list sent there before names the list by an id the server
// kept it under (SentKeyLists) instead of carrying the keys. A server that no
// longer holds the list answers so before applying anything, and the part
// goes again at once with its keys; a part resent for want of an answer (or
// to another server) always carries its keys.
//
// Wire precision (SetWirePrecision; float32 unless set): the pushes' values
// and pulls' answers of the tables named travel as 16-bit values
// (kv/wire_precision.h; an fp16 part holding a value past fp16's range goes
// as fp32, PrecisionToSend); the server widens a push's values and applies
// float32, and a pull's answer is widened here from what it says it is. Other tables (a job's
// counters and sums), dumps and clock announcements stay float32.
//
// Thread-safe: Push, Pull and Wait may be called from several threads.
#ifndef KEEL_KV_KV_WORKER_H_
#define KEEL_KV_KV_WORKER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/keys.h"
#include "kv/node.h"
#include "kv/request_observer.h"
#include "kv/rtt_estimator.h"
#include "kv/sent_key_lists.h"
#include "kv/shared_array.h"

namespace keel {

// When a request without an answer is sent again.
//
// Each server's round trip is estimated from the parts it answered
// (RttEstimator, as TCP's retransmission timer): a part is resent when it has
// had no answer for that estimate, doubled per resend of the same part, within
// [min_timeout_s, max_timeout_s]; timeout_s is the estimate before the first
// answer. Dumps wait by the fixed schedule (TimeoutAfter): a page of up to
// kPageBytes takes the server long to build, and tells nothing of the round
// trip.
// A dump that lost a server mid-way (KVWorker::Dump starts it again).
class DumpInterrupted : public Error {
 public:
  using Error::Error;
};

struct RequestRetry {
  double timeout_s = 1;
  double min_timeout_s = 0.002;
  double max_timeout_s = 16;
  // Sends in all, the first included. When the last has had its wait, and the
  // fixed schedule's max_attempts waits have passed since the server was last
  // heard of (GiveUpAfter: a short estimate does not make a request fail
  // sooner than it did when every wait began at timeout_s), the request fails
  // with an error naming the server and the request.
  int max_attempts = 10;
  // Throws Error naming the bad setting.
  void Check() const;
  // The fixed schedule: timeout_s after the first send, doubling per
  // resend up to max_timeout_s. How long to wait after the `attempt`-th send.
  double TimeoutAfter(int attempt) const;
  // The fixed schedule's max_attempts waits, summed.
  double GiveUpAfter() const;
};

// A request is resent only while fewer than this many later sequences have
// been issued by the same worker; past that it fails instead. Servers
// remember the last 4096 sequences they applied per sender (DedupeWindow):
// every sequence a server can record between a request's first copy and its
// last resend lies within this horizon on either side of it, so fewer than
// 2 x 2048 = 4096, and the resend is still recognised.
constexpr uint64_t kResendSequenceHorizon = 2048;

// What the staleness gate did to this worker's pulls.
struct GateStats {
  static constexpr int kBuckets = 8;
  // Bucket upper bounds of a pull's staleness (its clock minus the slowest
  // worker's when it was answered): <=0, 1, 2, <=4, <=8, <=16, <=64, more.
  static int Bucket(int64_t staleness);
  static const char* BucketName(int bucket);

  uint64_t pulls = 0;
  uint64_t waited = 0;    // pulls the gate held back
  int64_t waited_us = 0;  // their total time at the gate
  int64_t max_staleness = 0;
  int64_t staleness_sum = 0;  // over every pull
  uint64_t histogram[kBuckets] = {};
};

class KVWorker {
 public:
  using Handle = uint64_t;

  // Registers as `node`'s data handler: call before node->Start(). Throws
  // Error if `retry` is malformed.
  explicit KVWorker(Node* node, RequestRetry retry = RequestRetry());
  // Stops the node first, so no response arrives for a destroyed client.
  virtual ~KVWorker();
  KVWorker(const KVWorker&) = delete;
  KVWorker& operator=(const KVWorker&) = delete;

  // Sends gradients for `keys` (values.size() == keys.size() * width) to the
  // servers of table `table`, which apply them with their optimizer. `keys`
  // and `values` must stay unchanged until Wait returns. Throws Error if the
  // keys are not sorted and unique or the sizes disagree, or if a part could
  // not be made or sent (the socket failed, memory ran out; a part whose
  // server is not reachable now is resent instead): the request is then
  // forgotten, and nothing of it is resent. `read_clock`: the
  // clock stamped on the pull that read the rows the gradients were computed
  // from, which lets a server scale the step by the push's staleness
  // (server/push_staleness.h); without it the step is not scaled.
  Handle Push(const SharedArray<const Key>& keys, const SharedArray<const float>& values, int width,
              uint32_t table = 0, std::optional<int64_t> read_clock = std::nullopt);

  // Reads the rows of `keys` into `*values` (keys.size() * width floats).
  // When Wait returns, `*values` holds them: filled in place if it already had
  // that size and the rows came from several servers, otherwise pointed at
  // the received message itself (no copy). Neither `keys` nor `*values` may be
  // touched before then. Throws Error as Push does. `sent_again`: the caller
  // sends the same keys again (a training minibatch: its push, the next
  // epoch's pull), so key caching offers the list with this pull
  // (SentKeyLists) and the push can name it.
  Handle Pull(const SharedArray<const Key>& keys, SharedArray<float>* values, int width,
              uint32_t table = 0, bool sent_again = false);

  // Reads every row of table `table` from every server: `keys` sorted, and
  // `values` keys->size() x width. Each server answers in pages of at most
  // kPageBytes of rows (asked for again until none remain), so a page is a
  // consistent copy of its rows but the whole is not if pushes run meanwhile:
  // dump when they do not (the end of a job). A server that leaves the view
  // during the dump (its ranges promoted elsewhere) makes it start again on
  // the new view. Blocks; throws Error as Wait does, each page bounded by
  // `timeout_s`.
  void Dump(uint32_t table, int width, std::vector<Key>* keys, std::vector<float>* values,
            double timeout_s = 600);

  // Every server's figures of table `table` (rows `width` weights wide),
  // summed: its rows, and the sum of their weights' squares. Each range
  // counts once (its primary's); starts again if a server leaves the view
  // meanwhile, as Dump does. Blocks; throws Error as Wait does.
  proto::TableSummary Summarize(uint32_t table, int width, double timeout_s = 600);

  // Blocks until the request completes. Throws Error if a server refused it
  // (the server's reason is in the message) or `timeout_s` passes.
  void Wait(Handle handle, double timeout_s = 600);

  // Stamps later requests with `clock` (the minibatches this worker has
  // pushed; see StalenessGate).
  void set_clock(int64_t clock) { clock_.store(clock); }
  int64_t clock() const { return clock_.load(); }
  // Tells every server this worker's clock (kLeaveClock: stop counting it),
  // for the key ranges and tables its pushes did not reach: the message
  // names those with a push stamped `clock` or later still unanswered, as
  // (range, table) pairs of uint32 in one frame, and the servers count the
  // clock there only as each push is applied (StalenessGate). With `wait`, blocks until every
  // server has applied it; without, it is still resent until acknowledged,
  // and if that fails the next Wait throws the error.
  void AnnounceClock(int64_t clock, bool wait, double timeout_s = 600);
  GateStats gate_stats() const;

  // Hears of every push and pull part a server answered without error (on
  // the receive thread, with this worker's lock held), for metrics. Set
  // before node->Start().
  void SetRequestObserver(RequestObserver observer) { observer_ = std::move(observer); }

  // Turns key caching on (options.enabled) with its bounds. Set before
  // node->Start(). Throws Error naming a zero bound.
  void SetKeyCache(const KeyCacheOptions& options);
  bool key_cache() const { return key_lists_->options().enabled; }
  // The precision the pushes' values and pulls' answers of `tables` travel
  // in (the others' stay float32). Set before node->Start(). Throws Error for
  // an unknown precision.
  void SetWirePrecision(proto::WirePrecision precision, const std::set<uint32_t>& tables);
  proto::WirePrecision wire_precision() const { return precision_; }
  // Bytes of every data message this worker sent to servers (each send of a
  // part, resends included) and received from them (every answer, late ones
  // included): the serialized Meta and the data frames. ZeroMQ's framing and
  // TCP/IP headers are not counted.
  uint64_t wire_bytes_sent() const { return wire_bytes_sent_.load(); }
  uint64_t wire_bytes_received() const { return wire_bytes_received_.load(); }

  // Request parts sent naming a kept key list, and answers that the server
  // held no such list (the part went again with its keys).
  uint64_t named_key_lists() const { return named_requests_.load(); }
  uint64_t unknown_key_lists() const { return unknown_key_lists_.load(); }

  // Forgets a request: a late response to it is dropped, and arrays it was
  // to fill are no longer touched. For a caller giving up on a request.
  void Cancel(Handle handle);

  // Requests sent but not yet waited for.
  size_t pending() const;

  // The longest a push part waited for its answer (from its first send)
  // since the last call, in seconds; 0 if none was answered.
  double TakeLongestPush();

  // The epoch of the latest view this worker has acted on (its outstanding
  // parts follow that view's servers); 0 before the first.
  uint64_t view_epoch() const;

  // Request parts sent again for want of an answer.
  uint64_t resends() const { return resends_.load(); }
  // Responses ignored because their request was answered (or cancelled).
  uint64_t late_responses() const { return late_responses_.load(); }
  // Parts resent for want of an answer whose first copy was answered after
  // all, by the server it went to (Meta.send).
  uint64_t needless_resends() const { return needless_resends_.load(); }
  // Push parts and pull answers asked for as fp16 that travelled as fp32, a
  // value of theirs lying past fp16's range (PrecisionToSend).
  uint64_t wide_fp16_parts() const { return wide_fp16_parts_.load(); }

 protected:
  // Sends a request's part, the first time and again (from the resend
  // thread, which logs what it throws). Throws what Node::Send throws; a test
  // overrides it to make sends fail or to lose one.
  virtual void SendPart(int server_id, Message& message) { node_->Send(server_id, message); }
  // The node's view, which a request to every server (a clock announcement,
  // a dump) is addressed by; a test overrides it to give a view read just
  // before a newer one arrived.
  virtual std::shared_ptr<const proto::ClusterView> CurrentView() const { return node_->view(); }

 private:
  struct Request {
    int unanswered = 0;
    SharedArray<float>* out = nullptr;  // Pull: destination of the values
    int parts = 0;
    std::vector<Message> dumped;  // Dump: the servers' responses
    std::string error;
    bool detached = false;  // nobody waits: forgotten once answered
    // Dump: a server asked left the view before answering (the dump starts
    // again on the view that followed).
    bool server_left = false;
  };
  // One server's share of a request, kept until answered so it can be resent.
  struct Part {
    Handle handle;
    size_t value_offset;  // floats into Request::out
    size_t value_count;
    int64_t clock = 0;
    proto::Command command = proto::COMMAND_UNKNOWN;
    int server_id = -1;
    int first_server_id = -1;  // where its first copy went
    int server_rank = -1;
    int range = -1;   // the key range it is for; -1: for the server itself (CLOCK, DUMP)
    Message message;  // as sent (frames share the caller's arrays)
    SharedArray<const Key> keys;  // PUSH, PULL: its keys (sent again if a list is unknown)
    int attempts = 1;             // sends so far
    double first_sent = 0;
    double deadline = 0;  // resend (or fail) when no answer by then
    // The last word from the server: the first send, or its latest
    // acknowledgement that the staleness gate holds the pull.
    double heard_at = 0;
    int sends_since_heard = 1;
    bool held = false;   // acknowledged as held at the gate
    bool moved = false;  // answered moved: resent for the range's new server
    bool view_resend = false;  // due at once: a new view's primary, or a server left
    // A copy went again because none was answered in time (Meta.send).
    bool resent_for_want_of_answer = false;
  };

  // A request part on its way to a server (-1: none holds its range now).
  struct Outgoing {
    int server_id;
    Message message;
  };

  // Splits a push or pull by key range and sends each server its part.
  Handle Send(proto::Command command, const SharedArray<const Key>& keys,
              const SharedArray<const float>& values, SharedArray<float>* out, int width,
              uint32_t table, std::optional<int64_t> read_clock, bool sent_again = false);
  // The node id of the server of rank `server_rank`, or -1 if none has it now.
  int ServerIdOrNone(int server_rank) const;
  // The part of a push or pull with keys [begin, end) (frames share the arrays).
  // `key_list`: how its keys go (SentKeyLists).
  Message PartMessage(proto::Command command, const SharedArray<const Key>& keys,
                      const SharedArray<const float>& values, size_t begin, size_t end, int width,
                      uint32_t table, std::optional<int64_t> read_clock,
                      SentKeyLists::Choice key_list = SentKeyLists::Choice());
  // Makes `part` carry its keys and name no key list.
  static void WithKeys(Part* part);
  // The (range, table) pairs of pushes stamped `clock` or later still
  // unanswered, as a CLOCK's frame (none: empty).
  Bytes PushedSlotsLocked(int64_t clock) const;
  // Sizes a pull's result array for `count` floats gathered from its parts.
  void PrepareResultLocked(Request& request, size_t count);
  void SendParts(Handle handle, std::vector<Outgoing>& outgoing);
  // SendPart, counting the message's bytes once it went.
  void SendCounted(int server_id, Message& message);
  // Dump's steps: asks every server, then waits for all the answers.
  // With `summarize`, asks for the table's figures instead of its rows.
  // `from`: the servers to ask (node id -> the first key of the page
  // wanted); null: every server, for its first page.
  Handle SendDumpRequests(uint32_t table, int width, bool summarize = false,
                          const std::map<int, Key>* from = nullptr);
  std::vector<Message> AwaitDump(Handle handle, uint32_t table, double timeout_s);
  // Waits (under `lock` on mutex_) until every part of `request` is answered.
  // Throws Error naming `what` if this node leaves the cluster (the request
  // cancelled) or `timeout_s` passes first (it stays outstanding: the caller
  // may wait again).
  void AwaitAnswersLocked(std::unique_lock<std::mutex>* lock, Handle handle, const Request& request,
                          double timeout_s, const std::string& what);
  // The view to address a request to every server by (`lock` holds mutex_;
  // released while the node's view is read): never older than the last view
  // OnView handled. A view read before a newer one was handled still names
  // the servers that one dropped, and a clock announcement or dump part
  // bound for one of them would be asked until its attempts ran out (OnView,
  // which ends such parts, has run already). Null before the first view.
  std::shared_ptr<const proto::ClusterView> ViewLocked(std::unique_lock<std::mutex>* lock) const;
  // Records `message` as a part of `handle` bound for `server_id` (caller holds mutex_).
  void AddPartLocked(Handle handle, int server_id, int server_rank, const Message& message,
                     size_t value_offset, size_t value_count, int range = -1,
                     const SharedArray<const Key>& keys = SharedArray<const Key>());
  // A new view: parts for a range whose primary changed go again now (and
  // every push, if a server left), and clock announcements to servers that
  // left count as answered.
  void OnView(const proto::ClusterView& view);
  // Runs `attempt` (a dump or a summary) again, up to 10 times, while it
  // throws DumpInterrupted (a server asked left the view).
  void RestartingOnViewChange(const std::function<void()>& attempt);
  // One attempt of Dump; throws DumpInterrupted if a server left meanwhile.
  void DumpOnce(uint32_t table, int width, std::vector<Key>* keys, std::vector<float>* values,
                double timeout_s);
  void OnResponse(Message&& message);
  void CancelLocked(Handle handle);
  // Ends `handle` with `error` (caller holds mutex_).
  void FailLocked(Handle handle, const std::string& error);
  // Tells the observer of an answered push or pull part (caller holds mutex_).
  void ObserveLocked(const Part& part, const Message& response) const;
  // Finishes one answered part of `request` (caller holds mutex_).
  void PartDoneLocked(Handle handle, Request& request);
  void ThrowBackgroundErrorLocked();
  // The resend thread: sends again each part that got no answer by its
  // deadline, and fails a request whose part cannot be resent.
  void ResendLoop();
  // The round-trip estimate of server `server_id`, made on first use.
  RttEstimator& EstimatorLocked(int server_id);
  // Node `answered_by` answered part `sequence` (`answered`): when that was
  // the oldest part outstanding at its server and the server itself
  // answered, the parts sent to it later and still on their first send wait
  // a round trip from now (they were queued behind it there; as TCP restarts
  // its timer on an acknowledgement of new data). A part is restarted only
  // by answers to parts sent before it, so a lost one is still resent.
  void RestartLaterTimersLocked(uint64_t sequence, const Part& answered, int answered_by,
                                double now);
  // How long `part` waits for an answer after its latest send.
  double WaitLocked(const Part& part);
  // A PULL response marked held: the server holds `part` at its gate.
  void OnHeldLocked(Part& part, double now);
  // Feeds the round trip of `part`, answered by `response`, to its server's
  // estimate, if it is a sample (sent once, or its first copy's answer after
  // a needless resend; not held, not a dump).
  void SampleLocked(const Part& part, const Message& response, double now);
  // Collects the parts due now: those to send again (to the server holding
  // their range now) and the requests to fail; lowers `*next` to the next
  // deadline.
  void CollectDuePartsLocked(double now, double* next, std::vector<std::pair<int, Message>>* resend,
                             std::vector<std::pair<Handle, std::string>>* failed);
  static std::string DescribePart(uint64_t sequence, const Part& part);
  // Why `part` must not be sent again ("" if it may be).
  std::string GiveUpReasonLocked(uint64_t sequence, const Part& part, double now,
                                 const std::string& what) const;
  // Points `part` at the server of its range now; false if there is none.
  bool Retarget(Part& part);
  void SendAgain(std::vector<std::pair<int, Message>>& resend);

  Node* node_;
  const RequestRetry retry_;
  mutable std::mutex mutex_;
  std::condition_variable answered_;
  Handle next_handle_ = 0;
  std::atomic<int64_t> clock_{0};
  GateStats gate_stats_;
  std::unordered_map<Handle, Request> requests_;
  std::unordered_map<uint64_t, Part> parts_;  // by sequence
  uint64_t latest_sequence_ = 0;              // the newest part's
  std::string background_error_;              // a detached request's failure
  std::atomic<uint64_t> resends_{0};
  std::atomic<uint64_t> late_responses_{0};
  std::atomic<uint64_t> needless_resends_{0};
  std::atomic<uint64_t> wide_fp16_parts_{0};
  std::atomic<uint64_t> named_requests_{0};
  std::atomic<uint64_t> unknown_key_lists_{0};
  std::atomic<uint64_t> wire_bytes_sent_{0};
  std::atomic<uint64_t> wire_bytes_received_{0};
  proto::WirePrecision precision_ = proto::WIRE_FP32;
  std::set<uint32_t> narrow_tables_;  // the tables that travel at precision_
  std::unique_ptr<SentKeyLists> key_lists_;
  double longest_push_s_ = 0;  // since TakeLongestPush
  RequestObserver observer_;
  bool stopping_ = false;
  bool resend_now_ = false;                            // a view change made parts due
  std::set<int> servers_;                              // server node ids in the latest view
  uint64_t view_epoch_ = 0;                            // of the view OnView handled last
  std::unordered_map<int, RttEstimator> round_trips_;  // by server node id
  double resend_wake_at_ = 0;  // when the resend thread wakes next, at the latest
  std::condition_variable resend_wake_;
  std::thread resend_thread_;
};

}  // namespace keel

#endif  // KEEL_KV_KV_WORKER_H_
