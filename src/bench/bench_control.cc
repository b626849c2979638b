// `keel bench control`: the scheduler (src/scheduler, its real code) with N
// simulated members, in this process or, over TCP beyond what one process's
// descriptors hold, in processes of their own (SimulatedMembers).
//
// Each member speaks the scheduler's protocol as Node does: it listens where
// it advertises (so the scheduler's registration probe and its connection
// reach it), sends REGISTER from its own routing id, asks again when told
// "try again", takes its id from the answer, holds the views it is sent and,
// once it has one, sends a HEARTBEAT every heartbeat interval, on the wall
// clock's boundaries (NextHeartbeatDelay), asking for an answer as Node does,
// after kHeartbeatAnswerAfter intervals of silence; where the view relays
// heartbeats a worker sends all but one in kRelayDirectEvery to its server,
// which passes them on.
// Members parse every message they get (a view whole, its ranges' begins
// filled in as Node does) but keep only its epoch; a member holds a view
// once it has parsed it (the time is read after the parse, not
// when its thread began the batch the message came in). Over "tcp"
// each member has a ROUTER bound on loopback and a DEALER to the scheduler,
// as a Node's Van; over "memory" both ends are MemoryNetwork endpoints (the
// scheduler's Van included), for more members than the descriptor limit
// allows over TCP. Two threads serve the members.
//
// The run: a registration storm (every member at once), until every member
// holds the first view; a steady window of heartbeats, over which the CPU
// time of the scheduler's own threads is read from /proc; a worker killed
// (its sockets closed, or it leaves the network: its connection closes),
// until every living member holds the view without it.
#include "bench/bench_control.h"

#include <dirent.h>
#include <google/protobuf/arena.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "kv/memory_network.h"
#include "kv/message.h"
#include "kv/node.h"
#include "kv/van.h"
#include "kv/view_delta.h"
#include "metrics/metrics_registry.h"
#include "metrics/role_metrics.h"
#include "metrics/status_page.h"
#include "scheduler/scheduler.h"

namespace keel {
namespace {

constexpr int kFleetThreads = 2;
// The longest a fleet thread waits before it looks again for a kill or the
// end of the run.
constexpr double kFleetPollS = 0.05;
// Descriptors a member costs over TCP, both ends in this process: at the
// scheduler its connection in, its send socket (connection and mailbox) and
// that socket's watch (two mailboxes); at the member a listener, a mailbox
// each for its two sockets and both connections' ends; a worker relaying its
// heartbeats a socket to its server (mailbox, connection) and the server's
// end. Rounded up.
constexpr int kTcpDescriptorsPerMember = 14;
// Of those, the scheduler's end (4.1 measured, rounded up) and the member's
// (the rest): with the members in processes of their own each process needs
// only its end's.
constexpr int kSchedulerDescriptorsPerMember = 5;
constexpr int kMemberDescriptorsPerMember =
    kTcpDescriptorsPerMember - kSchedulerDescriptorsPerMember;
constexpr int kSpareDescriptors = 512;
// A member refused ("try again") or unanswered asks again after this long.
constexpr double kRegisterRetryS = 0.25;
constexpr double kRegisterUnansweredS = 5;

// Raises the soft descriptor limit to the hard one; returns it.
int RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 30));
}

std::set<int> Tasks() {
  std::set<int> tasks;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') tasks.insert(std::atoi(entry->d_name));
    }
    closedir(dir);
  }
  return tasks;
}

// CPU seconds (user and system) thread `tid` of this process used so far.
double TaskCpuSeconds(int tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::atof(field.c_str());  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Whether thread `tid` of this process is one of ZeroMQ's (its I/O threads
// and reaper are named "ZMQbg/...").
bool IsZeroMQThread(int tid) {
  std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name.rfind("ZMQbg", 0) == 0;
}

double CpuSeconds(const std::set<int>& tasks) {
  double seconds = 0;
  for (int tid : tasks) seconds += TaskCpuSeconds(tid);
  return seconds;
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// A field of /proc/self/status in MB ("VmRSS", "VmHWM").
double StatusMegabytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atof(line.c_str() + field.size() + 1) / 1024;
  }
  return 0;
}

int OpenDescriptors() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
    closedir(dir);
  }
  return count;
}

size_t FrameBytes(const std::vector<zmq::message_t>& frames) {
  size_t bytes = 0;
  for (const auto& frame : frames) bytes += frame.size();
  return bytes;
}

// What the simulated members and the bench share: the bench's commands to
// the members, their counts, and each member's times. In memory shared with
// the member processes (MAP_SHARED, made before they fork) when the members
// run in processes of their own; atomics (lock-free, so they work across
// processes) where more than one thread writes or reads while it changes.
struct Board {
  static constexpr int kEpochs = 64;  // view bytes kept for epochs below this

  std::atomic<bool> stopping{false}, storm{false};
  std::atomic<int> kill{-1};  // the member to close, -1: none
  std::atomic<double> killed_at{-1};
  std::atomic<uint64_t> target_epoch{0};
  std::atomic<int> with_view{0}, on_target{0};
  // Heartbeats to the scheduler (beats) and, relaying, to a server.
  std::atomic<uint64_t> refusals{0}, acks{0}, beats{0}, relayed_beats{0};
  std::atomic<uint64_t> view_bytes[kEpochs] = {};  // by epoch
  // Member processes: the scheduler's address once it listens, and how many
  // processes have their members' sockets (or failed to make them).
  std::atomic<bool> address_set{false};
  char scheduler_address[128] = {};
  std::atomic<int> processes_ready{0}, processes_failed{0};
  // Then, for each of the `nodes` members: when it held its first view, when
  // it held the watched epoch (-1: not yet), its first view's parse, when it
  // last heard from the scheduler (a server's, read by its relaying workers),
  // its id.
};
static_assert(std::atomic<double>::is_always_lock_free &&
                  sizeof(std::atomic<double>) == sizeof(double) &&
                  std::atomic<int>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "the board's atomics are shared across processes");

