#include "kv/kv_worker.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "kv/staleness_gate.h"
#include "kv/wire_precision.h"

namespace keel {
namespace {

constexpr double kSpinSeconds = 50e-6;

void CheckKeys(const SharedArray<const Key>& keys) {
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) {
      throw MakeError("keys must be sorted and unique: key ", i, " (", keys[i],
                      ") does not follow key ", i - 1, " (", keys[i - 1], ")");
    }
  }
}

void CheckWidth(int width) {
  if (width <= 0 || static_cast<uint32_t>(width) > kMaxValueWidth) {
    throw MakeError("value width ", width, " is outside 1..", kMaxValueWidth);
  }
}

// Merges the servers' DUMP responses into `keys` and `values` (rows of `width`
// floats), sorted by key. Each server's pages come in key order, one after
// the other (RequestServing::Dump), so the merge takes the smallest head of
// one run per server, and lets a page go once its last row is taken: it
// holds what is left of the pages and the rows merged so far (about the
// table once), never an index of every row.
// Throws Error for a malformed response or a run out of order.
void MergeDumped(std::vector<Message>&& dumped, int width, std::vector<Key>* keys,
                 std::vector<float>* values) {
  struct Run {
    std::vector<Message*> pages;  // in the order they came
    size_t page = 0, row = 0;
    SharedArray<const Key> page_keys;
    SharedArray<const float> page_values;
  };
  std::map<int, Run> runs;  // by sender
  size_t total = 0;
  for (Message& message : dumped) {
    if (message.frames.size() != 2) throw MakeError("malformed dump response");
    const size_t count = message.frames[0].As<const Key>().size();
    const size_t value_count = message.frames[1].As<const float>().size();
    if (value_count != count * static_cast<size_t>(width)) {
      throw MakeError("malformed dump response: ", count, " keys, ", value_count, " values");
    }
    total += count;
    runs[message.meta.sender()].pages.push_back(&message);
  }
  // Opens the run's next non-empty page (and lets the one before go);
  // false when the run is done.
  const auto open_page = [](Run* run) {
    for (; run->page < run->pages.size(); ++run->page) {
      Message* message = run->pages[run->page];
      run->page_keys = message->frames[0].As<const Key>();
      run->page_values = message->frames[1].As<const float>();
      *message = Message();
      run->row = 0;
      if (run->page_keys.size() > 0) {
        ++run->page;
        return true;
      }
    }
    run->page_keys = SharedArray<const Key>();
    run->page_values = SharedArray<const float>();
    return false;
  };
  // Heads of the open runs, the smallest key on top.
  using Head = std::pair<Key, Run*>;
  std::vector<Head> heads;
  const auto later = [](const Head& a, const Head& b) { return a.first > b.first; };
  for (auto& [sender, run] : runs) {
    if (open_page(&run)) heads.emplace_back(run.page_keys[0], &run);
  }
  std::make_heap(heads.begin(), heads.end(), later);
  // Reserved, not filled: the merged rows take memory as the pages give it back.
  keys->clear();
  values->clear();
  keys->reserve(total);
  values->reserve(total * static_cast<size_t>(width));
  while (!heads.empty()) {
    std::pop_heap(heads.begin(), heads.end(), later);
    auto& [key, run] = heads.back();
    keys->push_back(key);
    const float* row = run->page_values.data() + run->row * width;
    values->insert(values->end(), row, row + width);
    const bool more = ++run->row < run->page_keys.size() || open_page(run);
    if (!more) {
      heads.pop_back();
      continue;
    }
    const Key next = run->page_keys[run->row];
    if (next <= key) {
      throw MakeError("malformed dump response: a server's rows are not in key order (key ", next,
                      " after ", key, ")");
    }
    key = next;
    std::push_heap(heads.begin(), heads.end(), later);
  }
}

}  // namespace

void RequestRetry::Check() const {
  if (!(timeout_s > 0)) throw MakeError("request timeout ", timeout_s, " s is not positive");
  if (!(min_timeout_s > 0)) {
    throw MakeError("smallest request timeout ", min_timeout_s, " s is not positive");
  }
  if (!(max_timeout_s >= timeout_s)) {
    throw MakeError("largest request timeout ", max_timeout_s, " s is below the first, ", timeout_s,
                    " s");
  }
  if (!(min_timeout_s <= timeout_s)) {
    throw MakeError("smallest request timeout ", min_timeout_s, " s is above the first, ",
                    timeout_s, " s");
  }
  if (max_attempts < 1) throw MakeError("request attempts ", max_attempts, " is below 1");
}

double RequestRetry::TimeoutAfter(int attempt) const {
  double timeout = timeout_s;
  for (int i = 1; i < attempt && timeout < max_timeout_s; ++i) timeout *= 2;
  return std::min(timeout, max_timeout_s);
}

double RequestRetry::GiveUpAfter() const {
  double total = 0;
  for (int attempt = 1; attempt <= max_attempts; ++attempt) total += TimeoutAfter(attempt);
  return total;
}

KVWorker::KVWorker(Node* node, RequestRetry retry)
    : node_(node), retry_(retry), key_lists_(std::make_unique<SentKeyLists>()) {
  retry_.Check();
  node_->SetDataHandler([this](Message&& message) { OnResponse(std::move(message)); });
  node_->SetViewHandler([this](const proto::ClusterView& view) { OnView(view); });
  resend_thread_ = std::thread([this] { ResendLoop(); });
}

