#include "scheduler/scheduler.h"

#include <glog/logging.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "base/error.h"
#include "base/time.h"
#include "kv/node.h"
#include "kv/view_delta.h"
#include "scheduler/control_message.h"

namespace keel {
namespace {

constexpr int kSchedulerMinSockets = 1024;

// A whole view as a member gets it: the workers' form for a worker, and the
// ranges' begins left out (the member fills them in).
void MemberForm(bool worker, proto::ClusterView* view) {
  if (worker) CutWorkers(view);
  LeaveOutEvenBegins(view);
}

// The process's limit on open descriptors (RLIMIT_NOFILE), at most 1 << 20.
int DescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20));
}

VanOptions SchedulerVan(const SchedulerOptions& options) {
  if (options.num_servers <= 0 || options.num_workers <= 0) {
    throw MakeError("a cluster needs at least one server and one worker (--num_servers ",
                    options.num_servers, ", --num_workers ", options.num_workers, ")");
  }
  // Checks the replication and the key ranges.
  RangeMap::Even(options.num_servers, options.replication, options.key_ranges);
  VanOptions van;
  van.bind_host = options.bind_host;
  van.port = options.port;
  van.secret = options.secret;
  van.faults = options.faults;
  van.max_frame_bytes = kSchedulerMaxFrameBytes;
  van.track_caught_up = true;  // failure detection judges silence as of it
  // Three ZeroMQ sockets a member (its send socket, and the pair watching
  // that socket's connection), each holding a descriptor: the process's
  // descriptor limit bounds them before libzmq's default of 1023 does.
  van.max_sockets = std::max(kSchedulerMinSockets, DescriptorLimit());
  van.memory_network = options.memory_network;
  return van;
}

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options),
      // A scheduler resuming a job goes on with its timeline.
      timeline_(options.model_dir, "scheduler", options.checkpoint.resume.empty()),
      membership_(options.membership_log, &timeline_),
      van_(SchedulerVan(options)),
      cluster_(options.num_servers, options.num_workers, options.replication, options.key_ranges),
      barriers_([this](int node, Message& message) { SendTo(node, message); }),
      shares_(options.num_workers, options.worker_replace_timeout_s,
              [this](int node, Message& message) { SendTo(node, message); }),
      resharding_(&cluster_, &membership_,
                  {[this](int node, Message& message) { SendTo(node, message); },
                   [this](const Message& request, Message& reply) { van_.Reply(request, reply); },
                   [this] { PublishView(); },
                   [this](int id) {
                     barriers_.Forget(id, cluster_.members, cluster_.published);
                     replies_.Forget(id);
                   },
                   [this] { changed_.notify_all(); }},
                  options.secret.has_value()),
      progress_(options.num_workers),
      preemption_(cluster_.members, &timeline_, options.preemption_grace_s,
                  [this](int node, Message& message) { SendTo(node, message); }) {
  cluster_.chains.set_precopy(options.precopy);
  // Node ids are never reused, across a restart of the scheduler too: a
  // scheduler started again does not know the ids its predecessor gave out
  // until their nodes register again, and a new node may come first. So each
  // run gives out ids from a block of its own, placed by its start time (in
  // milliseconds, 1000 ids a millisecond, repeating every 16.7 minutes).
  const int64_t ms = WallMillis();
  const int first_id = 1 + static_cast<int>(ms % 1000000) * 1000;
  registration_ = std::make_unique<Registration>(
      &cluster_, &membership_, &barriers_, &shares_, &resharding_,
      Registration::Hooks{
          [this](int node, Message& message) { SendTo(node, message); },
          [this](const Message& request, Message& reply) { van_.Reply(request, reply); },
          [this](int id, const std::string& address) { van_.Connect(id, address); },
          [this] { PublishView(); },
          [this](const proto::NodeInfo& holder, const std::string& reason) {
            departures_->DepartEarlierHolder(holder, reason);
          },
          [this](std::string* uri) { return checkpoints_->LatestCommitted(uri); }},
      first_id, options_.rebuild_wait_s,
      std::make_unique<RegistrationProbes>(
          options_.connect_timeout_s, options_.bind_host, van_.port(), options_.secret,
          options_.memory_network.get(),
          [this](const Message& request, const std::string& refusal) {
            OnProbed(request, refusal);
          }));
  checkpoints_ = std::make_unique<CheckpointCoordinator>(
      options_.checkpoint, [this](int node, Message& message) { SendTo(node, message); },
      [this](const std::string& id, const std::string& error) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!checkpoints_) return;  // Stop took it: the job is over
        checkpoints_->FinishCommit(id, error);
        changed_.notify_all();
      });
  checkpoints_->set_timeline(&timeline_);
  shares_.Inherit(checkpoints_->resumed());
  std::unique_ptr<Suspects> suspects;
  if (options_.detect_closed_connections) {
    suspects = std::make_unique<Suspects>(
        options_.connect_timeout_s, options_.secret, options_.memory_network.get(),
        [this](int id, const std::string& address, const AddressProbe& probe) {
          OnSuspectProbed(id, address, probe);
        });
  }
  departures_ = std::make_unique<Departures>(
      &cluster_, &membership_, &shares_,
      Departures::Hooks{[this](int id) { van_.Disconnect(id); },
                        [this](int id) { AfterDeparture(id); },
                        [this] { resharding_.AdvanceMoves(); },
                        [this](std::string* uri) { return checkpoints_->LatestCommitted(uri); }},
      options_.heartbeat_timeout_s, options_.replication, std::move(suspects));
  if (options_.detect_closed_connections) {
    van_.WatchConnections([this](int id) { OnConnectionClosed(id); });
  }
  timeline_.Record("start",
                   "\"role\": \"scheduler\", \"servers\": " + std::to_string(options_.num_servers) +
                       ", \"workers\": " + std::to_string(options_.num_workers));
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  van_.Start([this](Message&& message) { OnMessage(std::move(message)); });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    monitor_ran_ = MonotonicSeconds();
  }
  monitor_thread_ = std::thread([this] { MonitorLoop(); });
  LOG(INFO) << "scheduler listening on " << options_.bind_host << ":" << van_.port()
            << ", expecting " << options_.num_servers << " server(s) and " << options_.num_workers
            << " worker(s)";
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  if (monitor_thread_.joinable()) monitor_thread_.join();
  // Its commit thread calls back into this object: it is taken under the
  // lock (a commit still in flight, as after a preemption, finds it gone)
  // and destroyed, joining that thread, outside it.
  std::unique_ptr<CheckpointCoordinator> checkpoints;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    checkpoints = std::move(checkpoints_);
  }
  checkpoints.reset();
  registration_->Stop();
  departures_->Stop();
  van_.Stop();
  timeline_.Flush();
}