// A Board and its per-member arrays in one anonymous shared mapping.
class SharedBoard {
 public:
  explicit SharedBoard(int nodes) : nodes_(nodes) {
    bytes_ = sizeof(Board) + static_cast<size_t>(nodes) * (4 * sizeof(double) + sizeof(int));
    void* memory = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw MakeError("cannot map ", bytes_, " bytes for the members");
    board_ = new (memory) Board();
    first_view_at_ = reinterpret_cast<double*>(board_ + 1);
    target_at_ = first_view_at_ + nodes;
    parse_s_ = target_at_ + nodes;
    heard_at_ = reinterpret_cast<std::atomic<double>*>(parse_s_ + nodes);
    for (int i = 0; i < nodes; ++i) new (heard_at_ + i) std::atomic<double>(-1.0);
    ids_ = reinterpret_cast<int*>(heard_at_ + nodes);
    std::fill(first_view_at_, first_view_at_ + 3 * static_cast<size_t>(nodes), -1.0);
    std::fill(ids_, ids_ + nodes, 0);
  }
  ~SharedBoard() {
    board_->~Board();
    munmap(board_, bytes_);
  }
  SharedBoard(const SharedBoard&) = delete;
  SharedBoard& operator=(const SharedBoard&) = delete;

  Board& board() const { return *board_; }
  int nodes() const { return nodes_; }
  double* first_view_at() const { return first_view_at_; }
  double* target_at() const { return target_at_; }
  double* parse_s() const { return parse_s_; }
  std::atomic<double>* heard_at() const { return heard_at_; }
  int* ids() const { return ids_; }

 private:
  const int nodes_;
  size_t bytes_ = 0;
  Board* board_ = nullptr;
  double *first_view_at_ = nullptr, *target_at_ = nullptr, *parse_s_ = nullptr;
  std::atomic<double>* heard_at_ = nullptr;
  int* ids_ = nullptr;
};

// Members [begin, end) of the simulated ones, served by kFleetThreads threads
// (member i by thread (i - begin) % kFleetThreads, which alone touches its
// state and sockets), reporting on a SharedBoard.
class Fleet {
 public:
  Fleet(const SharedBoard& shared, int begin, int end, int servers, double heartbeat_interval_s,
        std::shared_ptr<MemoryNetwork> network, const std::string& scheduler_address)
      : interval_s_(heartbeat_interval_s),
        network_(std::move(network)),
        scheduler_address_(scheduler_address),
        shared_(shared),
        board_(shared.board()),
        begin_(begin),
        members_(end - begin),
        shards_(kFleetThreads) {
    if (!network_) {
      const int sockets = 3 * (end - begin) + 64;
      context_ = std::make_unique<zmq::context_t>(1);
      if (zmq_ctx_set(context_->handle(), ZMQ_MAX_SOCKETS, sockets) != 0) {
        throw MakeError("cannot allow ", sockets, " ZeroMQ sockets");
      }
    }
    std::mt19937_64 random(7 + begin);
    for (int local = 0; local < end - begin; ++local) {
      Member& member = members_[local];
      const int index = begin + local;
      member.role = index < servers ? proto::SERVER : proto::WORKER;
      member.routing_id = RandomRoutingId();
      member.phase = std::uniform_real_distribution<double>(0, 1)(random);
      if (network_) {
        member.endpoint = std::make_unique<Endpoint>(&shards_[local % kFleetThreads], local);
        member.address = network_->Bind(member.endpoint.get(), member.routing_id);
        continue;
      }
      member.receiver = zmq::socket_t(*context_, zmq::socket_type::router);
      member.receiver.set(zmq::sockopt::linger, 0);
      member.receiver.set(zmq::sockopt::rcvhwm, 0);
      member.receiver.bind("tcp://127.0.0.1:*");
      const std::string bound = member.receiver.get(zmq::sockopt::last_endpoint);
      member.address = bound.substr(bound.find("//") + 2);
      member.sender = zmq::socket_t(*context_, zmq::socket_type::dealer);
      member.sender.set(zmq::sockopt::linger, 0);
      member.sender.set(zmq::sockopt::sndhwm, 0);
      member.sender.set(zmq::sockopt::routing_id, zmq::buffer(member.routing_id));
      member.sender.connect("tcp://" + scheduler_address_);
    }
    for (int t = 0; t < kFleetThreads; ++t) {
      threads_.emplace_back([this, t] { Run(t); });
    }
  }

  ~Fleet() { Stop(); }

