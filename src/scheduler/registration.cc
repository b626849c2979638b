#include "scheduler/registration.h"

#include <glog/logging.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "base/utf8.h"
#include "kv/node.h"
#include "scheduler/control_message.h"

namespace keel {
namespace {

// Bounds on what a node of an earlier run brings back: epochs (as progress
// reports, JobProgress) and barrier tags.
constexpr int kMaxEpochs = 1000000;
constexpr size_t kMaxBarrierTagBytes = 1024;

}  // namespace

Registration::Registration(ClusterState* cluster, MembershipLog* membership, BarrierTable* barriers,
                           OrphanedShares* shares, Resharding* resharding, Hooks hooks,
                           int first_id, double rebuild_wait_s,
                           std::unique_ptr<RegistrationProbes> probes)
    : cluster_(cluster),
      membership_(membership),
      barriers_(barriers),
      shares_(shares),
      resharding_(resharding),
      hooks_(std::move(hooks)),
      rebuild_wait_s_(rebuild_wait_s),
      probes_(std::move(probes)),
      next_id_(first_id) {}

void Registration::Stop() { probes_->Stop(); }

bool Registration::Complete() const {
  return static_cast<int>(cluster_->server_ranks.size()) == cluster_->num_servers &&
         static_cast<int>(cluster_->worker_ranks.size()) == cluster_->num_workers;
}

void Registration::OnRegister(const Message& request) {
  // A REGISTER is its header alone; data frames would only be held while it
  // waits for its probe.
  if (!request.frames.empty()) {
    Refuse(request, "a REGISTER carries no data frames (this one had " +
                        std::to_string(request.frames.size()) + ")");
    return;
  }
  // A node's send sockets all carry the routing id its REGISTER names.
  const std::string& claimed = request.meta.node().routing_id();
  if (!claimed.empty() && claimed != request.route) {
    Refuse(request, "its REGISTER names a routing id other than the one its connection carries");
    return;
  }
  // A node asking again (its answer was late) needs no second check.
  if (AnswerAgain(request)) return;
  if (!probes_->Add(request)) {
    Refuse(request, "the scheduler is checking as many registrations as it holds (" +
                        std::to_string(RegistrationProbes::kMaxHeld) + ", or " +
                        std::to_string(RegistrationProbes::kMaxHeldBytes >> 20) +
                        " MB of them); try again");
  }
}

void Registration::OnProbed(const Message& request, const std::string& refusal) {
  if (refusal.empty()) {
    Admit(request);
  } else {
    Refuse(request, refusal);
  }
}

void Registration::Refuse(const Message& request, const std::string& reason, bool log,
                          bool replaced) {
  if (log) {
    LOG(WARNING) << "refused registration from " << request.meta.node().address() << ": " << reason;
  }
  Message reply = ControlMessage(proto::REGISTER);
  reply.meta.set_epoch(cluster_->view.epoch());
  reply.meta.set_sequence(request.meta.sequence());  // the node's number, echoed
  reply.meta.set_error(ValidUtf8(reason));
  reply.meta.set_replaced(replaced);
  hooks_.reply(request, reply);
}

void Registration::Admit(const Message& request) {
  const proto::NodeInfo& node = request.meta.node();
  if (AnswerAgain(request)) return;  // its first REGISTER was admitted while this one was checked
  std::set<int>* taken = node.role() == proto::SERVER   ? &cluster_->server_ranks
                         : node.role() == proto::WORKER ? &cluster_->worker_ranks
                                                        : nullptr;
  if (!taken) {
    Refuse(request, "role " + std::to_string(node.role()) + " cannot join a cluster");
    return;
  }
  // A server joining the running job (a node of an earlier run that joined
  // registers again as any other).
  const bool join = node.role() == proto::SERVER && request.meta.join() && node.id() <= 0;
  std::string refusal = AdmissionRefusal(node, *taken, join);
  if (refusal.empty() && node.id() > 0) refusal = RejoinRefusal(request);
  if (!refusal.empty()) {
    const bool replaced = ReplacedWhileAway(node, *taken);
    if (replaced) {
      refusal = "node " + std::to_string(node.id()) +
                " registering again: " + proto::Role_Name(node.role()) + " rank " +
                std::to_string(node.rank()) +
                " went to another node while the scheduler restarted; this node has left the "
                "cluster";
    }
    Refuse(request, refusal, /*log=*/true, replaced);
    return;
  }
  // A node may ask for a rank (--rank); otherwise it gets the lowest free one
  // (a server: the lowest vacant one first, whose ranges wait for it).
  const int rank = node.rank() >= 0 ? node.rank() : FreeRank(node.role(), *taken, join);
  const proto::HeldCopy* held = node.role() == proto::SERVER && request.meta.has_held_copy()
                                    ? &request.meta.held_copy()
                                    : nullptr;
  if (node.role() == proto::SERVER && !join && node.id() <= 0) {
    const std::string wait = RebuildWait(rank, held);
    if (!wait.empty()) {
      // Asked again every quarter second: said once per wait.
      if (wait != last_rebuild_wait_) LOG(WARNING) << "server " << rank << " waits: " << wait;
      last_rebuild_wait_ = wait;
      Refuse(request, wait, /*log=*/false);
      return;
    }
  }
  taken->insert(rank);
  proto::WorkerCursor resume;
  const bool takeover = node.role() == proto::WORKER && TakesOver(rank, &resume);
  const Member member = NewMember(request, rank);  // bound to the request's route
  const int id = member.info.id();
  try {
    hooks_.connect(id, node.address());
  } catch (const Error& e) {
    taken->erase(rank);
    Refuse(request, e.what());
    return;
  }
  cluster_->members[id] = member;
  routes_[member.route] = id;
  if (routes_.size() > 2 * cluster_->members.size() + 64) {
    for (auto it = routes_.begin(); it != routes_.end();) {
      const auto found = cluster_->members.find(it->second);
      const bool live = found != cluster_->members.end() && found->second.route == it->first;
      it = live ? std::next(it) : routes_.erase(it);
    }
  }
  if (takeover) shares_->Fill(rank);
  const bool rejoin = node.id() > 0;
  if (rejoin) TakeEarlierRun(request.meta, rank);
  LOG(INFO) << (rejoin ? "registered again " : "registered ") << proto::Role_Name(node.role())
            << " " << rank << " as node " << id << " at " << node.address();
  if (join) resharding_->Join(member);
  AnswerRegistration(member, rejoin, takeover ? &resume : nullptr, request.meta.sequence(), join,
                     held);
  // Its rank is back: a copy the removed holder kept cannot come any more.
  if (node.role() == proto::SERVER) cluster_->former_holders.erase(rank);
  if (!cluster_->published && Complete()) ReplaceEarlierHolders();
  if (cluster_->published || Complete()) hooks_.publish_view();
}

bool Registration::AnswerAgain(const Message& request) {
  const proto::NodeInfo& node = request.meta.node();
  const auto routed = routes_.find(request.route);
  if (routed == routes_.end()) return false;
  const int id = routed->second;
  const auto found = cluster_->members.find(id);
  if (found == cluster_->members.end() || found->second.route != request.route) {
    routes_.erase(routed);  // its member left
    return false;
  }
  const Member& member = found->second;
  // Another node cannot send on a member's route; a claim that differs is
  // refused the usual way.
  if (member.info.role() != node.role() || member.info.address() != node.address() ||
      (node.id() > 0 && node.id() != id) || !member.answer.has_node()) {
    return false;
  }
  LOG(INFO) << proto::Role_Name(node.role()) << " " << member.info.rank() << " (node " << id
            << ") sent REGISTER again: answered as before";
  Message reply = ControlMessage(proto::REGISTER);
  reply.meta = member.answer;
  reply.meta.set_sequence(request.meta.sequence());
  hooks_.send(id, reply);
  return true;
}

void Registration::TakeEarlierRun(const proto::Meta& request, int rank) {
  // The newest view the nodes bring back; of two of one epoch, a whole one
  // over the workers' form (which names no worker).
  const proto::ClusterView& known = request.known_view();
  if (known.epoch() > earlier_view_.epoch() ||
      (known.epoch() == earlier_view_.epoch() && earlier_view_.workers_omitted() &&
       !known.workers_omitted())) {
    earlier_view_ = known;
    // Servers may have joined or been drained since the start: the latest
    // view says how many the job has.
    const int servers = earlier_view_.num_servers();
    if (servers > 0 && servers <= cluster_->chains.num_ranges()) cluster_->num_servers = servers;
    resharding_->RestoreDraining(earlier_view_);
  }
  int passed = 0;
  for (const proto::PassedBarrier& barrier : request.passed_barriers()) {
    if (passed++ >= kMaxPassedBarriers) break;
    if (barrier.tag().size() <= kMaxBarrierTagBytes) {
      barriers_->Passed(barrier.group(), barrier.tag());
    }
  }
  if (request.node().role() != proto::WORKER) return;
  const proto::WorkerCursor& cursor = request.cursor();
  if (request.has_cursor() && cursor.epoch() >= 0 && cursor.epoch() <= kMaxEpochs) {
    shares_->OnProgress(rank, cursor);
  }
  if (request.epoch_ended() > 0 && request.epoch_ended() <= kMaxEpochs) {
    shares_->EpochEnded(request.epoch_ended());
  }
}

void Registration::ReplaceEarlierHolders() {
  if (earlier_view_.epoch() == 0) return;  // not restarted, or nobody came back
  for (auto& [id, member] : cluster_->members) {
    if (member.rejoined) continue;
    const proto::Role role = member.info.role();
    const int rank = member.info.rank();
    for (const proto::NodeInfo& holder : earlier_view_.nodes()) {
      if (holder.role() == role && holder.rank() == rank && holder.id() != id &&
          !cluster_->members.count(holder.id()) && !cluster_->removed.count(holder.id())) {
        hooks_.depart(holder, "it held this rank in the view (epoch " +
                                  std::to_string(earlier_view_.epoch()) +
                                  ") the nodes brought back to this restarted scheduler, did "
                                  "not register again, and a new node took its rank");
      }
    }
    Message reply = ControlMessage(proto::REGISTER);
    reply.meta = member.answer;
    if (role == proto::WORKER) {
      // No holder in that view: it left under the earlier run, whose vacancy
      // (and the last report of it) this scheduler never had.
      if (!shares_->FindVacancy(rank)) {
        shares_->WorkerLeft(0, rank, "it left before this scheduler started");
      }
      proto::WorkerCursor resume;
      if (TakesOver(rank, &resume)) {
        shares_->Fill(rank);
        *reply.meta.mutable_cursor() = resume;
      }
    } else {
      ReplaceServer(rank, &reply);
    }
    membership_->Record("join", member.info,
                        "\"rejoin\": false, \"replaces\": true, \"before_first_view\": true");
    LOG(WARNING) << proto::Role_Name(role) << " " << rank << " (node " << id
                 << ") registered anew with this restarted scheduler: it replaces its rank's "
                    "earlier node, and is answered again as a replacement";
    hooks_.send(id, reply);
    member.answer = reply.meta;
  }
}

int Registration::FreeRank(proto::Role role, const std::set<int>& taken, bool join) const {
  if (role == proto::SERVER && !join) {
    for (const auto& [rank, since] : cluster_->server_vacant) {
      if (!taken.count(rank)) return rank;
    }
  }
  // A joining server takes no rank a key range still names (a vacant one's,
  // or a drained one's still leaving).
  int rank = 0;
  // Ranks 0 .. size - 1 all taken (the usual case, as nodes register): the
  // search starts past them, not at 0 (which made a storm of N
  // registrations O(N^2)).
  if (!taken.empty() && *taken.begin() == 0 &&
      *taken.rbegin() == static_cast<int>(taken.size()) - 1) {
    rank = static_cast<int>(taken.size());
  }
  while (taken.count(rank) ||
         (join && (cluster_->server_vacant.count(rank) || cluster_->chains.Names(rank))))
    ++rank;
  return rank;
}

std::string Registration::AdmissionRefusal(const proto::NodeInfo& node, const std::set<int>& taken,
                                           bool join) const {
  const bool server = node.role() == proto::SERVER;
  const int expected = server ? cluster_->num_servers : cluster_->num_workers;
  const std::string role = proto::Role_Name(node.role());
  if (join) {
    if (!cluster_->published) {
      return "--join adds a server to a running job, and this job has not started: start its "
             "first servers without --join";
    }
    if (node.rank() > kMaxServerRank) {
      return "server rank " + std::to_string(node.rank()) + " is above " +
             std::to_string(kMaxServerRank);
    }
    if (node.rank() >= 0 &&
        (taken.count(node.rank()) || cluster_->server_vacant.count(node.rank()) ||
         cluster_->chains.Names(node.rank()))) {
      return "server rank " + std::to_string(node.rank()) +
             " is taken, or a key range still names it: a joining server needs a new rank "
             "(or none, for the next free one)";
    }
    const int servers =
        static_cast<int>(cluster_->server_ranks.size() + cluster_->server_vacant.size()) + 1;
    if (servers > cluster_->chains.num_ranges()) {
      return "the job has " + std::to_string(cluster_->chains.num_ranges()) +
             " key range(s), too few for " + std::to_string(servers) +
             " servers (each holds at least one): start it with a larger --key_ranges to let "
             "more servers join";
    }
    return "";
  }
  if (node.rank() >= 0 && node.rank() < expected && taken.count(node.rank())) {
    // Perhaps held by a worker that has died but is not yet found silent: the
    // node asks again.
    return role + " rank " + std::to_string(node.rank()) + " is taken";
  }
  if (static_cast<int>(taken.size()) >= expected) {
    return "the cluster already has its " + std::to_string(expected) + " " + role + "(s)" +
           (server && cluster_->published ? " (start a server with --join to add one)" : "");
  }
  // A node of an earlier run of this scheduler keeps its id (servers key
  // their dedupe windows and clocks by it) and its rank.
  if (node.id() > 0 && (cluster_->members.count(node.id()) || cluster_->removed.count(node.id()))) {
    return "node id " + std::to_string(node.id()) + " is in use or left the cluster";
  }
  // After servers joined and were drained the ranks need not be 0..n-1: a
  // vacant rank, or one an earlier run's view names, is the job's too.
  const bool known_rank =
      server && (cluster_->server_vacant.count(node.rank()) || (node.id() > 0 && node.rank() >= 0));
  if (node.rank() >= expected && !known_rank) {
    return role + " rank " + std::to_string(node.rank()) + " is outside 0.." +
           std::to_string(expected - 1);
  }
  if (server && node.rank() >= 0 && taken.count(node.rank())) {
    return role + " rank " + std::to_string(node.rank()) + " is taken";
  }
  return "";
}

bool Registration::ReplacedWhileAway(const proto::NodeInfo& node,
                                     const std::set<int>& taken) const {
  // A worker's view names no worker, so a restarted scheduler that had only
  // workers' views back did not know this node held its rank when a new node
  // took it (ReplaceEarlierHolders). The answer tells the node alone (it goes
  // on the request's connection); nothing is kept of a claim anyone can make.
  return earlier_view_.epoch() > 0 && node.role() == proto::WORKER && node.id() > 0 &&
         node.rank() >= 0 && taken.count(node.rank()) > 0 && !cluster_->members.count(node.id()) &&
         !cluster_->removed.count(node.id());
}

std::string Registration::RejoinRefusal(const Message& request) const {
  const proto::NodeInfo& node = request.meta.node();
  const proto::ClusterView& known = request.meta.known_view();
  const std::string who = "node " + std::to_string(node.id()) + " registering again";
  // Views come one at a time: 2^40 of them would take 35,000 years at one a second.
  constexpr uint64_t kMaxEpoch = uint64_t{1} << 40;
  if (known.epoch() != request.meta.epoch() || known.epoch() > kMaxEpoch) {
    return who + ": its view epoch " + std::to_string(known.epoch()) + " (sent with epoch " +
           std::to_string(request.meta.epoch()) + ") is not one this job can have reached";
  }
  if (known.workers_omitted() && node.role() == proto::WORKER) {
    // A worker's view lists no worker (the workers' form): its rank must be
    // one of the view's.
    if (node.rank() < 0 || node.rank() >= known.num_workers()) {
      return who + ": its view (a worker's, " + std::to_string(known.num_workers()) +
             " worker(s)) has no WORKER " + std::to_string(node.rank());
    }
  } else if (std::none_of(known.nodes().begin(), known.nodes().end(),
                          [&](const proto::NodeInfo& listed_node) {
                            return listed_node.id() == node.id() &&
                                   listed_node.role() == node.role() &&
                                   listed_node.rank() == node.rank();
                          })) {
    return who + ": its view does not name it as " + proto::Role_Name(node.role()) + " " +
           std::to_string(node.rank());
  }
  try {
    cluster_->chains.CheckFits(known);
  } catch (const Error& e) {
    return who + ": " + e.what();
  }
  return "";
}

bool Registration::TakesOver(int rank, proto::WorkerCursor* resume) const {
  // A worker taking over the rank of one that left resumes where its last
  // progress report left off.
  const OrphanedShares::Vacancy* vacancy = shares_->FindVacancy(rank);
  if (!vacancy) return false;
  *resume = vacancy->cursor;
  resume->set_rank(rank);
  LOG(INFO) << "worker " << rank << " is replaced after " << MonotonicSeconds() - vacancy->since
            << " s; it resumes at epoch " << resume->epoch() << " after " << resume->batches()
            << " minibatch(es)"
            << (resume->epoch_done() ? " (its share of that epoch is done)" : "");
  return true;
}

Member Registration::NewMember(const Message& request, int rank) {
  const proto::NodeInfo& node = request.meta.node();
  const bool rejoin = node.id() > 0;
  Member member;
  member.info.set_role(node.role());
  member.info.set_id(rejoin ? node.id() : next_id_++);
  if (rejoin) {
    next_id_ = std::max(next_id_, node.id() + 1);
    // The next view must be newer than the one the nodes have.
    cluster_->view.set_epoch(std::max<uint64_t>(cluster_->view.epoch(), request.meta.epoch()));
    // Its key ranges too: backups may have been promoted since the start.
    try {
      cluster_->chains.Adopt(request.meta.known_view());
      cluster_->lost.Adopt(request.meta.known_view());
    } catch (const Error& e) {
      LOG(WARNING) << "ignored the key ranges node " << node.id() << " knows: " << e.what();
    }
  }
  member.info.set_rank(rank);
  member.info.set_address(node.address());
  member.route = request.route;
  member.rejoined = rejoin;
  // The digest of the route, not the node's claim: what its peers check its
  // data messages against (Node::OnSendersConnection).
  member.info.set_route_digest(RouteDigest(request.route));
  member.last_heartbeat = MonotonicSeconds();
  return member;
}

void Registration::AnswerRegistration(const Member& member, bool rejoin,
                                      const proto::WorkerCursor* resume, uint64_t nonce, bool join,
                                      const proto::HeldCopy* held) {
  const int rank = member.info.rank();
  Message reply = ControlMessage(proto::REGISTER);
  *reply.meta.mutable_node() = member.info;
  // The number the node put in its REGISTER: proof for the node that this
  // answer comes from whoever received it at the scheduler's address.
  reply.meta.set_sequence(nonce);
  if (resume) *reply.meta.mutable_cursor() = *resume;
  // A server taking a departed one's rank. A scheduler started again knows
  // the chains (from the nodes' views) but not who left before it started:
  // once the job has chains, a server that registers anew replaces one too.
  // Before a restarted scheduler's first view, ReplaceEarlierHolders decides
  // (the nodes still coming back may name a holder of the rank).
  const bool server_returns =
      member.info.role() == proto::SERVER && !rejoin && !join &&
      (cluster_->server_vacant.count(rank) > 0 ||
       (cluster_->chains.started() && (cluster_->published || earlier_view_.epoch() == 0)));
  membership_->Record("join", member.info,
                      std::string("\"rejoin\": ") + (rejoin ? "true" : "false") +
                          ", \"replaces\": " + (resume || server_returns ? "true" : "false") +
                          (join ? ", \"joins\": true" : ""));
  if (server_returns) ReplaceServer(rank, &reply, held);
  hooks_.send(member.info.id(), reply);
  cluster_->members.at(member.info.id()).answer = reply.meta;
}

std::string Registration::RebuildWait(int rank, const proto::HeldCopy* held) const {
  if (!cluster_->lost.any()) return "";
  std::set<size_t> in_copy;
  if (held) {
    for (const proto::RangePushes& entry : held->ranges()) in_copy.insert(entry.range());
  }
  const double now = WallSeconds();
  for (size_t range : cluster_->chains.HeldAlone(rank)) {
    if (!cluster_->lost.Lost(range) || in_copy.count(range)) continue;
    const LostRange& loss = cluster_->lost.ranges().at(range);
    if (!loss.rebuilt_from.empty()) continue;  // rebuilt already: not waiting
    const double left = loss.since + rebuild_wait_s_ - now;
    if (left <= 0) continue;
    for (const auto& [former_rank, former] : cluster_->former_holders) {
      if (former_rank == rank || !former.ranges.count(range) ||
          cluster_->server_ranks.count(former_rank)) {
        continue;
      }
      char seconds[32];
      snprintf(seconds, sizeof(seconds), "%g", rebuild_wait_s_);
      return "key range " + std::to_string(range) + " lost every replica, and server " +
             std::to_string(former_rank) + " (node " + std::to_string(former.id) +
             "), removed while it may still run, held it: for up to " + seconds +
             " s after the loss (--rebuild_wait) the range waits for that server to come back "
             "with its copy before this replacement rebuilds it from the latest checkpoint; "
             "try again";
    }
  }
  return "";
}

std::vector<size_t> Registration::UseHeldCopy(int rank, const proto::HeldCopy& held,
                                              Message* reply) {
  auto former = cluster_->former_holders.find(rank);
  if (former == cluster_->former_holders.end() || former->second.id != held.node_id()) {
    LOG(WARNING) << "server " << rank << " brought a copy of its ranges (checkpoint "
                 << held.checkpoint() << ") that this scheduler did not see it leave with: "
                 << "not used";
    return {};
  }
  std::string uri;
  const std::string latest = hooks_.latest_checkpoint(&uri);
  if (latest != former->second.checkpoint_then) {
    LOG(WARNING) << "server " << rank << "'s copy of its ranges predates checkpoint " << latest
                 << ": the checkpoint is used";
    return {};
  }
  std::map<size_t, uint64_t> pushes;  // the ranges to rebuild from the copy
  for (const proto::RangePushes& entry : held.ranges()) {
    const size_t range = entry.range();
    if (range >= static_cast<size_t>(cluster_->chains.num_ranges()) ||
        !cluster_->lost.Lost(range) || !former->second.ranges.count(range) ||
        !cluster_->lost.ranges().at(range).rebuilt_from.empty()) {
      continue;
    }
    const std::vector<size_t> holders =
        cluster_->chains.HeldAlone(cluster_->lost.ranges().at(range).rank);
    if (std::find(holders.begin(), holders.end(), range) == holders.end()) continue;
    pushes[range] = entry.pushes();
  }
  // One source per replacement: the copy only if it covers every range the
  // rank would hold alone.
  for (size_t range : cluster_->chains.HeldAlone(rank)) {
    if (!pushes.count(range)) return {};
  }
  if (pushes.empty()) return {};
  std::vector<size_t> rebuilt;
  for (const auto& [range, copied] : pushes) {
    cluster_->chains.Hand(range, rank);
    const LostRange& loss = cluster_->lost.ranges().at(range);
    // Counts travel with the rows (RangePushes), so the last holder's count
    // less the copy's is what the copy lacks (at least: the last holder may
    // have applied more after its last report).
    const int64_t missing =
        loss.pushes < 0 ? -1 : std::max<int64_t>(0, loss.pushes - static_cast<int64_t>(copied));
    cluster_->lost.Rebuilt(range, "server " + std::to_string(rank) + "'s copy", missing);
    proto::NodeInfo holder;
    holder.set_role(proto::SERVER);
    holder.set_rank(rank);
    holder.set_id(held.node_id());
    membership_->Record(
        "range_rebuilt", holder,
        "\"range\": " + std::to_string(range) + ", \"from\": \"held_copy\"" +
            ", \"pushes_in_copy\": " + std::to_string(copied) +
            ", \"pushes_lost_at_least\": " + (missing >= 0 ? std::to_string(missing) : "null"));
    LOG(WARNING) << "key range " << range << " is rebuilt from the copy server " << rank
                 << " kept when it was removed (" << copied << " push(es)) instead of from "
                 << (latest.empty() ? "initial values" : "checkpoint " + latest)
                 << (missing >= 0
                         ? ": " + std::to_string(missing) + " acknowledged push(es) by server " +
                               std::to_string(loss.rank) +
                               "'s last report are lost (those after the copy was "
                               "taken), and any it applied after that report"
                         : "");
    rebuilt.push_back(range);
  }
  reply->meta.set_checkpoint_uri(held.uri());
  reply->meta.set_checkpoint(held.checkpoint());
  return rebuilt;
}

void Registration::ReplaceServer(int rank, Message* reply, const proto::HeldCopy* held) {
  const std::vector<size_t> from_copy =
      held ? UseHeldCopy(rank, *held, reply) : std::vector<size_t>{};
  auto vacant = cluster_->server_vacant.find(rank);
  std::string what = "server " + std::to_string(rank) + " is replaced";
  if (vacant != cluster_->server_vacant.end()) {
    what += " after " + std::to_string(MonotonicSeconds() - vacant->second) + " s";
    cluster_->server_vacant.erase(vacant);
  } else {
    what += " (it left before this scheduler started)";
  }
  reply->meta.set_replaces(true);
  // Ranges the rank holds alone come from the latest checkpoint, and it is
  // their primary again; every other range it started in takes it back at the
  // end of its chain once its primary is live (the promoted primaries stay).
  const std::vector<size_t> held_alone = cluster_->chains.HeldAlone(rank);
  const std::string alone = JoinRanges(held_alone);
  RangeChains::Additions added = cluster_->chains.Repair(cluster_->server_ranks);
  std::string copied;
  std::vector<size_t> copied_lost;  // copies of rows rebuilt after a loss
  for (const auto& [range, predecessor] : added[rank]) {
    copied += (copied.empty() ? "" : ", ") + std::to_string(range) + " (from server " +
              std::to_string(predecessor) + ")";
    if (cluster_->lost.Lost(range)) copied_lost.push_back(range);
  }
  const std::string waiting = JoinRanges(cluster_->chains.Missing(rank));
  if (!copied.empty()) what += "; it copies key range(s) " + copied + " from live replicas";
  if (!waiting.empty()) {
    what += "; key range(s) " + waiting + " wait for their primary's replacement first";
  }
  if (alone.empty()) {
    // Only a replacement copying whole replicas of ranges never lost loses
    // nothing; a range lost before is copied as it was rebuilt.
    if (!copied_lost.empty()) {
      LOG(WARNING) << what << "; key range(s) " << JoinRanges(copied_lost)
                   << " lost every replica earlier in the job: it copies their rebuilt rows";
    } else {
      LOG(INFO) << what << (waiting.empty() ? "; nothing was lost" : "");
    }
    return;
  }
  if (!from_copy.empty()) {
    LOG(WARNING) << what << "; it restores key range(s) " << alone
                 << " from the copy it kept when it was removed";
    return;
  }
  std::string uri;
  const std::string latest = hooks_.latest_checkpoint(&uri);
  for (size_t range : held_alone) {
    cluster_->lost.Rebuilt(range, latest.empty() ? "initial values" : "checkpoint " + latest);
  }
  if (!latest.empty()) {
    reply->meta.set_checkpoint_uri(uri);
    reply->meta.set_checkpoint(latest);
    LOG(WARNING) << what << "; it restores key range(s) " << alone << " from checkpoint " << latest
                 << ": updates to them since that checkpoint are lost";
  } else {
    LOG(WARNING) << what << "; no checkpoint to restore key range(s) " << alone
                 << " from (--checkpoint_uri): they start over from their initial values";
  }
}

}  // namespace keel
