#include "scheduler/range_chains.h"

#include <algorithm>

#include "base/error.h"

namespace keel {

RangeChains::RangeChains(int num_servers, int replication, int num_ranges)
    : num_servers_(num_servers),
      replication_(replication),
      num_ranges_(num_ranges > 0 ? num_ranges : num_servers),
      start_(RangeMap::Even(num_servers, replication, num_ranges_)),
      home_(start_) {}

void RangeChains::CheckFits(const proto::ClusterView& known) const {
  if (known.ranges_size() == 0) return;
  const RangeMap claimed = RangeMap::FromProto(known.ranges());
  const RangeMap& start = start_;
  if (claimed.num_ranges() != start.num_ranges()) {
    throw MakeError("the view has ", claimed.num_ranges(), " key ranges; this job has ",
                    start.num_ranges());
  }
  for (size_t range = 0; range < start.num_ranges(); ++range) {
    if (claimed.begin(range) != start.begin(range)) {
      throw MakeError("key range ", range, " begins at ", claimed.begin(range), ", not at ",
                      start.begin(range));
    }
    // Servers join and are drained, so any rank may hold a range; but each
    // must be a server of that view, or the one a range waits for alone.
    const std::vector<int> chain = claimed.Chain(range);
    for (int rank : chain) {
      if (rank > kMaxServerRank) {
        throw MakeError("key range ", range, "'s chain names server ", rank, ", above ",
                        kMaxServerRank);
      }
      const bool member =
          std::any_of(known.nodes().begin(), known.nodes().end(), [&](const proto::NodeInfo& node) {
            return node.role() == proto::SERVER && node.rank() == rank;
          });
      if (!member && chain.size() > 1) {
        throw MakeError("key range ", range, "'s chain names server ", rank,
                        ", which is not a server in that view");
      }
    }
    // Its home: named, or (left out) its chain.
    const auto& named = known.ranges(static_cast<int>(range)).home();
    const std::vector<int> home =
        named.empty() ? chain : std::vector<int>(named.begin(), named.end());
    std::set<int> seen;
    for (int rank : home) {
      if (rank < 0 || rank > kMaxServerRank || !seen.insert(rank).second) {
        throw MakeError("key range ", range, "'s home names server ", rank,
                        ", which is out of range or named twice");
      }
    }
    if (static_cast<int>(home.size()) != replication_ + 1) {
      throw MakeError("key range ", range, "'s home", named.empty() ? " (its chain)" : "", " has ",
                      home.size(), " server(s); this job's ranges have ", replication_ + 1);
    }
  }
}

void RangeChains::Adopt(const proto::ClusterView& known) {
  if (known.epoch() <= epoch_ || known.ranges_size() == 0) return;
  CheckFits(known);
  ranges_ = RangeMap::FromProto(known.ranges());
  // The homes, as the earlier scheduler had them (a view names a range's
  // home only where it is not the range's chain).
  // And the moves under way: replicas still copying (not to be trimmed past
  // before their copy arrives) and servers still pre-copying.
  copying_.clear();
  precopy_.clear();
  precopied_.clear();
  moves_.clear();
  for (int range = 0; range < known.ranges_size(); ++range) {
    const proto::KeyRange& known_range = known.ranges(range);
    const auto& home = known_range.home();
    home_.SetChain(
        range, home.empty() ? ranges_.Chain(range) : std::vector<int>(home.begin(), home.end()));
    for (int rank : known_range.copying()) {
      if (ranges_.Holds(range, rank)) copying_[range].insert(rank);
    }
    for (int rank : known_range.precopy()) {
      if (home_.Holds(range, rank) && !ranges_.Holds(range, rank)) {
        precopy_[range].insert(rank);
        moves_[range].insert(rank);
      }
    }
  }
  epoch_ = known.epoch();
}

RangeChains::Departure RangeChains::RemoveServer(int rank) {
  Departure departure;
  for (size_t range = 0; range < ranges_.num_ranges(); ++range) {
    std::vector<int> chain = ranges_.Chain(range);
    auto it = std::find(chain.begin(), chain.end(), rank);
    if (it == chain.end()) {
      precopy_[range].erase(rank);
      precopied_[range].erase(rank);
      continue;
    }
    const bool primary = it == chain.begin();
    chain.erase(it);
    std::set<int>& copying = copying_[range];
    copying.erase(rank);
    precopy_[range].erase(rank);
    precopied_[range].erase(rank);
    const bool held =
        std::any_of(chain.begin(), chain.end(), [&](int other) { return !copying.count(other); });
    if (!held) {
      departure.alone.push_back(range);
      ranges_.SetChain(range, {rank});
      copying.clear();
      continue;
    }
    ranges_.SetChain(range, chain);
    if (primary) departure.promoted.emplace_back(range, chain[0]);
  }
  return departure;
}

RangeChains::Additions RangeChains::Repair(const std::set<int>& live_ranks) {
  Additions added;
  if (ranges_.num_ranges() == 0) return added;
  for (size_t range = 0; range < ranges_.num_ranges() && range < home_.num_ranges(); ++range) {
    std::vector<int> chain = ranges_.Chain(range);
    for (std::map<size_t, std::set<int>>* moving : {&moves_, &precopy_, &precopied_}) {
      std::set<int>& ranks = (*moving)[range];
      for (auto it = ranks.begin(); it != ranks.end();) {
        it = home_.Holds(range, *it) ? std::next(it) : ranks.erase(it);  // moved elsewhere since
      }
    }
    if (!live_ranks.count(chain[0])) continue;  // nobody joins behind a departed primary
    for (int member : home_.Chain(range)) {
      if (std::find(chain.begin(), chain.end(), member) != chain.end() ||
          !live_ranks.count(member)) {
        continue;
      }
      if (moves_[range].count(member) && !precopied_[range].count(member)) {
        precopy_[range].insert(member);  // copies the range before it joins the chain
        continue;
      }
      added[member].emplace_back(range, chain.back());
      chain.push_back(member);
      copying_[range].insert(member);
      moves_[range].erase(member);
      precopy_[range].erase(member);
      precopied_[range].erase(member);
    }
    ranges_.SetChain(range, chain);
  }
  return added;
}

std::vector<size_t> RangeChains::HeldAlone(int rank) const {
  std::vector<size_t> alone;
  for (size_t range = 0; range < ranges_.num_ranges(); ++range) {
    if (ranges_.Chain(range) == std::vector<int>{rank}) alone.push_back(range);
  }
  return alone;
}

std::vector<size_t> RangeChains::WholeReplicas(int rank) const {
  std::vector<size_t> whole;
  for (size_t range = 0; range < ranges_.num_ranges(); ++range) {
    auto copying = copying_.find(range);
    if (ranges_.Holds(range, rank) && (copying == copying_.end() || !copying->second.count(rank))) {
      whole.push_back(range);
    }
  }
  return whole;
}

void RangeChains::Hand(size_t range, int rank) {
  if (range >= ranges_.num_ranges()) {
    throw MakeError("key range ", range, " does not exist (the job has ", ranges_.num_ranges(),
                    ")");
  }
  if (ranges_.Chain(range).size() != 1) {
    throw MakeError("key range ", range, " has live replicas: it cannot be handed to server ",
                    rank);
  }
  ranges_.SetChain(range, {rank});
  copying_[range].clear();
}

std::vector<size_t> RangeChains::Missing(int rank) const {
  std::vector<size_t> missing;
  for (size_t range = 0; range < ranges_.num_ranges() && range < home_.num_ranges(); ++range) {
    if (home_.Holds(range, rank) && !ranges_.Holds(range, rank)) missing.push_back(range);
  }
  return missing;
}

void RangeChains::TakeReport(size_t range, int rank, std::map<size_t, std::set<int>>* from,
                             const char* doing) {
  if (range >= ranges_.num_ranges()) {
    throw MakeError("key range ", range, " does not exist (the job has ", ranges_.num_ranges(),
                    ")");
  }
  auto found = from->find(range);
  if (found == from->end() || !found->second.count(rank)) {
    throw MakeError("server ", rank, " is not ", doing, " key range ", range);
  }
  found->second.erase(rank);
}

void RangeChains::Precopied(size_t range, int rank) {
  TakeReport(range, rank, &precopy_, "pre-copying");
  precopied_[range].insert(rank);
}

void RangeChains::Synced(size_t range, int rank) { TakeReport(range, rank, &copying_, "copying"); }

void RangeChains::ToView(const std::set<int>& live_ranks, proto::ClusterView* view) {
  if (epoch_ == 0) ranges_ = home_;
  Repair(live_ranks);
  epoch_ = view->epoch();
  ranges_.ToProto(view->mutable_ranges());
  for (int range = 0; range < view->ranges_size(); ++range) {
    if (home_.server(range) != ranges_.server(range) ||
        home_.backups(range) != ranges_.backups(range)) {
      for (int rank : home_.Chain(range)) view->mutable_ranges(range)->add_home(rank);
    }
    for (int rank : precopy_[range]) view->mutable_ranges(range)->add_precopy(rank);
    for (int rank : copying_[range]) {
      if (ranges_.Holds(range, rank)) view->mutable_ranges(range)->add_copying(rank);
    }
  }
}

std::map<int, int> RangeChains::HomeCounts(const std::set<int>& ranks) const {
  std::map<int, int> counts;
  for (int rank : ranks) counts[rank] = 0;
  for (size_t range = 0; range < home_.num_ranges(); ++range) {
    for (int rank : home_.Chain(range)) {
      if (counts.count(rank)) ++counts[rank];
    }
  }
  return counts;
}

void RangeChains::Balance(const std::set<int>& ranks, std::set<size_t>* changed) {
  std::map<int, int> counts = HomeCounts(ranks);
  while (true) {
    // The rank holding the most (the highest on a tie) gives one range to the
    // one holding the fewest (the lowest on a tie), until they differ by one.
    auto most = counts.begin(), fewest = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (it->second >= most->second) most = it;
      if (it->second < fewest->second) fewest = it;
    }
    if (most->second - fewest->second <= 1) return;
    // The last such range: a joiner takes the upper ranges of each server.
    size_t moved = home_.num_ranges();
    for (size_t range = home_.num_ranges(); range-- > 0;) {
      if (home_.Holds(range, most->first) && !home_.Holds(range, fewest->first)) {
        moved = range;
        break;
      }
    }
    if (moved == home_.num_ranges()) return;  // cannot happen: `most` holds more
    std::vector<int> chain = home_.Chain(moved);
    chain.erase(std::find(chain.begin(), chain.end(), most->first));
    chain.push_back(fewest->first);  // where Repair will put it
    home_.SetChain(moved, chain);
    if (precopy_moves_) moves_[moved].insert(fewest->first);
    --most->second;
    ++fewest->second;
    changed->insert(moved);
  }
}