void KVWorker::SetKeyCache(const KeyCacheOptions& options) {
  options.Check();
  key_lists_ = std::make_unique<SentKeyLists>(options);
}

void KVWorker::SetWirePrecision(proto::WirePrecision precision, const std::set<uint32_t>& tables) {
  BytesPerValue(precision);  // throws for an unknown one
  precision_ = precision;
  narrow_tables_ = tables;
}

namespace {
uint64_t MessageBytes(const Message& message) {
  uint64_t bytes = message.meta.ByteSizeLong();
  for (const Bytes& frame : message.frames) bytes += frame.size();
  return bytes;
}
}  // namespace

void KVWorker::SendCounted(int server_id, Message& message) {
  SendPart(server_id, message);
  wire_bytes_sent_.fetch_add(MessageBytes(message));
}

KVWorker::~KVWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  resend_wake_.notify_all();
  resend_thread_.join();
  if (resends_.load() > 0 || late_responses_.load() > 0) {
    LOG(INFO) << "resent " << resends_.load() << " request part(s) that had no answer ("
              << needless_resends_.load() << " of them answered on their first send after all); "
              << "ignored " << late_responses_.load() << " late response(s)";
  }
  if (wide_fp16_parts_.load() > 0) {
    LOG(INFO) << wide_fp16_parts_.load() << " push part(s) or pull answer(s) asked for as fp16 "
              << "travelled as fp32: a value past fp16's range";
  }
  node_->Stop();
}

void KVWorker::AddPartLocked(Handle handle, int server_id, int server_rank, const Message& message,
                             size_t value_offset, size_t value_count, int range,
                             const SharedArray<const Key>& keys) {
  Part part;
  part.range = range;
  part.handle = handle;
  part.value_offset = value_offset;
  part.value_count = value_count;
  part.clock = message.meta.clock();
  part.command = message.meta.command();
  part.server_id = server_id;
  part.first_server_id = server_id;
  part.server_rank = server_rank;
  part.message = message;
  part.keys = keys;
  part.first_sent = MonotonicSeconds();
  part.heard_at = part.first_sent;
  part.deadline = part.first_sent + WaitLocked(part);
  if (part.deadline < resend_wake_at_) {
    // Due before the resend thread would look again.
    resend_now_ = true;
    resend_wake_.notify_all();
  }
  latest_sequence_ = std::max(latest_sequence_, message.meta.sequence());
  parts_[message.meta.sequence()] = std::move(part);
  ++requests_[handle].unanswered;
}

RttEstimator& KVWorker::EstimatorLocked(int server_id) {
  auto found = round_trips_.find(server_id);
  if (found == round_trips_.end()) {
    found = round_trips_
                .emplace(server_id,
                         RttEstimator(retry_.timeout_s, retry_.min_timeout_s, retry_.max_timeout_s))
                .first;
  }
  return found->second;
}

double KVWorker::WaitLocked(const Part& part) {
  if (part.command == proto::DUMP || part.server_id < 0) return retry_.TimeoutAfter(part.attempts);
  return EstimatorLocked(part.server_id).Timeout(part.attempts);
}

void KVWorker::OnHeldLocked(Part& part, double now) {
  if (!part.held && part.attempts == 1) {
    // The acknowledgement left as the pull arrived: a round trip like any.
    EstimatorLocked(part.server_id).OnAnswer(now - part.first_sent, part.attempts);
  }
  part.held = true;
  part.heard_at = now;
  part.sends_since_heard = 0;
  part.deadline = now + WaitLocked(part);  // the next poll
}

void KVWorker::SampleLocked(const Part& part, const Message& response, double now) {
  // A held pull's answer includes its time at the gate (waited_us > 0 even
  // when its acknowledgement was lost).
  if (part.command == proto::DUMP || part.held || response.meta.waited_us() > 0) return;
  if (part.server_id < 0) return;
  if (part.attempts == 1) {
    EstimatorLocked(part.server_id).OnAnswer(now - part.first_sent, 1);
    return;
  }
  // Sent more than once: Karn's rule takes no sample, unless the answer
  // says it is the first copy's (Meta.send) and a copy went again for want
  // of an answer, to the same server: that resend was needless, and this a
  // round trip like any. Without it the estimate never learns the slow
  // round trips that set off needless resends.
  if (response.meta.send() == 1 && part.resent_for_want_of_answer &&
      part.server_id == part.first_server_id && response.meta.sender() == part.server_id) {
    needless_resends_.fetch_add(1);
    EstimatorLocked(part.server_id).OnAnswer(now - part.first_sent, 1);
  }
}

void KVWorker::RestartLaterTimersLocked(uint64_t sequence, const Part& answered, int answered_by,
                                        double now) {
  // Only the answer to the oldest part still outstanding at that server, from
  // the server itself, on its first send, tells that what came after it was
  // queued behind it (a chained push is answered by the chain's last
  // replica, a held pull after later requests; a part before it still
  // unanswered may be lost, and answers after it must not put its resend
  // off).
  if (answered.server_id < 0 || answered_by != answered.server_id || answered.attempts != 1 ||
      answered.held || answered.command == proto::DUMP) {
    return;
  }
  for (const auto& [other, part] : parts_) {
    if (other < sequence && part.server_id == answered.server_id) return;
  }
  // Sequences are taken in the order the parts are made: a larger one was
  // made, and (but for two threads sending at once) sent, later.
  for (auto& [later, part] : parts_) {
    if (later <= sequence || part.server_id != answered.server_id || part.attempts != 1 ||
        part.held || part.moved || part.command == proto::DUMP || part.deadline <= now) {
      continue;  // a part already due (a view change made it so) goes as due
    }
    part.deadline = std::max(part.deadline, now + WaitLocked(part));
  }
}