  void Stop() {
    stopping_ = true;
    for (auto& shard : shards_) shard.arrived.notify_all();
    for (auto& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    for (Member& member : members_) Close(member);
    if (context_) context_->close();
  }

 private:
  struct Shard;
  class Endpoint : public MemoryNetwork::Endpoint {
   public:
    Endpoint(Shard* shard, int index) : shard_(shard), index_(index) {}
    void Receive(const std::string&, std::vector<zmq::message_t>&& frames) override {
      Push(std::move(frames));
    }
    void ReceiveReply(std::vector<zmq::message_t>&& frames) override { Push(std::move(frames)); }

   private:
    void Push(std::vector<zmq::message_t>&& frames) {
      {
        std::lock_guard<std::mutex> lock(shard_->mutex);
        shard_->inbox.emplace_back(index_, std::move(frames));
      }
      shard_->arrived.notify_one();
    }
    Shard* const shard_;
    const int index_;
  };
  struct Member {
    proto::Role role = proto::WORKER;
    std::string routing_id, address;
    double phase = 0;  // in [0, 1): spreads its registration retries
    int id = 0;
    uint64_t nonce = 0;
    bool registered = false;
    double register_at = 0;  // when its REGISTER is (again) due
    double next_beat = 0;
    double heard_at = 0;  // its latest message from the scheduler
    uint64_t epoch = 0;   // of the view it holds
    bool dead = false;
    int rank = -1;
    // A worker relaying its heartbeats (ClusterView.heartbeat_relay): its
    // server's address ("" while none), and its heartbeats so far.
    std::string relay_address;
    int relay_id = -1;     // its relay server's node id
    int relay_index = -1;  // and index among the members, once looked up
    uint64_t beats = 0;
    // A server: workers' heartbeats taken since its last (id -> when).
    std::map<int, double> relayed;
    zmq::socket_t receiver, sender, relay;  // tcp
    std::unique_ptr<Endpoint> endpoint;     // memory
  };
  struct Shard {
    std::mutex mutex;  // inbox
    std::condition_variable arrived;
    std::deque<std::pair<int, std::vector<zmq::message_t>>> inbox;  // memory
  };

  void Close(Member& member) {
    member.dead = true;
    if (member.endpoint) {
      network_->Unbind(member.address);
      return;
    }
    if (member.receiver) member.receiver.close();
    if (member.sender) member.sender.close();
    if (member.relay) member.relay.close();
  }

  // `message` from `member`, encoded (stamped as Node stamps it).
  static std::vector<zmq::message_t> Frames(const Member& member, Message& message) {
    message.meta.set_sender(member.id);
    message.meta.set_epoch(member.epoch);
    return Encode(message);
  }

  void Send(Member& member, Message& message) {
    std::vector<zmq::message_t> frames = Frames(member, message);
    if (network_) {
      network_->Send(member.routing_id, scheduler_address_, std::move(frames));
    } else {
      zmq::send_multipart(member.sender, frames);
    }
  }

  // To the member's relay server, as Node sends a heartbeat to it.
  void SendToRelay(Member& member, Message& message) {
    std::vector<zmq::message_t> frames = Frames(member, message);
    if (network_) {
      network_->Send(member.routing_id, member.relay_address, std::move(frames));
      return;
    }
    if (!member.relay) {
      member.relay = zmq::socket_t(*context_, zmq::socket_type::dealer);
      member.relay.set(zmq::sockopt::linger, 0);
      member.relay.set(zmq::sockopt::sndhwm, 0);
      member.relay.set(zmq::sockopt::routing_id, zmq::buffer(member.routing_id));
      member.relay.connect("tcp://" + member.relay_address);
    }
    zmq::send_multipart(member.relay, frames);
  }

  void SendRegister(Member& member, double now) {
    Message request = CommandMessage(proto::REGISTER);
    request.meta.mutable_node()->set_role(member.role);
    request.meta.mutable_node()->set_address(member.address);
    request.meta.mutable_node()->set_rank(-1);
    request.meta.mutable_node()->set_routing_id(member.routing_id);
    member.nonce = member.nonce * 6364136223846793005ull + 1442695040888963407ull;
    if (member.nonce == 0) member.nonce = 1;
    request.meta.set_sequence(member.nonce);
    Send(member, request);
    member.register_at = now + kRegisterUnansweredS;
  }

  void SendHeartbeat(Member& member, double now) {
    Message beat = CommandMessage(proto::HEARTBEAT);
    beat.meta.mutable_node()->set_role(member.role);
    beat.meta.mutable_node()->set_address(member.address);
    // A server passes on its workers' (as Node does), a worker relaying sends
    // all but one in kRelayDirectEvery to its server.
    for (const auto& [worker, at] : member.relayed) {
      proto::RelayedHeartbeat* relayed = beat.meta.add_relayed();
      relayed->set_node(worker);
      relayed->set_age_ms(static_cast<uint32_t>((now - at) * 1000));
    }
    member.relayed.clear();
    if (!member.relay_address.empty() &&
        (++member.beats + std::max(0, member.rank)) % kRelayDirectEvery != 0) {
      board_.relayed_beats.fetch_add(1);
      SendToRelay(member, beat);
      // The server's word from the scheduler is the worker's, as its answer
      // tells a Node (Meta.scheduler_contact_age_ms): read from the board
      // here, not sent, for the answers cost the members, not the scheduler.
      if (member.relay_index < 0) member.relay_index = IndexOf(member.relay_id);
      if (member.relay_index >= 0) {
        member.heard_at =
            std::max(member.heard_at,
                     shared_.heard_at()[member.relay_index].load(std::memory_order_relaxed));
      }
      return;
    }
    // Asking for an answer as Node does.
    const double answer_after =
        member.relay_address.empty() ? kHeartbeatAnswerAfter : kRelayingAnswerAfter;
    if (now - member.heard_at >= answer_after * interval_s_) beat.meta.set_ack(true);
    board_.beats.fetch_add(1);
    Send(member, beat);
  }

  // The index among all the members of the member with node id `id`; -1
  // if none has it (the board read again only while some member has no id).
  int IndexOf(int id) {
    std::lock_guard<std::mutex> lock(index_mutex_);
    auto found = index_of_id_.find(id);
    if (found == index_of_id_.end() && index_of_id_.size() < static_cast<size_t>(shared_.nodes())) {
      for (int i = 0; i < shared_.nodes(); ++i) index_of_id_[shared_.ids()[i]] = i;
      found = index_of_id_.find(id);
    }
    return found == index_of_id_.end() ? -1 : found->second;
  }

  // A worker's relay server in `view` (Node::RelayServerId), if the view
  // relays heartbeats.
  static void FindRelay(Member& member, const proto::ClusterView& view) {
    if (!view.heartbeat_relay()) return;
    const int relay_rank = HeartbeatRelayRank(member.rank, view.num_servers());
    for (const proto::NodeInfo& node : view.nodes()) {
      if (node.role() == proto::SERVER && node.rank() == relay_rank) {
        member.relay_address = node.address();
        member.relay_id = node.id();
      }
    }
  }

  void Handle(int index, std::vector<zmq::message_t>&& frames, double now) {
    Member& member = members_[index];
    const size_t bytes = FrameBytes(frames);
    const double start = MonotonicSeconds();
    // Parsed whole, on an arena: a view's 10^4 ranges are one block of this
    // thread's, not 10^4 allocations that the scheduler's threads would
    // wait behind on these shared cores (on a cluster each member parses
    // on its own machine).
    thread_local std::vector<char> first_block(4 << 20);
    google::protobuf::ArenaOptions arena_options;
    arena_options.initial_block = first_block.data();
    arena_options.initial_block_size = first_block.size();
    google::protobuf::Arena arena(arena_options);
    auto* parsed_meta = google::protobuf::Arena::CreateMessage<proto::Meta>(&arena);
    if (frames.empty() ||
        !parsed_meta->ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size()))) {
      return;
    }
    // A whole view made whole as Node makes it (its ranges' begins).
    if (parsed_meta->has_view()) FillEvenBegins(parsed_meta->mutable_view());
    const double parsed = MonotonicSeconds();
    const proto::Meta& meta = *parsed_meta;
    if (meta.command() == proto::HEARTBEAT && meta.sender() != kSchedulerId) {
      // A worker's, to pass on (the simulated server takes it on trust).
      if (member.role == proto::SERVER) member.relayed[meta.sender()] = now;
      return;
    }
    member.heard_at = now;
    shared_.heard_at()[begin_ + index].store(now, std::memory_order_relaxed);
    switch (meta.command()) {
      case proto::REGISTER:
        if (!meta.error().empty()) {
          board_.refusals.fetch_add(1);
          member.register_at = now + kRegisterRetryS * (1 + member.phase);
        } else if (meta.sequence() == member.nonce && !member.registered) {
          member.id = meta.node().id();
          member.rank = meta.node().rank();
          member.registered = true;
          shared_.ids()[begin_ + index] = member.id;
        }
        break;
      case proto::VIEW: {
        const bool delta = meta.has_view_delta();
        const uint64_t epoch = delta ? meta.view_delta().fields().epoch() : meta.view().epoch();
        if (epoch < Board::kEpochs) board_.view_bytes[epoch].fetch_add(bytes);
        if (epoch <= member.epoch) break;
        if (delta && meta.view_delta().base_epoch() != member.epoch) {
          // Not a change from the view it holds: it asks for the whole view,
          // as Node does.
          Message ask = CommandMessage(proto::VIEW);
          Send(member, ask);
          break;
        }
        if (member.epoch == 0) {
          if (!delta && member.role == proto::WORKER) FindRelay(member, meta.view());
          // On the wall clock's boundaries, as Node beats.
          member.next_beat = now + NextHeartbeatDelay(WallSeconds(), interval_s_);
          shared_.parse_s()[begin_ + index] = parsed - start;
          shared_.first_view_at()[begin_ + index] = parsed;
          board_.with_view.fetch_add(1, std::memory_order_release);
        }
        member.epoch = epoch;
        const uint64_t target = board_.target_epoch.load();
        double& target_at = shared_.target_at()[begin_ + index];
        if (target > 0 && epoch >= target && target_at < 0) {
          target_at = parsed;
          board_.on_target.fetch_add(1, std::memory_order_release);
        }
        break;
      }
      case proto::HEARTBEAT:
        board_.acks.fetch_add(1);
        break;
      default:
        break;
    }
  }

  // Sends what is due from thread `t`'s members; returns when the next is
  // due (infinity: nothing until a message comes).
  double SendDue(int t, double now) {
    double next = std::numeric_limits<double>::infinity();
    for (size_t i = t; i < members_.size(); i += kFleetThreads) {
      Member& member = members_[i];
      if (member.dead) continue;
      if (!member.registered) {
        if (now >= member.register_at) SendRegister(member, now);
        next = std::min(next, member.register_at);
      } else if (member.epoch > 0) {
        if (now >= member.next_beat) {
          SendHeartbeat(member, now);
          member.next_beat = std::max(member.next_beat + interval_s_, now);
        }
        next = std::min(next, member.next_beat);
      }
    }
    return next;
  }

  void ReceiveFromMemory(Shard& shard, double wait_s) {
    std::deque<std::pair<int, std::vector<zmq::message_t>>> arrived;
    {
      std::unique_lock<std::mutex> lock(shard.mutex);
      shard.arrived.wait_for(lock, std::chrono::duration<double>(wait_s),
                             [&] { return !shard.inbox.empty() || stopping_; });
      arrived.swap(shard.inbox);
    }
    const double now = MonotonicSeconds();
    for (auto& [index, frames] : arrived) {
      if (!members_[index].dead) Handle(index, std::move(frames), now);
    }
  }

  void ReceiveFromSockets(int t, double wait_s) {
    std::vector<zmq::pollitem_t> items;
    std::vector<std::pair<int, bool>> owners;  // member, is its receiver
    for (size_t i = t; i < members_.size(); i += kFleetThreads) {
      Member& member = members_[i];
      if (member.dead) continue;
      items.push_back({member.receiver.handle(), 0, ZMQ_POLLIN, 0});
      owners.emplace_back(static_cast<int>(i), true);
      items.push_back({member.sender.handle(), 0, ZMQ_POLLIN, 0});
      owners.emplace_back(static_cast<int>(i), false);
    }
    zmq::poll(items.data(), items.size(),
              std::chrono::milliseconds(static_cast<int>(std::ceil(wait_s * 1000))));
    const double now = MonotonicSeconds();
    for (size_t k = 0; k < items.size(); ++k) {
      if (!(items[k].revents & ZMQ_POLLIN)) continue;
      Member& member = members_[owners[k].first];
      zmq::socket_t& socket = owners[k].second ? member.receiver : member.sender;
      while (true) {
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
          break;
        }
        if (owners[k].second && !frames.empty()) frames.erase(frames.begin());  // the route
        Handle(owners[k].first, std::move(frames), now);
      }
    }
  }

  void Run(int t) {
    while (!stopping_ && !board_.stopping) {
      const double now = MonotonicSeconds();
      const int kill = board_.kill.load();
      if (kill >= begin_ && kill < begin_ + static_cast<int>(members_.size()) &&
          (kill - begin_) % kFleetThreads == t) {
        Close(members_[kill - begin_]);
        board_.killed_at = MonotonicSeconds();
        board_.kill = -1;
      }
      // A thread waits for its members' messages until one of them has
      // something due, at most kFleetPollS: polling a thousand sockets costs
      // a millisecond or two, which every 5 ms took both cores from the
      // scheduler (their share of the machine is a cluster's other hosts').
      const double due = board_.storm ? SendDue(t, now) : now + kFleetPollS;
      const double wait_s = std::clamp(due - MonotonicSeconds(), 0.0, kFleetPollS);
      if (network_) {
        ReceiveFromMemory(shards_[t], wait_s);
      } else {
        ReceiveFromSockets(t, wait_s);
      }
    }
  }

  const double interval_s_;
  const std::shared_ptr<MemoryNetwork> network_;
  const std::string scheduler_address_;
  const SharedBoard& shared_;
  Board& board_;
  const int begin_;                          // the first member's index
  std::unique_ptr<zmq::context_t> context_;  // tcp
  std::vector<Member> members_;              // by index - begin_
  std::vector<Shard> shards_;
  std::mutex index_mutex_;
  std::unordered_map<int, int> index_of_id_;  // IndexOf's
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;  // last: they use the members above
};