std::vector<size_t> RangeChains::Join(int rank, const std::set<int>& ranks) {
  if (static_cast<int>(ranks.size()) > num_ranges_) {
    throw MakeError("the job has ", num_ranges_, " key ranges, too few for ", ranks.size(),
                    " servers (start it with a larger --key_ranges to let more servers join)");
  }
  if (!ranks.count(rank)) throw MakeError("server ", rank, " joins but is not among the ranks");
  std::set<size_t> changed;
  Balance(ranks, &changed);
  num_servers_ = static_cast<int>(ranks.size());
  return {changed.begin(), changed.end()};
}

std::vector<size_t> RangeChains::Drain(int rank, const std::set<int>& ranks) {
  if (ranks.count(rank)) throw MakeError("server ", rank, " is drained but still among the ranks");
  if (static_cast<int>(ranks.size()) < replication_ + 1) {
    throw MakeError("draining server ", rank, " would leave ", ranks.size(),
                    " server(s), too few for a key range and its ", replication_,
                    " backup(s) (--replication)");
  }
  std::set<size_t> changed;
  std::map<int, int> counts = HomeCounts(ranks);
  for (size_t range = 0; range < home_.num_ranges(); ++range) {
    if (!home_.Holds(range, rank)) continue;
    std::vector<int> chain = home_.Chain(range);
    chain.erase(std::find(chain.begin(), chain.end(), rank));
    int heir = -1;
    for (const auto& [candidate, count] : counts) {
      if (std::find(chain.begin(), chain.end(), candidate) != chain.end()) continue;
      if (heir < 0 || count < counts[heir]) heir = candidate;
    }
    chain.push_back(heir);  // there is one: ranks has more members than the chain
    if (precopy_moves_) moves_[range].insert(heir);
    ++counts[heir];
    home_.SetChain(range, chain);
    changed.insert(range);
  }
  Balance(ranks, &changed);
  num_servers_ = static_cast<int>(ranks.size());
  return {changed.begin(), changed.end()};
}