void KVWorker::FailLocked(Handle handle, const std::string& error) {
  for (auto it = parts_.begin(); it != parts_.end();) {
    it = it->second.handle == handle ? parts_.erase(it) : std::next(it);
  }
  auto found = requests_.find(handle);
  if (found == requests_.end()) return;
  Request& request = found->second;
  if (request.error.empty()) request.error = error;
  request.unanswered = 0;
  if (request.detached) {
    LOG(ERROR) << error;
    if (background_error_.empty()) background_error_ = error;
    requests_.erase(found);
  }
  answered_.notify_all();
}

void KVWorker::PartDoneLocked(Handle handle, Request& request) {
  if (--request.unanswered > 0) return;
  if (request.detached) {
    if (!request.error.empty()) {
      LOG(ERROR) << request.error;
      if (background_error_.empty()) background_error_ = request.error;
    }
    requests_.erase(handle);
    return;
  }
  answered_.notify_all();
}

void KVWorker::ThrowBackgroundErrorLocked() {
  if (!background_error_.empty()) {
    throw MakeError("a clock announcement failed earlier: ", background_error_);
  }
}

void KVWorker::ResendLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  // It sleeps until the earliest deadline, or this long at most; a new part
  // wakes it only when due before that (AddPartLocked), not per request.
  const double tick = retry_.timeout_s / 4;
  while (!stopping_) {
    resend_wake_at_ = 0;  // awake: parts added meanwhile are seen by the next scan
    const double now = MonotonicSeconds();
    double next = now + tick;
    std::vector<std::pair<int, Message>> resend;
    std::vector<std::pair<Handle, std::string>> failed;
    CollectDuePartsLocked(now, &next, &resend, &failed);
    for (const auto& [handle, error] : failed) FailLocked(handle, error);
    if (!resend.empty()) {
      resends_.fetch_add(resend.size());
      lock.unlock();
      SendAgain(resend);
      lock.lock();
      continue;
    }
    resend_wake_at_ = next;
    resend_wake_.wait_for(lock, std::chrono::duration<double>(next - now),
                          [this] { return stopping_ || resend_now_; });
    resend_now_ = false;
  }
}

void KVWorker::CollectDuePartsLocked(double now, double* next,
                                     std::vector<std::pair<int, Message>>* resend,
                                     std::vector<std::pair<Handle, std::string>>* failed) {
  for (auto& [sequence, part] : parts_) {
    if (part.deadline > now) {
      *next = std::min(*next, part.deadline);
      continue;
    }
    const std::string what = DescribePart(sequence, part);
    if (std::string error = GiveUpReasonLocked(sequence, part, now, what); !error.empty()) {
      failed->emplace_back(part.handle, std::move(error));
      continue;
    }
    if (!part.held && !part.moved && part.command != proto::DUMP &&
        round_trips_.count(part.server_id)) {
      round_trips_.at(part.server_id).OnTimeout(part.attempts);
    }
    // Not answered in time (rather than moved, or sent again by a new view).
    const bool unanswered = !part.held && !part.moved && !part.view_resend;
    part.moved = false;
    part.view_resend = false;
    ++part.attempts;
    ++part.sends_since_heard;
    part.message.meta.set_send(static_cast<uint32_t>(part.attempts));
    if (!Retarget(part)) {
      // No server yet: try again at the next deadline.
      part.deadline = now + retry_.TimeoutAfter(part.attempts);
      *next = std::min(*next, part.deadline);
      continue;
    }
    part.deadline = now + WaitLocked(part);
    *next = std::min(*next, part.deadline);
    if (unanswered) part.resent_for_want_of_answer = true;
    // The server it goes to now may not hold the list it named.
    WithKeys(&part);
    VLOG(1) << "resending " << what << ", attempt " << part.attempts;
    resend->emplace_back(part.server_id, part.message);
  }
}

std::string KVWorker::DescribePart(uint64_t sequence, const Part& part) {
  return proto::Command_Name(part.command) + " seq " + std::to_string(sequence) + " (request " +
         std::to_string(part.handle) + ", " + std::to_string(part.message.meta.key_count()) +
         " keys, table " + std::to_string(part.message.meta.table()) + ") to server " +
         std::to_string(part.server_rank) + " (node " + std::to_string(part.server_id) + ")";
}

std::string KVWorker::GiveUpReasonLocked(uint64_t sequence, const Part& part, double now,
                                         const std::string& what) const {
  if (part.sends_since_heard >= retry_.max_attempts &&
      now - part.heard_at >= retry_.GiveUpAfter()) {
    return "no answer to " + what + " after " + std::to_string(part.attempts) +
           " attempt(s) over " + std::to_string(now - part.first_sent) + " s";
  }
  if (latest_sequence_ - sequence >= kResendSequenceHorizon) {
    return "no answer to " + what + " while " + std::to_string(latest_sequence_ - sequence) +
           " later requests went out; a resend now could be applied twice";
  }
  return "";
}

bool KVWorker::Retarget(Part& part) {
  // To the server that holds the range now (a promoted backup, or a
  // replacement with a new node id).
  try {
    auto ranges = node_->ranges();
    if (part.range >= 0 && ranges && static_cast<size_t>(part.range) < ranges->num_ranges()) {
      part.server_rank = ranges->server(part.range);
    }
    part.server_id = node_->ServerId(part.server_rank);
  } catch (const Error&) {
    return false;
  }
  return true;
}

