// View deltas (kv/view_delta.h): the change from one view to the next,
// applied to the first, gives the next exactly.
#include "kv/view_delta.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv/keys.h"

namespace keel {
namespace {

using google::protobuf::util::MessageDifferencer;

proto::ClusterView View(uint64_t epoch, int nodes, int ranges) {
  proto::ClusterView view;
  view.set_epoch(epoch);
  view.set_num_servers(2);
  view.set_num_workers(nodes - 2);
  for (int i = 0; i < nodes; ++i) {
    proto::NodeInfo* node = view.add_nodes();
    node->set_id(1000 + 2 * i);
    node->set_role(i < 2 ? proto::SERVER : proto::WORKER);
    node->set_rank(i < 2 ? i : i - 2);
    node->set_address("127.0.0.1:" + std::to_string(20000 + i));
    node->set_route_digest(std::string(32, static_cast<char>('a' + i % 26)));
  }
  for (int r = 0; r < ranges; ++r) {
    proto::KeyRange* range = view.add_ranges();
    range->set_begin(uint64_t{1} << 40 | static_cast<uint64_t>(r));
    range->set_server_rank(r % 2);
    range->add_home(r % 2);
  }
  return view;
}

// Diffs `base` and `next`, applies the delta to `base` and expects `next`.
void ExpectRoundTrip(const proto::ClusterView& base, const proto::ClusterView& next) {
  proto::ViewDelta delta;
  ASSERT_TRUE(DiffViews(base, next, &delta));
  proto::ClusterView applied;
  ASSERT_TRUE(ApplyViewDelta(base, delta, &applied));
  EXPECT_TRUE(MessageDifferencer::Equals(applied, next)) << "expected\n"
                                                         << next.DebugString() << "got\n"
                                                         << applied.DebugString();
}

TEST(ViewDelta, ANodeRemovedIsAFewBytesAndAppliesExactly) {
  const proto::ClusterView base = View(7, 1000, 1000);
  proto::ClusterView next = base;
  next.set_epoch(8);
  next.mutable_nodes()->DeleteSubrange(500, 1);
  ExpectRoundTrip(base, next);
  proto::ViewDelta delta;
  ASSERT_TRUE(DiffViews(base, next, &delta));
  EXPECT_EQ(delta.removed_nodes_size(), 1);
  EXPECT_EQ(delta.upserted_nodes_size(), 0);
  EXPECT_EQ(delta.changed_ranges_size(), 0);
  EXPECT_LT(delta.ByteSizeLong(), 64u);
  EXPECT_GT(next.ByteSizeLong(), 50000u);
}

TEST(ViewDelta, NodesAddedChangedAndRemovedTogether) {
  const proto::ClusterView base = View(3, 20, 8);  // ids 1000, 1002, ..., 1038
  proto::ClusterView next = base;
  next.set_epoch(4);
  next.clear_nodes();
  for (const proto::NodeInfo& node : base.nodes()) {
    if (node.id() == 1000) continue;  // removed: the lowest id
    proto::NodeInfo* kept = next.add_nodes();
    *kept = node;
    if (node.id() == 1010) kept->set_address("127.0.0.1:1");  // changed
    if (node.id() == 1012) {                                  // a new id between two
      proto::NodeInfo* added = next.add_nodes();
      *added = node;
      added->set_id(1013);
    }
  }
  proto::NodeInfo* last = next.add_nodes();  // a new highest id
  *last = base.nodes(0);
  last->set_id(100000);
  ExpectRoundTrip(base, next);
  proto::ViewDelta delta;
  ASSERT_TRUE(DiffViews(base, next, &delta));
  EXPECT_EQ(delta.removed_nodes_size(), 1);
  EXPECT_EQ(delta.upserted_nodes_size(), 3);
}

// The workers' form: no worker listed, servers whole, `num_workers` kept; a
// delta between whole views, cut, takes one form to the next (a worker
// added, one whose address changed, one removed, a server changed).
TEST(ViewDelta, TheWorkersFormOmitsWorkersAndItsDeltaTakesOneFormToTheNext) {
  const proto::ClusterView base = View(3, 20, 8);  // nodes 0 and 1 servers
  proto::ClusterView next = base;
  next.set_epoch(4);
  next.mutable_nodes()->DeleteSubrange(5, 1);
  next.mutable_nodes(7)->set_address("127.0.0.1:1");
  next.mutable_nodes(1)->set_address("127.0.0.1:2");
  proto::NodeInfo* added = next.add_nodes();
  *added = base.nodes(3);
  added->set_id(100000);
  proto::ClusterView cut_base = base, cut_next = next;
  CutWorkers(&cut_base);
  CutWorkers(&cut_next);
  EXPECT_TRUE(cut_next.workers_omitted());
  EXPECT_FALSE(next.workers_omitted());
  EXPECT_EQ(cut_next.num_workers(), next.num_workers());
  std::vector<proto::NodeInfo> servers;
  for (const proto::NodeInfo& node : next.nodes()) {
    if (node.role() != proto::WORKER) servers.push_back(node);
  }
  ASSERT_EQ(servers.size(), 2u);
  ASSERT_EQ(cut_next.nodes_size(), 2);
  for (int n = 0; n < 2; ++n) {
    EXPECT_TRUE(MessageDifferencer::Equals(cut_next.nodes(n), servers[n]))
        << cut_next.nodes(n).DebugString();
  }
  EXPECT_EQ(cut_next.ranges_size(), next.ranges_size());
  proto::ViewDelta delta;
  ASSERT_TRUE(DiffViews(base, next, &delta));
  CutWorkers(&delta);
  ASSERT_EQ(delta.upserted_nodes_size(), 1);  // the changed server alone
  EXPECT_EQ(delta.upserted_nodes(0).id(), next.nodes(1).id());
  proto::ClusterView applied;
  ASSERT_TRUE(ApplyViewDelta(cut_base, delta, &applied));
  EXPECT_TRUE(MessageDifferencer::Equals(applied, cut_next)) << "expected\n"
                                                             << cut_next.DebugString() << "got\n"
                                                             << applied.DebugString();
}

// A view's begins are left out when they are the even split (every view a
// job sends), and filled in again on receipt; any other view keeps them.
TEST(ViewDelta, EvenBeginsAreLeftOutAndFilledInAgain) {
  const RangeMap even = RangeMap::Even(3, 1, 1000);
  proto::ClusterView view = View(5, 4, 0);
  even.ToProto(view.mutable_ranges());
  const proto::ClusterView whole = view;
  LeaveOutEvenBegins(&view);
  EXPECT_TRUE(view.even_begins());
  for (const proto::KeyRange& range : view.ranges()) ASSERT_EQ(range.begin(), 0u);
  EXPECT_LT(view.ByteSizeLong() + 8000, whole.ByteSizeLong());  // about 10 bytes a range
  FillEvenBegins(&view);
  EXPECT_TRUE(MessageDifferencer::Equals(view, whole));
  EXPECT_EQ(RangeMap::FromProto(view.ranges()).begin(999), even.begin(999));
  // One begin off the split: the view goes whole.
  proto::ClusterView uneven = whole;
  uneven.mutable_ranges(7)->set_begin(uneven.ranges(7).begin() + 1);
  const proto::ClusterView kept = uneven;
  LeaveOutEvenBegins(&uneven);
  EXPECT_TRUE(MessageDifferencer::Equals(uneven, kept));
  FillEvenBegins(&uneven);
  EXPECT_TRUE(MessageDifferencer::Equals(uneven, kept));
}

TEST(ViewDelta, RangesAndFieldsChange) {
  const proto::ClusterView base = View(3, 6, 8);
  proto::ClusterView grown = base;
  grown.set_epoch(4);
  grown.mutable_ranges(2)->add_backups(1);
  grown.mutable_ranges(5)->add_copying(0);
  grown.add_ranges()->set_begin(99);
  grown.add_draining(1);
  grown.set_num_servers(3);
  grown.set_checkpoint_every(5);
  ExpectRoundTrip(base, grown);
  proto::ClusterView shrunk = base;
  shrunk.set_epoch(4);
  shrunk.mutable_ranges()->DeleteSubrange(6, 2);
  ExpectRoundTrip(base, shrunk);
}

TEST(ViewDelta, AppliesOnlyToItsBase) {
  const proto::ClusterView base = View(3, 6, 4);
  proto::ClusterView next = base;
  next.set_epoch(4);
  next.mutable_nodes()->DeleteSubrange(3, 1);
  proto::ViewDelta delta;
  ASSERT_TRUE(DiffViews(base, next, &delta));
  proto::ClusterView other = base;
  other.set_epoch(2);
  proto::ClusterView applied;
  EXPECT_FALSE(ApplyViewDelta(other, delta, &applied));
}

TEST(ViewDelta, RefusesARangeIndexPastTheRanges) {
  const proto::ClusterView base = View(3, 6, 4);
  proto::ViewDelta delta;
  delta.set_base_epoch(3);
  delta.mutable_fields()->set_epoch(4);
  delta.set_num_ranges(4);
  delta.add_changed_range_indexes(4);
  delta.add_changed_ranges();
  proto::ClusterView applied;
  EXPECT_FALSE(ApplyViewDelta(base, delta, &applied));
  delta.add_changed_range_indexes(0);  // more indexes than ranges
  EXPECT_FALSE(ApplyViewDelta(base, delta, &applied));
}

TEST(ViewDelta, DiffRefusesNodesOutOfIdOrder) {
  const proto::ClusterView base = View(3, 6, 4);
  proto::ClusterView next = base;
  next.set_epoch(4);
  next.mutable_nodes()->SwapElements(1, 2);
  proto::ViewDelta delta;
  EXPECT_FALSE(DiffViews(base, next, &delta));
}

}  // namespace
}  // namespace keel