proto::ClusterView Scheduler::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cluster_.view;
}

uint64_t Scheduler::epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cluster_.published ? cluster_.view.epoch() : 0;
}

std::vector<LostRange> Scheduler::lost_ranges() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LostRange> ranges;
  for (const auto& [range, lost] : cluster_.lost.ranges()) ranges.push_back(lost);
  return ranges;
}

SchedulerStatus Scheduler::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = MonotonicSeconds();
  SchedulerStatus status;
  status.epoch = cluster_.published ? cluster_.view.epoch() : 0;
  for (const auto& [id, member] : cluster_.members) {
    SchedulerStatus::Node node;
    node.id = id;
    node.role = member.info.role();
    node.rank = member.info.rank();
    node.address = member.info.address();
    node.heartbeat_age_s = now - member.last_heartbeat;
    node.silent = member.reported_silent;
    const auto done = cluster_.done.find(id);
    node.done = done != cluster_.done.end();
    if (node.done) node.error = done->second;
    status.members.push_back(std::move(node));
  }
  if (cluster_.published) {
    for (const proto::KeyRange& range : cluster_.view.ranges()) {
      status.ranges.push_back({range.begin(),
                               range.server_rank(),
                               {range.backups().begin(), range.backups().end()},
                               {range.copying().begin(), range.copying().end()}});
    }
  }
  status.expected_servers = cluster_.num_servers;
  status.expected_workers = options_.num_workers;
  status.replication = options_.replication;
  status.checkpoint_uri = options_.checkpoint.uri;
  if (checkpoints_) {
    std::string uri;
    status.last_checkpoint = checkpoints_->LatestCommitted(&uri);
  }
  status.events = membership_.Recent();
  status.workers_done = static_cast<int>(cluster_.done.size());
  status.departures = cluster_.removed.size();
  for (const auto& [range, lost] : cluster_.lost.ranges()) status.lost_ranges.push_back(lost);
  status.suspected = departures_->suspected();
  status.suspects_cleared = departures_->suspects_cleared();
  status.deaf_spells = departures_->deaf_spells();
  status.rejected_messages = rejected_;
  status.relayed_heartbeats = relayed_;
  status.refused_relayed_heartbeats = refused_relayed_;
  if (checkpoints_) status.checkpoints = checkpoints_->stats();
  status.monitor_age_s = monitor_ran_ > 0 ? now - monitor_ran_ : 0;
  return status;
}