std::shared_ptr<const proto::ClusterView> KVWorker::ViewLocked(
    std::unique_lock<std::mutex>* lock) const {
  // The node holds a view before its handler (OnView) sees it, so reading
  // again ends this.
  for (;;) {
    lock->unlock();
    std::shared_ptr<const proto::ClusterView> view = CurrentView();
    lock->lock();
    if (!view || view->epoch() >= view_epoch_) return view;
  }
}

void KVWorker::SendAgain(std::vector<std::pair<int, Message>>& resend) {
  for (auto& [server, message] : resend) {
    try {
      SendCounted(server, message);
    } catch (const std::exception& e) {
      LOG(WARNING) << "could not resend to node " << server << ": " << e.what();
    }
  }
}

void KVWorker::OnView(const proto::ClusterView& view) {
  std::set<int> servers;
  std::map<int, int> server_ids;  // by rank
  for (const auto& node : view.nodes()) {
    if (node.role() != proto::SERVER) continue;
    servers.insert(node.id());
    server_ids[node.rank()] = node.id();
  }
  auto ranges = node_->ranges();
  // The servers dropped the lists they kept (KeyListCache).
  key_lists_->Clear();
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = MonotonicSeconds();
  // A server left: a push it was to pass down, or to acknowledge as the last
  // replica, is lost with it even where the range keeps its primary. Every
  // outstanding push goes again now (the servers apply each once).
  const bool server_left =
      std::any_of(servers_.begin(), servers_.end(), [&](int id) { return !servers.count(id); });
  servers_ = servers;
  view_epoch_ = std::max(view_epoch_, view.epoch());
  for (auto it = round_trips_.begin(); it != round_trips_.end();) {
    it = servers.count(it->first) ? std::next(it) : round_trips_.erase(it);
  }
  for (auto it = parts_.begin(); it != parts_.end();) {
    Part& part = it->second;
    if (part.command == proto::DUMP && !servers.count(part.server_id)) {
      // Its rows are served by the range's new primary now: the dump starts
      // again on this view (Dump).
      const Handle handle = part.handle;
      const int server = part.server_id;
      it = parts_.erase(it);  // `part` is gone from here on
      auto request = requests_.find(handle);
      if (request != requests_.end()) {
        request->second.server_left = true;
        if (request->second.error.empty()) {
          request->second.error =
              "server node " + std::to_string(server) + " left the cluster view during the dump";
        }
        PartDoneLocked(handle, request->second);
      }
      continue;
    }
    if (part.command == proto::CLOCK && !servers.count(part.server_id)) {
      // The server left: its replacement, if any, counts this worker from
      // its next push or announcement.
      const Handle handle = part.handle;
      it = parts_.erase(it);
      auto request = requests_.find(handle);
      if (request != requests_.end()) PartDoneLocked(handle, request->second);
      continue;
    }
    if (part.range >= 0 && ranges && static_cast<size_t>(part.range) < ranges->num_ranges()) {
      auto primary = server_ids.find(ranges->server(part.range));
      if (primary != server_ids.end() &&
          (primary->second != part.server_id || (server_left && part.command == proto::PUSH))) {
        part.deadline = now;  // resent at once, to the range's primary now
        part.view_resend = true;
        resend_now_ = true;
      }
    }
    ++it;
  }
  if (resend_now_) resend_wake_.notify_all();
}

void KVWorker::Cancel(Handle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  CancelLocked(handle);
}

void KVWorker::CancelLocked(Handle handle) {
  for (auto it = parts_.begin(); it != parts_.end();) {
    it = it->second.handle == handle ? parts_.erase(it) : std::next(it);
  }
  requests_.erase(handle);
}

KVWorker::Handle KVWorker::Push(const SharedArray<const Key>& keys,
                                const SharedArray<const float>& values, int width, uint32_t table,
                                std::optional<int64_t> read_clock) {
  CheckWidth(width);
  if (values.size() != keys.size() * static_cast<size_t>(width)) {
    throw MakeError("push of ", keys.size(), " keys x width ", width, " needs ",
                    keys.size() * width, " values, got ", values.size());
  }
  CheckKeys(keys);
  return Send(proto::PUSH, keys, values, nullptr, width, table, read_clock);
}

KVWorker::Handle KVWorker::Pull(const SharedArray<const Key>& keys, SharedArray<float>* values,
                                int width, uint32_t table, bool sent_again) {
  CheckWidth(width);
  CheckKeys(keys);
  return Send(proto::PULL, keys, SharedArray<const float>(), values, width, table, std::nullopt,
              sent_again);
}

