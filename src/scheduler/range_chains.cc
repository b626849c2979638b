#include "scheduler/range_chains.h"

#include <algorithm>

#include "base/error.h"

namespace keel {

RangeChains::RangeChains(int num_servers, int replication)
    : num_servers_(num_servers), replication_(replication) {}

void RangeChains::CheckFits(const proto::ClusterView& known) const {
  if (known.ranges_size() == 0) return;
  const RangeMap claimed = RangeMap::FromProto(known.ranges());
  const RangeMap start = RangeMap::Even(num_servers_, replication_);
  if (claimed.num_ranges() != start.num_ranges()) {
    throw MakeError("the view has ", claimed.num_ranges(), " key ranges; this job has ",
                    start.num_ranges());
  }
  for (size_t range = 0; range < start.num_ranges(); ++range) {
    if (claimed.begin(range) != start.begin(range)) {
      throw MakeError("key range ", range, " begins at ", claimed.begin(range), ", not at ",
                      start.begin(range));
    }
    for (int rank : claimed.Chain(range)) {
      if (!start.Holds(range, rank)) {
        throw MakeError("key range ", range, "'s chain names server ", rank,
                        ", which the range never was on");
      }
    }
  }
}

void RangeChains::Adopt(const proto::ClusterView& known) {
  if (known.epoch() <= epoch_ || known.ranges_size() == 0) return;
  CheckFits(known);
  ranges_ = RangeMap::FromProto(known.ranges());
  epoch_ = known.epoch();
}

RangeChains::Departure RangeChains::RemoveServer(int rank) {
  Departure departure;
  for (size_t range = 0; range < ranges_.num_ranges(); ++range) {
    std::vector<int> chain = ranges_.Chain(range);
    auto it = std::find(chain.begin(), chain.end(), rank);
    if (it == chain.end()) continue;
    const bool primary = it == chain.begin();
    chain.erase(it);
    std::set<int>& copying = copying_[range];
    copying.erase(rank);
    const bool held =
        std::any_of(chain.begin(), chain.end(), [&](int other) { return !copying.count(other); });
    if (!held) {
      departure.alone.push_back(range);
      ranges_ = ranges_.WithChain(range, {rank});
      copying.clear();
      continue;
    }
    ranges_ = ranges_.WithChain(range, chain);
    if (primary) departure.promoted.emplace_back(range, chain[0]);
  }
  return departure;
}

RangeChains::Additions RangeChains::Repair(const std::set<int>& live_ranks) {
  Additions added;
  if (ranges_.num_ranges() == 0) return added;
  const RangeMap start = RangeMap::Even(num_servers_, replication_);
  for (size_t range = 0; range < ranges_.num_ranges() && range < start.num_ranges(); ++range) {
    std::vector<int> chain = ranges_.Chain(range);
    if (!live_ranks.count(chain[0])) continue;  // nobody joins behind a departed primary
    for (int member : start.Chain(range)) {
      if (std::find(chain.begin(), chain.end(), member) != chain.end() ||
          !live_ranks.count(member)) {
        continue;
      }
      added[member].emplace_back(range, chain.back());
      chain.push_back(member);
      copying_[range].insert(member);
    }
    ranges_ = ranges_.WithChain(range, chain);
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

std::vector<size_t> RangeChains::Missing(int rank) const {
  std::vector<size_t> missing;
  const RangeMap start = RangeMap::Even(num_servers_, replication_);
  for (size_t range = 0; range < ranges_.num_ranges() && range < start.num_ranges(); ++range) {
    if (start.Holds(range, rank) && !ranges_.Holds(range, rank)) missing.push_back(range);
  }
  return missing;
}

void RangeChains::Synced(size_t range, int rank) {
  if (range >= ranges_.num_ranges()) {
    throw MakeError("key range ", range, " does not exist (the job has ", ranges_.num_ranges(),
                    ")");
  }
  auto copying = copying_.find(range);
  if (copying == copying_.end() || !copying->second.count(rank)) {
    throw MakeError("server ", rank, " is not copying key range ", range);
  }
  copying->second.erase(rank);
}

void RangeChains::ToView(const std::set<int>& live_ranks, proto::ClusterView* view) {
  if (epoch_ == 0) ranges_ = RangeMap::Even(num_servers_, replication_);
  Repair(live_ranks);
  epoch_ = view->epoch();
  ranges_.ToProto(view->mutable_ranges());
  for (int range = 0; range < view->ranges_size(); ++range) {
    for (int rank : copying_[range]) {
      if (ranges_.Holds(range, rank)) view->mutable_ranges(range)->add_copying(rank);
    }
  }
}

std::string JoinRanges(const std::vector<size_t>& ranges) {
  std::string text;
  for (size_t range : ranges) text += (text.empty() ? "" : ", ") + std::to_string(range);
  return text;
}

}  // namespace keel