void Scheduler::Preempt(const std::string& who) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  preemption_.Notice(who, *checkpoints_);
  changed_.notify_all();
}

PreemptionOutcome Scheduler::preemption() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return preemption_.outcome();
}

uint64_t Scheduler::rejected_messages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rejected_;
}

void Scheduler::Reject(const proto::Meta& meta, const std::string& why) {
  ++rejected_;
  if ((rejected_ & (rejected_ - 1)) == 0) {  // the 1st, 2nd, 4th, 8th, ...
    LOG(WARNING) << "ignored " << Describe(meta) << ": " << why << " (" << rejected_
                 << " ignored so far)";
  }
}

int Scheduler::WaitForJob(double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  const double deadline = MonotonicSeconds() + timeout_s;
  while (true) {
    const double now = MonotonicSeconds();
    if (JobOver() && !checkpoints_->busy()) break;
    if (preemption_.noticed() && preemption_.Over(now, *checkpoints_)) {
      ShutDownNodes();
      return kPreempted;
    }
    if (now >= deadline) return -1;
    preemption_.Remind(now, *checkpoints_);
    // A preemption is checked at least every Preemption::kOrderInterval: its
    // grace passes with time.
    changed_.wait_for(
        lock, std::chrono::duration<double>(std::min(Preemption::kOrderInterval, deadline - now)));
  }
  int succeeded = 0;
  for (const auto& [id, error] : cluster_.done) succeeded += error.empty();
  const int failed = CountFailures(succeeded);
  ShutDownNodes();
  const size_t unreplaced = shares_.vacancies().size();
  LOG(INFO) << "job finished: " << succeeded << " of " << options_.num_workers
            << " worker(s) succeeded"
            << (unreplaced == 0 ? std::string()
                                : ", " + std::to_string(unreplaced) +
                                      " left without a replacement (the others read their data)");
  return failed;
}

bool Scheduler::JobOver() const {
  if (!cluster_.published) return false;
  for (const auto& [id, member] : cluster_.members) {
    if (member.info.role() == proto::WORKER && !cluster_.done.count(id)) return false;
  }
  if (shares_.AwaitingReplacement(MonotonicSeconds())) return false;
  return !cluster_.done.empty() || !shares_.vacancies().empty();
}

int Scheduler::CountFailures(int succeeded) const {
  int failed = 0;
  for (const auto& [rank, vacancy] : shares_.vacancies()) {
    LOG(WARNING) << "worker " << rank << " left (" << vacancy.reason
                 << ") and was not replaced; the other workers read its data";
    if (succeeded == 0) ++failed;
  }
  for (const auto& [id, error] : cluster_.done) {
    if (error.empty()) continue;
    ++failed;
    auto member = cluster_.members.find(id);
    LOG(ERROR) << "worker " << (member != cluster_.members.end() ? member->second.info.rank() : -1)
               << " (node " << id << ") failed: " << error;
  }
  return failed;
}