KVWorker::Handle KVWorker::Send(proto::Command command, const SharedArray<const Key>& keys,
                                const SharedArray<const float>& values, SharedArray<float>* out,
                                int width, uint32_t table, std::optional<int64_t> read_clock,
                                bool sent_again) {
  auto ranges = node_->ranges();
  if (!ranges) throw MakeError("the worker has no cluster view yet (call Node::Start first)");
  const std::vector<size_t> bounds = ranges->Split(keys.data(), keys.size());
  for (size_t r = 0; r < ranges->num_ranges(); ++r) {
    // A server refuses more: fail here, before anything is sent.
    const uint64_t values = uint64_t{bounds[r + 1] - bounds[r]} * static_cast<uint64_t>(width);
    if (values > kMaxRequestValues) {
      throw MakeError(proto::Command_Name(command), " of table ", table, ": ",
                      bounds[r + 1] - bounds[r], " keys x width ", width, " in key range ", r,
                      " is more than the ", kMaxRequestValues,
                      " values one request may carry; use smaller batches");
    }
  }
  // Key caching: each part's list is looked up (and compared) before the
  // lock is taken, which the receive thread needs.
  std::vector<int> server_ids(ranges->num_ranges(), -1);
  std::vector<SentKeyLists::Choice> choices(ranges->num_ranges());
  for (size_t r = 0; r < ranges->num_ranges(); ++r) {
    if (bounds[r] == bounds[r + 1]) continue;
    server_ids[r] = ServerIdOrNone(ranges->server(r));
    if (server_ids[r] >= 0) {
      choices[r] =
          key_lists_->Choose(server_ids[r], keys.Slice(bounds[r], bounds[r + 1]), sent_again);
    }
  }
  std::vector<Outgoing> outgoing;
  Handle handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ThrowBackgroundErrorLocked();
    handle = ++next_handle_;
    try {
      Request& request = requests_[handle];
      request.out = out;
      for (size_t r = 0; r < ranges->num_ranges(); ++r) {
        const size_t begin = bounds[r], end = bounds[r + 1];
        if (begin == end) continue;
        const int server_rank = ranges->server(r);
        Outgoing part{server_ids[r], PartMessage(command, keys, values, begin, end, width, table,
                                                 read_clock, choices[r])};
        if (choices[r].mode == SentKeyLists::Mode::kNamed) named_requests_.fetch_add(1);
        AddPartLocked(handle, part.server_id, server_rank, part.message, begin * width,
                      (end - begin) * width, static_cast<int>(r), keys.Slice(begin, end));
        outgoing.push_back(std::move(part));
      }
      request.parts = request.unanswered;
      PrepareResultLocked(request, keys.size() * static_cast<size_t>(width));
    } catch (...) {
      CancelLocked(handle);  // nothing was sent: the request never was
      throw;
    }
  }
  // Sent outside the lock: a response may arrive before the last part leaves.
  SendParts(handle, outgoing);
  return handle;
}

int KVWorker::ServerIdOrNone(int server_rank) const {
  // No server holds this range right now (it left, a replacement is on its
  // way): the part goes out with the resends once one does.
  try {
    return node_->ServerId(server_rank);
  } catch (const Error&) {
    return -1;
  }
}

Message KVWorker::PartMessage(proto::Command command, const SharedArray<const Key>& keys,
                              const SharedArray<const float>& values, size_t begin, size_t end,
                              int width, uint32_t table, std::optional<int64_t> read_clock,
                              SentKeyLists::Choice key_list) {
  Message message;
  proto::Meta& meta = message.meta;
  meta.set_command(command);
  meta.set_sequence(node_->NextSequence());
  meta.set_send(1);
  meta.set_clock(clock_.load());
  meta.set_key_count(end - begin);
  meta.set_value_width(width);
  meta.set_table(table);
  if (read_clock) meta.set_read_clock(*read_clock);
  if (key_list.mode != SentKeyLists::Mode::kKeys) meta.set_key_list(key_list.id);
  if (key_list.mode != SentKeyLists::Mode::kNamed) {
    message.frames.push_back(AsBytes(keys.Slice(begin, end)));
  }
  const proto::WirePrecision precision =
      narrow_tables_.count(table) ? precision_ : proto::WIRE_FP32;
  if (command == proto::PUSH) {
    // A push holding a value past fp16's range goes as fp32 (never clipped).
    OutgoingFrame frame = NarrowToSend(values.Slice(begin * width, end * width), precision);
    if (frame.precision != precision) wide_fp16_parts_.fetch_add(1);
    meta.set_precision(frame.precision);
    message.frames.push_back(std::move(frame.bytes));
  } else {
    meta.set_precision(precision);  // the answer's, asked for
  }
  return message;
}

void KVWorker::WithKeys(Part* part) {
  Message& message = part->message;
  if (message.meta.key_list() == 0) return;
  const bool named = message.frames.size() == (part->command == proto::PUSH ? 1u : 0u);
  message.meta.clear_key_list();
  if (named) message.frames.insert(message.frames.begin(), AsBytes(part->keys));
}

void KVWorker::PrepareResultLocked(Request& request, size_t count) {
  // Several parts are gathered into one array; a single part's message is
  // handed over as it is.
  SharedArray<float>* out = request.out;
  if (out && request.parts > 1 && out->size() != count) {
    *out = SharedArray<float>::Allocate(count);
  }
  if (out && request.parts == 0) *out = SharedArray<float>();
}

void KVWorker::SendParts(Handle handle, std::vector<Outgoing>& outgoing) {
  // A part that cannot go out now (Error: its server just left the view, or
  // is not connected) is resent. Anything else (the socket failed, memory ran
  // out) ends the request here: forgotten, and the caller told.
  for (Outgoing& part : outgoing) {
    if (part.server_id < 0) continue;
    try {
      SendCounted(part.server_id, part.message);
    } catch (const Error& e) {
      LOG(WARNING) << "request " << handle << " to node " << part.server_id
                   << " waits to be resent: " << e.what();
    } catch (const std::exception& e) {
      Cancel(handle);
      const proto::Meta& meta = part.message.meta;
      throw MakeError("request ", handle, ": its ", proto::Command_Name(meta.command()),
                      " to node ", part.server_id, " (", meta.key_count(), " keys, table ",
                      meta.table(), ") could not be sent: ", e.what());
    }
  }
}