// The simulated members, in this process (one Fleet) or, over TCP when their
// sockets do not fit beside the scheduler's in one process's descriptors, in
// `processes` processes of their own (a Fleet each over a share of them),
// forked before the scheduler and its threads start (only the binary's
// malloc_trim thread runs then; glibc's malloc is fork-safe) and told its
// address through the board.
class SimulatedMembers {
 public:
  SimulatedMembers(int nodes, int servers, double heartbeat_interval_s,
                   std::shared_ptr<MemoryNetwork> network, int processes)
      : shared_(nodes),
        parent_(getpid()),
        servers_(servers),
        interval_s_(heartbeat_interval_s),
        network_(std::move(network)) {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int p = 0; p < processes; ++p) {
      const int begin = static_cast<int>(static_cast<int64_t>(nodes) * p / processes);
      const int end = static_cast<int>(static_cast<int64_t>(nodes) * (p + 1) / processes);
      const pid_t pid = fork();
      if (pid < 0) {
        Stop();
        throw MakeError("cannot start a process for members ", begin, "-", end - 1, ": ",
                        std::strerror(errno));
      }
      if (pid == 0) RunProcess(begin, end);  // does not return
      children_.push_back(pid);
    }
  }

  ~SimulatedMembers() { Stop(); }
  SimulatedMembers(const SimulatedMembers&) = delete;
  SimulatedMembers& operator=(const SimulatedMembers&) = delete;

  // Once the scheduler listens at `address`: the members make their sockets
  // (and, in processes, report they have).
  void Start(const std::string& address, double timeout_s) {
    if (children_.empty()) {
      fleet_ = std::make_unique<Fleet>(shared_, 0, shared_.nodes(), servers_, interval_s_, network_,
                                       address);
      return;
    }
    Board& board = shared_.board();
    std::snprintf(board.scheduler_address, sizeof(board.scheduler_address), "%s", address.c_str());
    board.address_set.store(true, std::memory_order_release);
    const double deadline = MonotonicSeconds() + timeout_s;
    const auto processes = static_cast<int>(children_.size());
    while (board.processes_ready + board.processes_failed < processes &&
           MonotonicSeconds() < deadline) {
      for (pid_t pid : children_) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
          Stop();
          throw MakeError("a member process (pid ", pid, ") ended before its sockets were made");
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (board.processes_ready < processes) {
      throw MakeError(processes - board.processes_ready, " of ", processes,
                      " member processes could not make their sockets");
    }
  }

  // Ends the members: a Fleet here stops; the processes stop theirs and exit
  // (each waited for up to 30 s, then killed).
  void Stop() {
    shared_.board().stopping = true;
    if (fleet_) fleet_->Stop();
    const double deadline = MonotonicSeconds() + 30;  // for all of them
    for (pid_t pid : children_) {
      int status = 0;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (MonotonicSeconds() >= deadline) {
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    children_.clear();
  }

  void Storm() { shared_.board().storm = true; }
  // Member `index` is closed (at once) by its thread, which notes when.
  void Kill(int index) { shared_.board().kill = index; }
  // Members reaching a view of `epoch` or later are counted from now on.
  void Watch(uint64_t epoch) { shared_.board().target_epoch = epoch; }

  int with_view() const { return shared_.board().with_view.load(std::memory_order_acquire); }
  int on_target() const { return shared_.board().on_target.load(std::memory_order_acquire); }
  double killed_at() const { return shared_.board().killed_at.load(); }
  uint64_t refusals() const { return shared_.board().refusals.load(); }
  uint64_t acks() const { return shared_.board().acks.load(); }
  uint64_t beats() const { return shared_.board().beats.load(); }
  uint64_t relayed_beats() const { return shared_.board().relayed_beats.load(); }
  int id(int index) const { return shared_.ids()[index]; }  // once every member has a view
  // Earliest and latest of the times counted by with_view / on_target.
  std::pair<double, double> FirstViewSpan() const { return Span(shared_.first_view_at()); }
  std::pair<double, double> TargetSpan() const { return Span(shared_.target_at()); }
  // The mean and the longest of the members' parses of their first view (-1
  // if none has one).
  std::pair<double, double> FirstViewParse() const {
    double sum = 0, longest = -1;
    int count = 0;
    for (int i = 0; i < shared_.nodes(); ++i) {
      const double parse = shared_.parse_s()[i];
      if (parse < 0) continue;
      sum += parse;
      longest = std::max(longest, parse);
      ++count;
    }
    return {count > 0 ? sum / count : -1, longest};
  }
  // Bytes of VIEW messages of `epoch` every member got.
  uint64_t ViewBytes(uint64_t epoch) const {
    return epoch < Board::kEpochs ? shared_.board().view_bytes[epoch].load() : 0;
  }

 private:
  std::pair<double, double> Span(const double* times) const {
    double first = -1, last = -1;
    for (int i = 0; i < shared_.nodes(); ++i) {
      if (times[i] < 0) continue;
      first = first < 0 ? times[i] : std::min(first, times[i]);
      last = std::max(last, times[i]);
    }
    return {first, last};
  }

  // A member process: waits for the scheduler's address, serves members
  // [begin, end) until told to stop, and exits (never returns; dies with
  // the bench).
  [[noreturn]] void RunProcess(int begin, int end) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent_) _exit(1);  // the bench ended before that took hold
    Board& board = shared_.board();
    int code = 0;
    try {
      while (!board.address_set.load(std::memory_order_acquire) && !board.stopping) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (!board.stopping) {
        Fleet fleet(shared_, begin, end, servers_, interval_s_, nullptr, board.scheduler_address);
        board.processes_ready.fetch_add(1);
        while (!board.stopping) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        fleet.Stop();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "members %d-%d: %s\n", begin, end - 1, e.what());
      board.processes_failed.fetch_add(1);
      code = 1;
    }
    _exit(code);
  }

  SharedBoard shared_;
  const pid_t parent_;
  const int servers_;
  const double interval_s_;
  const std::shared_ptr<MemoryNetwork> network_;
  std::vector<pid_t> children_;
  std::unique_ptr<Fleet> fleet_;
};