void Scheduler::ShutDownNodes() {
  cluster_.shut_down = true;  // the nodes exit now: their connections closing is no news
  for (const auto& [id, member] : cluster_.members) {
    Message shutdown = ControlMessage(proto::SHUTDOWN);
    const PreemptionOutcome& preemption = preemption_.outcome();
    if (preemption.preempted) {
      shutdown.meta.set_preempt(true);
      shutdown.meta.set_checkpoint(preemption.checkpoint);
      shutdown.meta.set_checkpoint_uri(preemption.uri);
    }
    SendTo(id, shutdown);
  }
}

std::set<int> Scheduler::Live(proto::Role role) const { return MemberIds(cluster_.members, role); }

bool Scheduler::RelaysHeartbeats() const {
  return options_.heartbeat_relay_from > 0 && options_.num_workers >= options_.heartbeat_relay_from;
}

void Scheduler::PublishView() {
  if (!cluster_.published) {
    // Nodes send heartbeats once they have a view: their silence counts
    // from the first one, not from their registration.
    departures_->StartClocks(MonotonicSeconds());
  }
  proto::ClusterView previous;  // the view the members were sent, for the delta
  if (options_.view_deltas && cluster_.published) previous = cluster_.view;
  cluster_.view.set_epoch(cluster_.view.epoch() + 1);
  cluster_.published = true;
  cluster_.view.set_num_servers(cluster_.num_servers);
  cluster_.view.set_num_workers(options_.num_workers);
  cluster_.view.clear_nodes();
  for (const auto& [id, member] : cluster_.members) *cluster_.view.add_nodes() = member.info;
  cluster_.chains.ToView(cluster_.server_ranks, &cluster_.view);
  cluster_.lost.MarkView(&cluster_.view);
  cluster_.view.clear_draining();
  for (int rank : resharding_.draining()) cluster_.view.add_draining(rank);
  cluster_.view.set_replication(options_.replication);
  cluster_.view.set_heartbeat_relay(RelaysHeartbeats());
  membership_.RecordView(cluster_.view);
  checkpoints_->FillView(&cluster_.view);
  LOG(INFO) << "cluster view epoch " << cluster_.view.epoch() << ": " << cluster_.num_servers
            << " server(s), " << options_.num_workers << " worker(s)";
  if (options_.view_deltas) {
    SendView(previous);
  } else {
    for (auto& [id, member] : cluster_.members) {
      Message message = ControlMessage(proto::VIEW);
      const bool worker = member.info.role() == proto::WORKER;
      *message.meta.mutable_view() = cluster_.view;
      MemberForm(worker, message.meta.mutable_view());
      SendTo(id, message);
      member.view_epoch = cluster_.view.epoch();
    }
  }
  // Barriers and checkpoint requests that came before the first view (to a
  // restarted scheduler) can go on now.
  barriers_.ReleaseReady(cluster_.members);
  checkpoints_->OnMembership(Live(proto::WORKER), Live(proto::SERVER), cluster_.num_servers);
}