void KVWorker::OnResponse(Message&& message) {
  const proto::Meta& meta = message.meta;
  if (!meta.response()) {
    LOG(WARNING) << "worker ignored " << Describe(meta) << ": workers serve no requests";
    return;
  }
  wire_bytes_received_.fetch_add(MessageBytes(message));
  std::lock_guard<std::mutex> lock(mutex_);
  auto part = parts_.find(meta.sequence());
  if (part == parts_.end()) {
    // Answered already (a resent request is answered twice) or cancelled.
    late_responses_.fetch_add(1);
    VLOG(1) << "ignored " << Describe(meta) << ": no such request outstanding";
    return;
  }
  const double now = MonotonicSeconds();
  if (meta.held() && meta.command() == proto::PULL && part->second.command == proto::PULL) {
    OnHeldLocked(part->second, now);
    return;
  }
  if (meta.moved() && meta.command() == part->second.command &&
      (meta.command() == proto::PUSH || meta.command() == proto::PULL)) {
    // The range moved off that server: sent again at once if this worker's
    // view is as new as the server's (to the range's primary in it), else
    // when the newer view arrives (OnView).
    VLOG(1) << DescribePart(meta.sequence(), part->second) << ": the range moved";
    part->second.moved = true;  // its resend is no sign of a slow server
    if (node_->epoch() >= meta.epoch()) {
      part->second.deadline = now;
      resend_now_ = true;
      resend_wake_.notify_all();
    }
    return;
  }
  if (meta.unknown_key_list() && meta.command() == part->second.command &&
      part->second.message.meta.key_list() == 0) {
    // The answer to an earlier send that named a list, come after the part
    // went again with its keys (a resend, or a view change): nothing was
    // applied, and the answer to the keys is on its way.
    late_responses_.fetch_add(1);
    VLOG(1) << DescribePart(meta.sequence(), part->second)
            << ": an earlier send's list was unknown; it went again with its keys";
    return;
  }
  if (meta.unknown_key_list() && meta.command() == part->second.command) {
    // The server holds no such list (a view change or a restart dropped it):
    // nothing was applied; the part goes again at once, with its keys.
    unknown_key_lists_.fetch_add(1);
    key_lists_->Forget(part->second.server_id, part->second.message.meta.key_list());
    WithKeys(&part->second);
    part->second.moved = true;  // its resend is no sign of a slow server
    part->second.deadline = now;
    resend_now_ = true;
    resend_wake_.notify_all();
    return;
  }
  if (meta.error().empty() && meta.command() == part->second.command &&
      part->second.message.meta.key_list() != 0) {
    // The answer to an offer, or to a request naming a kept list.
    if (meta.key_list_kept()) {
      key_lists_->Kept(part->second.server_id, part->second.message.meta.key_list());
    } else if (part->second.message.frames.size() >
               (part->second.command == proto::PUSH ? 1u : 0u)) {
      key_lists_->Forget(part->second.server_id, part->second.message.meta.key_list());
    }
  }
  SampleLocked(part->second, message, now);
  RestartLaterTimersLocked(part->first, part->second, meta.sender(), now);
  const Handle handle = part->second.handle;
  Request& request = requests_[handle];
  if (meta.command() != part->second.command) {
    request.error = "node " + std::to_string(meta.sender()) + " answered a " +
                    proto::Command_Name(part->second.command) + " with a " +
                    (proto::Command_IsValid(meta.command()) ? proto::Command_Name(meta.command())
                                                            : std::string("unknown command"));
  } else if (!meta.error().empty()) {
    request.error = "server node " + std::to_string(meta.sender()) + ": " + meta.error();
  } else if (meta.command() == proto::DUMP) {
    request.dumped.push_back(std::move(message));
  } else if (meta.command() == proto::PULL) {
    // The gate's figures for this pull: how far ahead of the slowest worker
    // it was when answered, and how long it was held.
    const int64_t staleness = meta.min_clock() == std::numeric_limits<int64_t>::max()
                                  ? 0
                                  : part->second.clock - meta.min_clock();
    ++gate_stats_.pulls;
    gate_stats_.staleness_sum += staleness;
    gate_stats_.max_staleness = std::max(gate_stats_.max_staleness, staleness);
    ++gate_stats_.histogram[GateStats::Bucket(staleness)];
    if (meta.waited_us() > 0) {
      ++gate_stats_.waited;
      gate_stats_.waited_us += meta.waited_us();
    }
    const size_t count = part->second.value_count;
    const bool known = proto::WirePrecision_IsValid(meta.precision());
    if (message.frames.size() != 1 || !known ||
        message.frames[0].size() != count * BytesPerValue(meta.precision())) {
      request.error =
          "malformed pull response from node " + std::to_string(meta.sender()) +
          (!known ? ": unknown wire precision"
           : message.frames.size() != 1
               ? ": " + std::to_string(message.frames.size()) + " frames, not 1"
               : ": " + std::to_string(message.frames[0].size()) + " bytes, " +
                     std::to_string(count) + " values of " + WirePrecisionName(meta.precision()) +
                     " need " + std::to_string(count * BytesPerValue(meta.precision())));
    } else {
      if (meta.precision() == proto::WIRE_FP32 &&
          part->second.message.meta.precision() == proto::WIRE_FP16) {
        wide_fp16_parts_.fetch_add(1);  // asked as fp16, answered as fp32 (PrecisionToSend)
      }
      if (request.parts == 1 && meta.precision() == proto::WIRE_FP32) {
        *request.out = message.frames[0].As<float>();
      } else {
        if (request.parts == 1 && request.out->size() != count) {
          *request.out = SharedArray<float>::Allocate(count);
        }
        WidenInto(message.frames[0].data(), count, meta.precision(),
                  request.out->data() + part->second.value_offset);
      }
    }
  }
  if (observer_ && request.error.empty()) ObserveLocked(part->second, message);
  if (part->second.command == proto::PUSH) {
    longest_push_s_ = std::max(longest_push_s_, now - part->second.first_sent);
  }
  parts_.erase(part);
  PartDoneLocked(handle, request);
}