// Waits until `done()` or `timeout_s`; false on timeout.
template <typename Done>
bool WaitFor(Done done, double timeout_s) {
  const double deadline = MonotonicSeconds() + timeout_s;
  while (!done()) {
    if (MonotonicSeconds() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::string Json(const ControlReport& r) {
  return JsonObject(JsonObject::Style::kCompact)
      .String("bench", "control")
      .Integer("nodes", r.nodes)
      .Integer("servers", r.servers)
      .Integer("workers", r.workers)
      .Integer("key_ranges", r.key_ranges)
      .String("transport", r.transport)
      .Integer("member_processes", r.member_processes)
      .Bool("view_deltas", r.view_deltas)
      .Number("storm_to_view_sent_s", r.storm_to_view_sent_s, kFigureDigits)
      .Number("storm_to_first_member_view_s", r.storm_to_first_member_view_s, kFigureDigits)
      .Number("storm_to_all_views_s", r.storm_to_all_views_s, kFigureDigits)
      .Integer("members_with_view", r.members_with_view)
      .Count("registration_refusals", r.registration_refusals)
      .Count("first_view_bytes", r.first_view_bytes)
      .Number("first_view_parse_mean_s", r.first_view_parse_mean_s, kFigureDigits)
      .Number("first_view_parse_max_s", r.first_view_parse_max_s, kFigureDigits)
      .Number("steady_seconds", r.steady_seconds, kFigureDigits)
      .Number("scheduler_cpu_share", r.scheduler_cpu_share, kFigureDigits)
      .Number("scheduler_zmq_cpu_share", r.scheduler_zmq_cpu_share, kFigureDigits)
      .Number("process_cpu_share", r.process_cpu_share, kFigureDigits)
      .Count("heartbeats_sent", r.heartbeats_sent)
      .Count("heartbeats_acked", r.heartbeats_acked)
      .Bool("heartbeat_relay", r.heartbeat_relay)
      .Count("heartbeats_relayed", r.heartbeats_relayed)
      .Count("heartbeats_passed_on", r.heartbeats_passed_on)
      .Number("status_s", r.status_s, kFigureDigits)
      .Number("status_json_s", r.status_json_s, kFigureDigits)
      .Count("status_json_bytes", r.status_json_bytes)
      .Number("status_json_all_s", r.status_json_all_s, kFigureDigits)
      .Count("status_json_all_bytes", r.status_json_all_bytes)
      .Number("scrape_s", r.scrape_s, kFigureDigits)
      .Count("scrape_bytes", r.scrape_bytes)
      .Number("kill_to_view_sent_s", r.kill_to_view_sent_s, kFigureDigits)
      .Number("kill_to_first_member_view_s", r.kill_to_first_member_view_s, kFigureDigits)
      .Number("kill_to_all_views_s", r.kill_to_all_views_s, kFigureDigits)
      .Number("detection_to_all_views_s", r.detection_to_all_views_s, kFigureDigits)
      .Integer("living_members", r.living_members)
      .Integer("members_on_new_view", r.members_on_new_view)
      .Bool("killed_left_view", r.killed_left_view)
      .Count("failure_view_bytes", r.failure_view_bytes)
      .Count("departures", r.departures)
      .Number("rss_growth_mb", r.rss_growth_mb, kFigureDigits)
      .Number("peak_rss_mb", r.peak_rss_mb, kFigureDigits)
      .Number("descriptors_per_member", r.descriptors_per_member, kFigureDigits)
      .Close();
}

// What a refresh of the status page and a metrics scrape cost the scheduler
// (medians of 5) and what they carry.
void MeasureStatusServing(const Scheduler& scheduler, ControlReport* report) {
  const auto median_of_5 = [](const std::function<size_t()>& serve, uint64_t* bytes) {
    std::vector<double> seconds;
    for (int i = 0; i < 5; ++i) {
      const double start = MonotonicSeconds();
      *bytes = serve();
      seconds.push_back(MonotonicSeconds() - start);
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  };
  const auto status_json = [&](const StatusPaging& paging) {
    return StatusJson(scheduler.status(), scheduler.progress().Snapshot(MonotonicSeconds()),
                      WallSeconds(), paging)
        .size();
  };
  StatusPaging every_row;
  every_row.nodes_max = every_row.ranges_max = every_row.workers_max = SIZE_MAX;
  report->status_json_s =
      median_of_5([&] { return status_json(StatusPaging()); }, &report->status_json_bytes);
  report->status_json_all_s =
      median_of_5([&] { return status_json(every_row); }, &report->status_json_all_bytes);
  MetricsRegistry registry;
  AddSchedulerMetrics(&scheduler, &registry);
  report->scrape_s =
      median_of_5([&] { return registry.TextExposition().size(); }, &report->scrape_bytes);
}

}  // namespace

ControlReport RunControlBench(const BenchControlOptions& options) {
  if (options.nodes < 2) throw MakeError("--nodes ", options.nodes, ": at least 2");
  const int limit = RaiseDescriptorLimit();
  // Over TCP: both ends in this process up to `tcp_fit` members; beyond, the
  // members in processes of their own, up to what the scheduler's end fits.
  const int tcp_fit = (limit - kSpareDescriptors) / kTcpDescriptorsPerMember;
  const int scheduler_fit = (limit - kSpareDescriptors) / kSchedulerDescriptorsPerMember;
  const int process_fit = (limit - kSpareDescriptors) / kMemberDescriptorsPerMember;
  std::string transport = options.transport;
  if (transport == "auto") transport = options.nodes <= scheduler_fit ? "tcp" : "memory";
  if (transport != "tcp" && transport != "memory") {
    throw MakeError("--transport '", options.transport, "': expected tcp, memory or auto");
  }
  if (transport == "tcp" && options.nodes > scheduler_fit) {
    throw MakeError("--nodes ", options.nodes, " over tcp needs about ",
                    options.nodes * kSchedulerDescriptorsPerMember + kSpareDescriptors,
                    " descriptors for the scheduler's ends and the limit is ", limit, ": at most ",
                    scheduler_fit, " (or --transport=memory)");
  }
  int processes = 0;
  if (transport == "tcp") {
    const int needed = (options.nodes + process_fit - 1) / process_fit;
    processes = options.member_processes >= 0 ? options.member_processes
                : options.nodes <= tcp_fit    ? 0
                                              : needed;
    if (processes > 0 && processes < needed) {
      throw MakeError("--member_processes ", processes, ": ", options.nodes,
                      " members need at least ", needed, " (", process_fit, " a process)");
    }
    if (processes == 0 && options.nodes > tcp_fit) {
      throw MakeError("--member_processes 0: ", options.nodes, " members and the scheduler ",
                      "need about ", options.nodes * kTcpDescriptorsPerMember + kSpareDescriptors,
                      " descriptors in one process and the limit is ", limit);
    }
  } else if (options.member_processes > 0) {
    throw MakeError("--member_processes ", options.member_processes,
                    ": members in processes of their own need --transport=tcp");
  }
  ControlReport report;
  report.member_processes = processes;
  report.nodes = options.nodes;
  report.servers = std::max(1, options.nodes / 10);
  report.workers = options.nodes - report.servers;
  report.key_ranges = std::max(options.key_ranges, report.servers);
  report.transport = transport;

  std::shared_ptr<MemoryNetwork> network;
  if (transport == "memory") network = std::make_shared<MemoryNetwork>();
  // First: member processes fork before any thread starts.
  SimulatedMembers fleet(options.nodes, report.servers, options.heartbeat_interval_s, network,
                         processes);
  const double rss_before = StatusMegabytes("VmRSS");
  const std::set<int> before = Tasks();
  SchedulerOptions scheduler_options;
  scheduler_options.bind_host = "127.0.0.1";
  scheduler_options.num_servers = report.servers;
  scheduler_options.num_workers = report.workers;
  scheduler_options.key_ranges = report.key_ranges;
  scheduler_options.view_deltas = options.view_deltas;
  scheduler_options.heartbeat_relay_from = options.heartbeat_relay_from;
  report.view_deltas = options.view_deltas;
  scheduler_options.memory_network = network;
  Scheduler scheduler(scheduler_options);
  scheduler.Start();
  std::set<int> scheduler_tasks, scheduler_zmq_tasks;
  for (int tid : Tasks()) {
    if (before.count(tid)) continue;
    scheduler_tasks.insert(tid);
    if (IsZeroMQThread(tid)) scheduler_zmq_tasks.insert(tid);
  }
  // (Over a MemoryNetwork the scheduler holds the first address, on 127.0.0.1.)
  const std::string scheduler_address = "127.0.0.1:" + std::to_string(scheduler.port());

  fleet.Start(scheduler_address, options.timeout_s);
  const int descriptors_before = OpenDescriptors();

  // The storm.
  const double storm = MonotonicSeconds();
  fleet.Storm();
  if (WaitFor([&] { return scheduler.epoch() >= 1; }, options.timeout_s)) {
    report.storm_to_view_sent_s = MonotonicSeconds() - storm;
  }
  const bool all_viewed =
      WaitFor([&] { return fleet.with_view() == options.nodes; }, options.timeout_s);
  report.members_with_view = fleet.with_view();
  report.registration_refusals = fleet.refusals();
  const auto [first_view, last_view] = fleet.FirstViewSpan();
  if (first_view >= 0) report.storm_to_first_member_view_s = first_view - storm;
  if (all_viewed) report.storm_to_all_views_s = last_view - storm;
  report.first_view_bytes = fleet.ViewBytes(1);
  std::tie(report.first_view_parse_mean_s, report.first_view_parse_max_s) = fleet.FirstViewParse();
  report.descriptors_per_member =
      static_cast<double>(OpenDescriptors() - descriptors_before) / options.nodes;
  if (!all_viewed) {
    report.rss_growth_mb = StatusMegabytes("VmRSS") - rss_before;
    report.peak_rss_mb = StatusMegabytes("VmHWM");
    scheduler.Stop();  // first: the members' leaving is no news to it
    return report;
  }

  // Steady state.
  std::this_thread::sleep_for(std::chrono::duration<double>(options.heartbeat_interval_s));
  const double cpu_start = CpuSeconds(scheduler_tasks), process_start = ProcessCpuSeconds();
  const double zmq_start = CpuSeconds(scheduler_zmq_tasks);
  const uint64_t acks_start = fleet.acks();
  const uint64_t beats_start = fleet.beats();
  const uint64_t relayed_start = fleet.relayed_beats();
  const uint64_t passed_on_start = scheduler.status().relayed_heartbeats;
  const double window_start = MonotonicSeconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(options.steady_seconds));
  report.steady_seconds = MonotonicSeconds() - window_start;
  report.scheduler_cpu_share = (CpuSeconds(scheduler_tasks) - cpu_start) / report.steady_seconds;
  report.scheduler_zmq_cpu_share =
      (CpuSeconds(scheduler_zmq_tasks) - zmq_start) / report.steady_seconds;
  report.process_cpu_share = (ProcessCpuSeconds() - process_start) / report.steady_seconds;
  report.heartbeats_acked = fleet.acks() - acks_start;
  report.heartbeats_sent = fleet.beats() - beats_start;
  report.heartbeats_relayed = fleet.relayed_beats() - relayed_start;
  report.heartbeats_passed_on = scheduler.status().relayed_heartbeats - passed_on_start;
  report.heartbeat_relay = scheduler.view().heartbeat_relay();
  report.rss_growth_mb = StatusMegabytes("VmRSS") - rss_before;
  // What the status page and the metrics read on every request.
  std::vector<double> status_s;
  for (int i = 0; i < 5; ++i) {
    const double start = MonotonicSeconds();
    report.status_members = static_cast<int>(scheduler.status().members.size());
    status_s.push_back(MonotonicSeconds() - start);
  }
  std::sort(status_s.begin(), status_s.end());
  report.status_s = status_s[status_s.size() / 2];
  MeasureStatusServing(scheduler, &report);

  // A worker killed.
  const int victim = options.nodes - 1;
  const int victim_id = fleet.id(victim);
  const uint64_t target = scheduler.epoch() + 1;
  fleet.Watch(target);
  fleet.Kill(victim);
  if (WaitFor([&] { return scheduler.epoch() >= target; }, options.timeout_s) &&
      fleet.killed_at() > 0) {
    report.kill_to_view_sent_s = MonotonicSeconds() - fleet.killed_at();
  }
  const int living = options.nodes - 1;
  WaitFor([&] { return fleet.on_target() >= living; }, options.timeout_s);
  report.members_on_new_view = fleet.on_target();
  const proto::ClusterView view = scheduler.view();
  report.living_members = view.nodes_size();
  report.killed_left_view =
      view.epoch() >= target &&
      std::none_of(view.nodes().begin(), view.nodes().end(),
                   [&](const proto::NodeInfo& node) { return node.id() == victim_id; });
  const auto [first_new, last_new] = fleet.TargetSpan();
  const double killed_at = fleet.killed_at();
  if (first_new >= 0) report.kill_to_first_member_view_s = first_new - killed_at;
  if (report.members_on_new_view >= living) {
    report.kill_to_all_views_s = last_new - killed_at;
    report.detection_to_all_views_s = last_new - first_new;
  }
  report.failure_view_bytes = fleet.ViewBytes(target);
  report.departures = scheduler.status().departures;
  report.peak_rss_mb = StatusMegabytes("VmHWM");
  scheduler.Stop();  // first: the members' leaving is no news to it
  fleet.Stop();
  return report;
}

int BenchControl(const BenchControlOptions& options) {
  const ControlReport r = RunControlBench(options);
  std::printf("control plane: %d members (%d servers, %d workers), %d key ranges, over %s%s, %s\n",
              r.nodes, r.servers, r.workers, r.key_ranges, r.transport.c_str(),
              r.member_processes > 0 ? (" (the members in " + std::to_string(r.member_processes) +
                                        " processes of their own)")
                                           .c_str()
                                     : "",
              r.view_deltas ? "view deltas" : "whole views");
  std::printf("  storm -> view 1 sent to every member %7.3f s  (the scheduler's part)\n",
              r.storm_to_view_sent_s);
  std::printf("  storm -> first member on view 1   %10.3f s\n", r.storm_to_first_member_view_s);
  std::printf("  storm -> every member on view 1   %10.3f s  (%d of %d; %llu asked to retry)\n",
              r.storm_to_all_views_s, r.members_with_view, r.nodes,
              static_cast<unsigned long long>(r.registration_refusals));
  std::printf("  first view, bytes to all members  %10.1f MB\n", r.first_view_bytes / 1e6);
  std::printf("  first view, one member's parse    %10.4f s mean, %.4f s longest\n",
              r.first_view_parse_mean_s, r.first_view_parse_max_s);
  std::printf(
      "  scheduler CPU, heartbeats at %gs   %10.1f %% of a core (ZeroMQ's threads %.1f %%; "
      "process %.1f %%; %llu heartbeats to it, %llu answered, in %.1f s)\n",
      options.heartbeat_interval_s, 100 * r.scheduler_cpu_share, 100 * r.scheduler_zmq_cpu_share,
      100 * r.process_cpu_share, static_cast<unsigned long long>(r.heartbeats_sent),
      static_cast<unsigned long long>(r.heartbeats_acked), r.steady_seconds);
  if (r.heartbeat_relay) {
    std::printf(
        "  heartbeats relayed by servers     %10llu workers' sent to servers, %llu passed on\n",
        static_cast<unsigned long long>(r.heartbeats_relayed),
        static_cast<unsigned long long>(r.heartbeats_passed_on));
  }
  std::printf("  Scheduler::status() (status page, metrics) %.4f s (median of 5; %d members)\n",
              r.status_s, r.status_members);
  std::printf("  /status.json as served (500 rows a table) %.4f s, %.1f KB; every row %.4f s, "
              "%.1f KB\n",
              r.status_json_s, r.status_json_bytes / 1e3, r.status_json_all_s,
              r.status_json_all_bytes / 1e3);
  std::printf("  one metrics scrape                %10.5f s, %.1f KB\n", r.scrape_s,
              r.scrape_bytes / 1e3);
  std::printf("  kill -> new view sent to every member %6.3f s  (the scheduler's part)\n",
              r.kill_to_view_sent_s);
  std::printf("  kill -> first member on new view  %10.3f s\n", r.kill_to_first_member_view_s);
  std::printf("  kill -> every member on new view  %10.3f s  (%d of %d living; spread %.3f s)\n",
              r.kill_to_all_views_s, r.members_on_new_view, r.living_members,
              r.detection_to_all_views_s);
  std::printf("  failure view, bytes to all        %10.1f MB\n", r.failure_view_bytes / 1e6);
  std::printf("  memory: RSS +%.1f MB, peak %.1f MB; %.2f descriptors a member (%s)\n",
              r.rss_growth_mb, r.peak_rss_mb, r.descriptors_per_member,
              r.member_processes > 0 ? "the scheduler's end" : "both ends");
  std::printf("%s\n", Json(r).c_str());
  std::fflush(stdout);
  const bool complete =
      r.members_with_view == r.nodes && r.killed_left_view && r.members_on_new_view >= r.nodes - 1;
  return complete ? 0 : 1;
}

}  // namespace keel