void Scheduler::SendView(const proto::ClusterView& previous) {
  // Each form (whole or delta, the servers' or the workers') is encoded once;
  // every send of it shares its frames.
  auto encode = [this](Message& message) {
    message.meta.set_sender(kSchedulerId);
    message.meta.set_epoch(cluster_.view.epoch());
    return Encode(message);
  };
  std::optional<proto::ViewDelta> delta;             // from `previous`, made once
  bool diffed = previous.epoch() == 0;               // no delta from a view never sent
  std::vector<zmq::message_t> wholes[2], deltas[2];  // [0] servers, [1] workers
  for (auto& [id, member] : cluster_.members) {
    const bool worker = member.info.role() == proto::WORKER;
    const std::vector<zmq::message_t>* frames = nullptr;
    if (member.view_epoch == previous.epoch() && previous.epoch() > 0) {
      if (!diffed) {
        diffed = true;
        proto::ViewDelta made;
        if (DiffViews(previous, cluster_.view, &made)) delta = std::move(made);
      }
      if (delta && deltas[worker].empty()) {
        Message message = ControlMessage(proto::VIEW);
        *message.meta.mutable_view_delta() = *delta;
        if (worker) CutWorkers(message.meta.mutable_view_delta());
        deltas[worker] = encode(message);
      }
      if (delta) frames = &deltas[worker];
    }
    if (!frames) {
      if (wholes[worker].empty()) {
        Message message = ControlMessage(proto::VIEW);
        *message.meta.mutable_view() = cluster_.view;
        MemberForm(worker, message.meta.mutable_view());
        wholes[worker] = encode(message);
      }
      frames = &wholes[worker];
    }
    try {
      van_.SendShared(id, *frames);
    } catch (const Error& e) {
      LOG(WARNING) << "could not send the view (epoch " << cluster_.view.epoch() << ") to node "
                   << id << ": " << e.what();
    }
    member.view_epoch = cluster_.view.epoch();
  }
}

bool Scheduler::TakeOnce(const proto::Meta& meta) {
  switch (replies_.OnRequest(meta.sender(), meta)) {
    case ControlReplies::Seen::kNew:
      return true;
    case ControlReplies::Seen::kAnswered: {
      VLOG(1) << "node " << meta.sender() << " sent " << Describe(meta) << " again: answered again";
      Message again = replies_.answer(meta.sender(), meta.command());
      SendTo(meta.sender(), again);
      return false;
    }
    case ControlReplies::Seen::kPending:
      VLOG(1) << "node " << meta.sender() << " sent " << Describe(meta)
              << " again: still being handled";
      return false;
  }
  return false;
}

void Scheduler::SendTo(int node_id, Message& message) {
  // Answers to what the nodes send until answered (and the releases and
  // notices they wait for): losing one only delays, so control faults may.
  const proto::Command command = message.meta.command();
  message.sent_until_answered = message.sent_until_answered || command == proto::HEARTBEAT ||
                                command == proto::BARRIER || command == proto::CHECKPOINT ||
                                command == proto::ORPHANS || command == proto::WORKER_DONE ||
                                command == proto::PREEMPT;
  message.meta.set_sender(kSchedulerId);
  message.meta.set_epoch(cluster_.view.epoch());
  if (ControlReplies::Tracked(message.meta.command())) replies_.OnAnswer(node_id, message);
  try {
    van_.Send(node_id, message);
  } catch (const Error& e) {
    LOG(WARNING) << "could not send " << Describe(message.meta) << " to node " << node_id << ": "
                 << e.what();
  }
}

void Scheduler::OnMessage(Message&& message) {
  const proto::Meta& meta = message.meta;
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;  // the job is over (and the coordinator may be gone)
  if (meta.command() == proto::REGISTER) {
    registration_->OnRegister(message);
    return;
  }
  if (meta.command() == proto::DRAIN) {
    resharding_.OnRequest(message);
    return;
  }
  auto found = cluster_.members.find(meta.sender());
  if (found == cluster_.members.end()) {
    OnNonMember(message);
    return;
  }
  Member& member = found->second;
  if (message.route != member.route) {
    Reject(meta,
           "node " + std::to_string(meta.sender()) +
               " registered on another connection (this came from " +
               (message.peer_host.empty() ? std::string("an unknown host") : message.peer_host) +
               ")");
    return;
  }
  departures_->HeardFrom(meta.sender(), member, MonotonicSeconds());
  if (ControlReplies::Tracked(meta.command()) && !TakeOnce(meta)) return;
  switch (meta.command()) {
    case proto::HEARTBEAT:
      OnHeartbeat(meta, member);
      break;
    case proto::VIEW:
      OnViewRequest(meta);
      break;
    case proto::BARRIER:
      barriers_.Arrive(meta, cluster_.members, cluster_.published);
      break;
    case proto::WORKER_DONE:
      OnWorkerDone(meta, member);
      break;
    case proto::CHECKPOINT:
      OnCheckpoint(meta, member);
      break;
    case proto::ORPHANS:
      OnOrphans(meta, member);
      break;
    case proto::REPLICA_SYNC:
      OnReplicaSync(meta, member);
      break;
    case proto::SNAPSHOT:
      OnSnapshot(meta, member);
      break;
    case proto::PROGRESS:
      OnProgress(meta, member);
      break;
    case proto::PREEMPT:
      preemption_.OnPreempt(meta, member, *checkpoints_);
      changed_.notify_all();
      break;
    default:
      LOG(WARNING) << "ignored " << Describe(meta) << ": not a scheduler command";
  }
}