void KVWorker::ObserveLocked(const Part& part, const Message& response) const {
  if (part.command != proto::PUSH && part.command != proto::PULL) return;
  RequestRecord record;
  record.command = part.command;
  record.server_rank = part.server_rank;
  record.table = part.message.meta.table();
  record.seconds = MonotonicSeconds() - part.first_sent;
  for (const Bytes& frame : part.message.frames) record.bytes += frame.size();
  for (const Bytes& frame : response.frames) record.bytes += frame.size();
  observer_(record);
}

int GateStats::Bucket(int64_t staleness) {
  static const int64_t kBounds[kBuckets - 1] = {0, 1, 2, 4, 8, 16, 64};
  for (int b = 0; b < kBuckets - 1; ++b) {
    if (staleness <= kBounds[b]) return b;
  }
  return kBuckets - 1;
}

const char* GateStats::BucketName(int bucket) {
  static const char* kNames[kBuckets] = {"0", "1", "2", "3_4", "5_8", "9_16", "17_64", "over_64"};
  return kNames[bucket];
}

GateStats KVWorker::gate_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return gate_stats_;
}

Bytes KVWorker::PushedSlotsLocked(int64_t clock) const {
  if (clock == kLeaveClock) return Bytes();
  std::set<std::pair<uint32_t, uint32_t>> slots;
  for (const auto& [sequence, part] : parts_) {
    if (part.command == proto::PUSH && part.range >= 0 && part.clock >= clock) {
      slots.emplace(static_cast<uint32_t>(part.range), part.message.meta.table());
    }
  }
  if (slots.empty()) return Bytes();
  auto values = SharedArray<uint32_t>::Allocate(2 * slots.size());
  size_t i = 0;
  for (const auto& [range, table] : slots) {
    values[i++] = range;
    values[i++] = table;
  }
  return AsBytes(values);
}

void KVWorker::AnnounceClock(int64_t clock, bool wait, double timeout_s) {
  std::vector<Outgoing> outgoing;
  Handle handle = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::shared_ptr<const proto::ClusterView> view = ViewLocked(&lock);
    if (!view) throw MakeError("the worker has no cluster view yet (call Node::Start first)");
    ThrowBackgroundErrorLocked();
    // Always acknowledged, so a lost announcement is resent; without `wait`
    // nobody waits for the acknowledgements.
    handle = ++next_handle_;
    try {
      const Bytes pushed = PushedSlotsLocked(clock);
      requests_[handle].detached = !wait;
      for (const auto& node : view->nodes()) {
        if (node.role() != proto::SERVER) continue;
        Message message;
        if (pushed.size() > 0) message.frames.push_back(pushed);
        message.meta.set_command(proto::CLOCK);
        message.meta.set_sequence(node_->NextSequence());
        message.meta.set_clock(clock);
        message.meta.set_ack(true);
        AddPartLocked(handle, node.id(), node.rank(), message, 0, 0);
        outgoing.push_back(Outgoing{node.id(), std::move(message)});
      }
    } catch (...) {
      CancelLocked(handle);
      throw;
    }
    if (!wait && requests_[handle].unanswered == 0) requests_.erase(handle);
  }
  SendParts(handle, outgoing);
  if (wait) Wait(handle, timeout_s);
}

void KVWorker::Dump(uint32_t table, int width, std::vector<Key>* keys, std::vector<float>* values,
                    double timeout_s) {
  CheckWidth(width);
  RestartingOnViewChange([&] { DumpOnce(table, width, keys, values, timeout_s); });
}

void KVWorker::DumpOnce(uint32_t table, int width, std::vector<Key>* keys,
                        std::vector<float>* values, double timeout_s) {
  // Page by page: each round asks every server with rows left for its next
  // page, from the key after its last page's last.
  std::vector<Message> dumped;
  std::optional<std::map<int, Key>>
      pages;  // server node id -> next page's first key; none: all from 0
  do {
    const Handle handle =
        SendDumpRequests(table, width, /*summarize=*/false, pages ? &*pages : nullptr);
    std::map<int, Key> next;
    for (Message& answer : AwaitDump(handle, table, timeout_s)) {
      if (answer.meta.dump_more()) {
        Key from = 0;
        if (pages) {
          const auto asked = pages->find(answer.meta.sender());
          if (asked == pages->end())
            throw MakeError("dump of table ", table, ": an answer from node ", answer.meta.sender(),
                            ", which was not asked");
          from = asked->second;
        }
        const auto page_keys =
            answer.frames.empty() ? SharedArray<const Key>() : answer.frames[0].As<const Key>();
        // Each page must end past where it began, or the dump would not end.
        if (page_keys.size() == 0 || page_keys[page_keys.size() - 1] < from ||
            page_keys[page_keys.size() - 1] == ~Key{0}) {
          throw MakeError("dump of table ", table, ": server node ", answer.meta.sender(),
                          " announced more rows after a page that does not advance");
        }
        next[answer.meta.sender()] = page_keys[page_keys.size() - 1] + 1;
      }
      dumped.push_back(std::move(answer));
    }
    pages = std::move(next);
  } while (!pages->empty());
  MergeDumped(std::move(dumped), width, keys, values);
}