std::vector<std::pair<size_t, int>> RangeChains::Trim() {
  std::vector<std::pair<size_t, int>> removed;
  for (size_t range = 0; range < ranges_.num_ranges() && range < home_.num_ranges(); ++range) {
    if (!copying_[range].empty()) continue;
    const std::vector<int> home = home_.Chain(range);
    if (!std::all_of(home.begin(), home.end(),
                     [&](int rank) { return ranges_.Holds(range, rank); })) {
      continue;  // a member of its home is not there yet (or left)
    }
    std::vector<int> chain = ranges_.Chain(range);
    std::vector<int> kept;
    for (int rank : chain) {
      if (home_.Holds(range, rank)) {
        kept.push_back(rank);
      } else {
        removed.emplace_back(range, rank);
      }
    }
    if (kept.size() != chain.size()) ranges_.SetChain(range, kept);
  }
  return removed;
}

bool RangeChains::Names(int rank) const {
  for (size_t range = 0; range < ranges_.num_ranges(); ++range) {
    if (ranges_.Holds(range, rank)) return true;
  }
  for (size_t range = 0; range < home_.num_ranges(); ++range) {
    if (home_.Holds(range, rank)) return true;
  }
  return false;
}

size_t RangeChains::Moving() const {
  size_t moving = 0;
  for (size_t range = 0; range < ranges_.num_ranges() && range < home_.num_ranges(); ++range) {
    std::vector<int> chain = ranges_.Chain(range), home = home_.Chain(range);
    std::sort(chain.begin(), chain.end());
    std::sort(home.begin(), home.end());
    moving += chain != home;
  }
  return moving;
}

std::string JoinRanges(const std::vector<size_t>& ranges) {
  std::string text;
  for (size_t range : ranges) text += (text.empty() ? "" : ", ") + std::to_string(range);
  return text;
}

}  // namespace keel