void Scheduler::OnProbed(const Message& request, const std::string& refusal) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  registration_->OnProbed(request, refusal);
}

void Scheduler::OnNonMember(const Message& message) {
  const proto::Meta& meta = message.meta;
  const int sender = meta.sender();
  const auto removed = cluster_.removed.find(sender);
  if (sender > 0 && removed == cluster_.removed.end()) {
    // A node registered with an earlier run of this scheduler (it was
    // restarted): it registers again, keeping its id and rank. The request
    // goes back on the node's own connection to this address, the only one
    // the node takes it from.
    if (meta.command() == proto::HEARTBEAT && !meta.node().address().empty()) {
      Message reply = ControlMessage(proto::HEARTBEAT);
      reply.meta.set_rejoin(true);
      reply.meta.set_epoch(cluster_.view.epoch());
      van_.Reply(message, reply);
    }
    return;
  }
  if (meta.command() == proto::HEARTBEAT && removed != cluster_.removed.end()) {
    // A node that left the view (silent too long, or taken for dead) hears so.
    Message reply = ControlMessage(proto::HEARTBEAT);
    reply.meta.set_epoch(cluster_.view.epoch());
    reply.meta.set_error("node " + std::to_string(sender) + " left the cluster (" +
                         removed->second + ")");
    van_.Reply(message, reply);
    return;
  }
  LOG(WARNING) << "ignored " << Describe(meta) << ": the sender is not a member";
}

std::string Scheduler::Drain(int rank, const std::string& who) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return "the job is over";
  return resharding_.Drain(rank, who, /*loopback=*/true);
}

void Scheduler::MonitorLoop() {
  // The shortest wait between rounds: a deadline passed on the clock but not
  // yet as of the receive thread's catching up (Departures::MonitorRound) is
  // looked at again after the receive thread's poll interval, not in a loop
  // that would keep the lock from it.
  constexpr double kMinWaitS = 0.01;
  // Until the first view, how many members registered is logged this often:
  // a role that never started or cannot reach the scheduler holds the job.
  constexpr double kFormingNoteS = 10;
  std::unique_lock<std::mutex> lock(mutex_);
  const double started = MonotonicSeconds();
  double forming_note = started + kFormingNoteS;
  while (!stopping_) {
    const double before = MonotonicSeconds();
    double wake = departures_->NextDeadline(before);
    if (!cluster_.published) wake = std::min(wake, forming_note);
    wake = std::max(wake, before + kMinWaitS);
    changed_.wait_for(lock, std::chrono::duration<double>(wake - before),
                      [this] { return stopping_; });
    const double now = MonotonicSeconds();
    monitor_ran_ = now;
    if (!cluster_.published && now >= forming_note) {
      LOG(WARNING) << "the cluster has not formed " << static_cast<int>(now - started)
                   << " s after the scheduler started: " << cluster_.server_ranks.size()
                   << " of " << cluster_.num_servers << " server(s) and "
                   << cluster_.worker_ranks.size() << " of " << cluster_.num_workers
                   << " worker(s) registered; the job starts (or, after a restart, goes on) "
                      "once every one has (did a role fail to start, or can it not reach this "
                      "scheduler?)";
      forming_note = now + kFormingNoteS;
    }
    departures_->MonitorRound(now, wake, van_.caught_up_at());
    shares_.AnswerExpired();  // replacement timeouts expire with time
    changed_.notify_all();
  }
}