proto::TableSummary KVWorker::Summarize(uint32_t table, int width, double timeout_s) {
  CheckWidth(width);
  std::optional<proto::TableSummary> sum;
  RestartingOnViewChange([&] {
    const Handle handle = SendDumpRequests(table, width, /*summarize=*/true);
    sum.emplace();
    for (const Message& answer : AwaitDump(handle, table, timeout_s)) {
      sum->set_rows(sum->rows() + answer.meta.summary().rows());
      sum->set_weight_square_sum(sum->weight_square_sum() +
                                 answer.meta.summary().weight_square_sum());
    }
  });
  return *sum;
}

void KVWorker::RestartingOnViewChange(const std::function<void()>& attempt) {
  // A server that leaves the view mid-way: its ranges' rows are on their
  // new primaries, so the whole read starts again on the view that followed.
  constexpr int kMaxRestarts = 10;
  for (int restart = 0;; ++restart) {
    try {
      attempt();
      return;
    } catch (const DumpInterrupted& e) {
      if (restart == kMaxRestarts) throw MakeError(e.what(), " (", kMaxRestarts, " restarts)");
      LOG(WARNING) << e.what() << ": starting again on the new view";
      // Its departure may reach this worker's view a moment after.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

KVWorker::Handle KVWorker::SendDumpRequests(uint32_t table, int width, bool summarize,
                                            const std::map<int, Key>* from) {
  std::vector<Outgoing> outgoing;
  Handle handle;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::shared_ptr<const proto::ClusterView> view = ViewLocked(&lock);
    if (!view) throw MakeError("the worker has no cluster view yet (call Node::Start first)");
    std::vector<std::pair<int, int>> servers;  // node id, rank
    for (const auto& node : view->nodes()) {
      if (node.role() != proto::SERVER) continue;
      if (from && from->count(node.id()) == 0) continue;
      servers.emplace_back(node.id(), node.rank());
    }
    if (from && servers.size() != from->size()) {
      throw DumpInterrupted("dump of table " + std::to_string(table) +
                            ": a server left the cluster view during the dump");
    }
    handle = ++next_handle_;
    try {
      Request& request = requests_[handle];
      for (const auto& [server, rank] : servers) {
        Message message;
        message.meta.set_command(proto::DUMP);
        message.meta.set_sequence(node_->NextSequence());
        message.meta.set_value_width(width);
        message.meta.set_table(table);
        message.meta.set_summarize(summarize);
        if (from) message.meta.set_dump_from(from->at(server));
        AddPartLocked(handle, server, rank, message, 0, 0);
        outgoing.push_back(Outgoing{server, std::move(message)});
      }
      request.parts = request.unanswered;
    } catch (...) {
      CancelLocked(handle);
      throw;
    }
  }
  SendParts(handle, outgoing);
  return handle;
}

void KVWorker::AwaitAnswersLocked(std::unique_lock<std::mutex>* lock, Handle handle,
                                  const Request& request, double timeout_s,
                                  const std::string& what) {
  // A node dropped from the view gets no answers (servers ignore what a node
  // outside their view sends): it stops waiting.
  const double deadline = MonotonicSeconds() + timeout_s;
  while (!answered_.wait_for(
      *lock,
      std::chrono::duration<double>(std::min(0.5, std::max(0.0, deadline - MonotonicSeconds()))),
      [&] { return request.unanswered == 0; })) {
    if (node_->removed()) {
      CancelLocked(handle);
      throw MakeError(what, ": this node left the cluster");
    }
    if (MonotonicSeconds() >= deadline) {
      throw MakeError(what, ": ", request.unanswered, " server(s) did not answer within ",
                      timeout_s, " s");
    }
  }
}

std::vector<Message> KVWorker::AwaitDump(Handle handle, uint32_t table, double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  Request& request = requests_[handle];
  AwaitAnswersLocked(&lock, handle, request, timeout_s, "dump of table " + std::to_string(table));
  const std::string error = std::move(request.error);
  const bool server_left = request.server_left;
  std::vector<Message> dumped = std::move(request.dumped);
  requests_.erase(handle);
  if (server_left) throw DumpInterrupted("dump of table " + std::to_string(table) + ": " + error);
  if (!error.empty()) throw MakeError("dump of table ", table, " failed: ", error);
  return dumped;
}

void KVWorker::Wait(Handle handle, double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = requests_.find(handle);
  if (it == requests_.end()) {
    ThrowBackgroundErrorLocked();
    throw MakeError("request ", handle, " is not outstanding");
  }
  // References to map elements survive rehashing; iterators do not.
  Request& request = it->second;
  // Small requests come back within tens of microseconds: yield the core for
  // a moment before sleeping, which saves the wake-up on the way back.
  const double spin_until = MonotonicSeconds() + kSpinSeconds;
  while (request.unanswered != 0 && MonotonicSeconds() < spin_until) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  AwaitAnswersLocked(&lock, handle, request, timeout_s, "request " + std::to_string(handle));
  const std::string error = std::move(request.error);
  requests_.erase(handle);
  if (!error.empty()) throw MakeError("request ", handle, " failed: ", error);
}

double KVWorker::TakeLongestPush() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(longest_push_s_, 0.0);
}

uint64_t KVWorker::view_epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_epoch_;
}

size_t KVWorker::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_.size();
}

}  // namespace keel