void Scheduler::OnConnectionClosed(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  departures_->OnConnectionClosed(id);
}

void Scheduler::OnSuspectProbed(int id, const std::string& address, const AddressProbe& probe) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  departures_->OnSuspectProbed(id, address, probe);
}

void Scheduler::AfterDeparture(int id) {
  barriers_.Forget(id, cluster_.members, cluster_.published);
  replies_.Forget(id);
  PublishView();  // and the checkpoints hear of the new membership
  changed_.notify_all();
}

void Scheduler::OnHeartbeat(const proto::Meta& meta, const Member& member) {
  std::vector<int> beat_direct;
  if (member.info.role() == proto::SERVER && meta.relayed_size() > 0) {
    beat_direct = OnRelayed(meta, member);
  }
  if (meta.has_cursor() && member.info.role() == proto::WORKER) {
    shares_.OnProgress(member.info.rank(), meta.cursor());
  }
  if (meta.has_progress()) OnProgress(meta, member);
  if (member.info.role() == proto::SERVER && meta.range_pushes_size() > 0) {
    // Only ranges of this job, and each once: a report is bounded by the ranges.
    std::map<size_t, uint64_t> pushes;
    const auto ranges = static_cast<size_t>(cluster_.view.ranges_size());
    for (const proto::RangePushes& entry : meta.range_pushes()) {
      if (entry.range() < ranges) pushes[entry.range()] = entry.pushes();
    }
    if (!pushes.empty()) {
      Member& reporting = cluster_.members.at(meta.sender());
      reporting.range_pushes = std::move(pushes);
      reporting.range_pushes_at = MonotonicSeconds();
    }
  }
  // Answered when asked: a member asks once it has heard nothing for a few
  // intervals (kHeartbeatAnswerAfter), so most heartbeats of a quiet cluster
  // cost one message, not two. A relay server that passed on heartbeats of
  // nodes that are not members hears which, to send them to this scheduler.
  if (!meta.ack() && beat_direct.empty()) return;
  Message ack = ControlMessage(proto::HEARTBEAT);
  for (const int id : beat_direct) ack.meta.add_beat_direct(id);
  SendTo(meta.sender(), ack);
}

std::vector<int> Scheduler::OnRelayed(const proto::Meta& meta, const Member& server) {
  const double now = MonotonicSeconds();
  const int num_servers = cluster_.view.num_servers();
  int taken = 0;
  std::vector<int> beat_direct;
  for (const proto::RelayedHeartbeat& beat : meta.relayed()) {
    // Only a worker this server relays for, each heard within the timeout;
    // a report is bounded by the job's workers.
    if (++taken > options_.num_workers) break;
    const auto found = cluster_.members.find(beat.node());
    if (found == cluster_.members.end() && beat.node() > 0 && RelaysHeartbeats()) {
      // Not a member: registered with an earlier run of this scheduler (which
      // may not have published a view yet), or removed. Its next heartbeat
      // comes here, where it hears which.
      ++refused_relayed_;
      beat_direct.push_back(beat.node());
      continue;
    }
    if (!cluster_.view.heartbeat_relay() || found == cluster_.members.end() ||
        found->second.info.role() != proto::WORKER ||
        HeartbeatRelayRank(found->second.info.rank(), num_servers) != server.info.rank() ||
        beat.age_ms() > options_.heartbeat_timeout_s * 1000) {
      ++refused_relayed_;
      continue;
    }
    ++relayed_;
    Member& worker = found->second;
    // Older than what the scheduler heard from the worker itself (a heartbeat
    // sent to it beside this one): its cursor must not go back.
    const double heard = now - beat.age_ms() * 1e-3;
    if (heard <= worker.last_heartbeat) continue;
    departures_->HeardFrom(beat.node(), worker, heard);
    proto::Meta fields;  // the worker's heartbeat as it sent it; it asked for no answer
    fields.set_command(proto::HEARTBEAT);
    fields.set_sender(beat.node());
    if (beat.has_cursor()) *fields.mutable_cursor() = beat.cursor();
    fields.set_reading_seconds(beat.reading_seconds());
    if (beat.has_progress()) *fields.mutable_progress() = beat.progress();
    OnHeartbeat(fields, worker);
  }
  return beat_direct;
}

void Scheduler::OnViewRequest(const proto::Meta& meta) {
  if (!cluster_.published) return;
  Message reply = ControlMessage(proto::VIEW);
  const bool worker = cluster_.members.at(meta.sender()).info.role() == proto::WORKER;
  *reply.meta.mutable_view() = cluster_.view;
  MemberForm(worker, reply.meta.mutable_view());
  SendTo(meta.sender(), reply);
  cluster_.members.at(meta.sender()).view_epoch = cluster_.view.epoch();
}

void Scheduler::OnWorkerDone(const proto::Meta& meta, const Member& member) {
  if (member.info.role() != proto::WORKER) {
    LOG(WARNING) << "ignored WORKER_DONE from node " << meta.sender() << ": not a worker";
    return;
  }
  cluster_.done[meta.sender()] = meta.error();
  LOG(INFO) << "worker " << member.info.rank() << " done"
            << (meta.error().empty() ? "" : ": " + meta.error());
  changed_.notify_all();
}

void Scheduler::OnCheckpoint(const proto::Meta& meta, const Member& member) {
  if (member.info.role() != proto::WORKER) {
    LOG(WARNING) << "ignored CHECKPOINT from node " << meta.sender() << ": not a worker";
    return;
  }
  // Before its first view (a restarted scheduler hearing from its nodes
  // again) the cluster is not whole: the request waits for the view.
  checkpoints_->OnWorker(meta.sender(), member.info.rank(), meta,
                         cluster_.published ? Live(proto::WORKER) : std::set<int>(),
                         cluster_.published ? Live(proto::SERVER) : std::set<int>(),
                         cluster_.num_servers);
}

void Scheduler::OnOrphans(const proto::Meta& meta, const Member& member) {
  if (member.info.role() != proto::WORKER) return;
  shares_.OnRequest(meta.sender(), member.info.rank(), meta);
}

void Scheduler::OnReplicaSync(const proto::Meta& meta, const Member& member) {
  // A server that joined a chain holds the range now: it counts as a replica.
  // One that pre-copied a range it moves to joins the range's chain.
  if (member.info.role() != proto::SERVER) return;
  const bool precopy = meta.shard().precopy();
  try {
    if (precopy) {
      cluster_.chains.Precopied(meta.shard().range(), member.info.rank());
    } else {
      cluster_.chains.Synced(meta.shard().range(), member.info.rank());
    }
  } catch (const Error& e) {
    Reject(meta, e.what());
    return;
  }
  if (precopy) {
    PublishView();  // it joins the chain
  } else {
    // The nodes' views no longer mark it copying: a scheduler started again
    // takes the chains from those views, and must count it as a replica.
    PublishView();
    resharding_.AdvanceMoves();
  }
}

void Scheduler::OnSnapshot(const proto::Meta& meta, const Member& member) {
  if (member.info.role() != proto::SERVER) return;
  checkpoints_->OnServer(meta.sender(), meta);
  changed_.notify_all();
}

void Scheduler::OnProgress(const proto::Meta& meta, const Member& member) {
  if (member.info.role() != proto::WORKER) {
    Reject(meta, "a progress report from a node that is not a worker");
    return;
  }
  const std::string refusal = progress_.OnReport(
      meta.sender(), member.info.rank(), meta.has_cursor() ? &meta.cursor() : nullptr,
      meta.reading_seconds(), meta.progress(), MonotonicSeconds());
  if (!refusal.empty()) Reject(meta, refusal);
}

}  // namespace keel
