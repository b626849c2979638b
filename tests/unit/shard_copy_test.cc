#include "server/shard_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "server/shard.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

ShardState TwoTables() {
  ShardState state;
  state.range = 3;
  SnapshotTable weights;
  weights.table = 0;
  weights.weight_width = 1;
  weights.row_width = 3;  // Adam: the weight, then two moments
  weights.keys = {5, 9, 400};
  weights.rows = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  SnapshotTable bias;
  bias.table = 1;
  bias.weight_width = 2;
  bias.row_width = 2;
  bias.keys = {77};
  bias.rows = {0.5f, -0.5f};
  state.tables = {weights, bias};
  state.applied = {{4, {10, 11, 13}}, {6, {}}, {7, {2}}};
  return state;
}

TEST(ShardCopy, RoundTripsRowsAndAppliedSequences) {
  Message message = EncodeShardCopy(TwoTables()).at(0);
  message.meta.set_sender(2);
  const ShardState back = DecodeShardCopy(message);
  const ShardState sent = TwoTables();
  EXPECT_EQ(back.range, 3u);
  ASSERT_EQ(back.tables.size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(back.tables[t].table, sent.tables[t].table);
    EXPECT_EQ(back.tables[t].weight_width, sent.tables[t].weight_width);
    EXPECT_EQ(back.tables[t].row_width, sent.tables[t].row_width);
    EXPECT_EQ(back.tables[t].keys, sent.tables[t].keys);
    EXPECT_EQ(back.tables[t].rows, sent.tables[t].rows);
  }
  EXPECT_EQ(back.applied, sent.applied);
}

TEST(ShardCopy, CarriesAdmissionCountersOnTheLastPageOnly) {
  ShardState state = TwoTables();
  RangeSketch sketch;
  sketch.depth = 4;
  sketch.width = 1024;
  sketch.counters.assign(4 * 1024, 0);
  sketch.counters[5] = 3;
  state.counters.emplace_back(7, sketch);
  const std::vector<Message> pages = EncodeShardCopy(state, /*page_bytes=*/64);
  ASSERT_GT(pages.size(), 1u);
  for (size_t p = 0; p + 1 < pages.size(); ++p) {
    EXPECT_TRUE(DecodeShardCopy(pages[p]).counters.empty()) << p;
  }
  const ShardState last = DecodeShardCopy(pages.back());
  ASSERT_EQ(last.counters.size(), 1u);
  EXPECT_EQ(last.counters[0].first, 7u);
  EXPECT_EQ(last.counters[0].second.counters, sketch.counters);
  // Counters of another size than announced are refused.
  Message bad = pages.back();
  bad.meta.mutable_shard()->mutable_counters(0)->set_width(1000);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(bad); }), "admission counters are said"));
}

TEST(ShardCopy, NamesTheRangeAndSenderOfAFrameCountThatDisagrees) {
  Message message = EncodeShardCopy(TwoTables()).at(0);
  message.meta.set_sender(2);
  message.frames.pop_back();
  const std::string error = ErrorOf([&] { DecodeShardCopy(message); });
  EXPECT_TRUE(Contains(error, "key range 3 from node 2")) << error;
  EXPECT_TRUE(Contains(error, "frames")) << error;
}

TEST(ShardCopy, RefusesRowsThatDisagreeWithTheirTable) {
  Message message = EncodeShardCopy(TwoTables()).at(0);
  message.meta.mutable_shard()->mutable_tables(0)->set_rows(4);
  const std::string error = ErrorOf([&] { DecodeShardCopy(message); });
  EXPECT_TRUE(Contains(error, "says 4 rows")) << error;
}

TEST(ShardCopy, RefusesUnsortedKeysAndMissingSequences) {
  ShardState state = TwoTables();
  std::swap(state.tables[0].keys[0], state.tables[0].keys[1]);
  EXPECT_TRUE(
      Contains(ErrorOf([&] { DecodeShardCopy(EncodeShardCopy(state).at(0)); }), "not sorted"));
  Message message = EncodeShardCopy(TwoTables()).at(0);
  message.meta.mutable_shard()->set_sequence_counts(0, 5);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(message); }), "applied sequences"));
  message.meta.mutable_shard()->add_senders(9);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(message); }), "sequence counts"));
}

TEST(ShardCopy, RefusesARowNarrowerThanItsWeights) {
  Message message = EncodeShardCopy(TwoTables()).at(0);
  message.meta.mutable_shard()->mutable_tables(1)->set_row_width(1);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(message); }), "row width 1"));
}

// Pages of `bytes` of rows, decoded and put back together.
ShardState Reassembled(const std::vector<Message>& pages) {
  ShardState whole;
  for (size_t p = 0; p < pages.size(); ++p) {
    const ShardState page = DecodeShardCopy(pages[p]);
    whole.range = page.range;
    for (const SnapshotTable& slice : page.tables) {
      auto table = std::find_if(whole.tables.begin(), whole.tables.end(),
                                [&](const SnapshotTable& t) { return t.table == slice.table; });
      if (table == whole.tables.end()) {
        whole.tables.push_back(slice);
        continue;
      }
      table->keys.insert(table->keys.end(), slice.keys.begin(), slice.keys.end());
      table->rows.insert(table->rows.end(), slice.rows.begin(), slice.rows.end());
    }
    whole.applied.insert(whole.applied.end(), page.applied.begin(), page.applied.end());
  }
  return whole;
}

TEST(ShardCopy, ComesInPagesOfAtMostThePageSizeWithTheSequencesLast) {
  // Table 0's rows are 8 + 3 x 4 = 20 bytes, table 1's 16: pages of 40
  // bytes hold two rows of table 0, then one of it and one of table 1.
  const std::vector<Message> pages = EncodeShardCopy(TwoTables(), 40);
  ASSERT_EQ(pages.size(), 2u);
  for (size_t p = 0; p < pages.size(); ++p) {
    const proto::ShardCopy& shard = pages[p].meta.shard();
    EXPECT_EQ(shard.page(), p);
    EXPECT_EQ(shard.more_pages(), p + 1 < pages.size());
    EXPECT_EQ(shard.senders_size(), p + 1 < pages.size() ? 0 : 3) << "sequences in the last only";
    size_t bytes = 0;
    for (const auto& table : shard.tables()) bytes += table.rows() * (8 + 4 * table.row_width());
    EXPECT_LE(bytes, 40u) << "page " << p;
  }
  const ShardState whole = Reassembled(pages);
  const ShardState sent = TwoTables();
  ASSERT_EQ(whole.tables.size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(whole.tables[t].keys, sent.tables[t].keys);
    EXPECT_EQ(whole.tables[t].rows, sent.tables[t].rows);
  }
  EXPECT_EQ(whole.applied, sent.applied);
}

TEST(ShardCopy, ARowLargerThanAPageGoesAloneAndAnEmptyRangeIsOnePage) {
  const std::vector<Message> pages = EncodeShardCopy(TwoTables(), 1);
  ASSERT_EQ(pages.size(), 4u) << "one row a page";
  EXPECT_EQ(Reassembled(pages).tables[0].keys, TwoTables().tables[0].keys);
  ShardState empty;
  empty.range = 2;
  SnapshotTable no_rows;
  no_rows.table = 4;
  no_rows.weight_width = 1;
  no_rows.row_width = 1;
  empty.tables = {no_rows};
  const std::vector<Message> one = EncodeShardCopy(empty, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_FALSE(one[0].meta.shard().more_pages());
  const ShardState back = DecodeShardCopy(one[0]);
  ASSERT_EQ(back.tables.size(), 1u) << "a table without rows is still described";
  EXPECT_EQ(back.tables[0].table, 4u);
}

// Two ranges, range 1 with server 2 in its chain and `mark` on it.
proto::ClusterView ViewWithRange1Marked(const std::string& mark) {
  proto::ClusterView view;
  view.add_ranges()->set_server_rank(0);
  proto::KeyRange* range = view.add_ranges();
  range->set_server_rank(1);
  range->add_backups(2);
  if (mark == "copying") range->add_copying(2);
  if (mark == "precopy") range->add_precopy(3);
  return view;
}

TEST(KeepsDepartedRecords, WhileAReplicaOfTheRangeWaitsForItsCopy) {
  Shard shard;
  EXPECT_TRUE(KeepsDepartedRecords(ViewWithRange1Marked("copying"), 1, shard));
  EXPECT_TRUE(KeepsDepartedRecords(ViewWithRange1Marked("precopy"), 1, shard));
  EXPECT_FALSE(KeepsDepartedRecords(ViewWithRange1Marked("copying"), 0, shard));
  EXPECT_FALSE(KeepsDepartedRecords(ViewWithRange1Marked(""), 1, shard));
}

TEST(KeepsDepartedRecords, WhileThisReplicaWaitsForItsCopyOrHoldsPushes) {
  Shard waiting;
  waiting.ready = false;
  EXPECT_TRUE(KeepsDepartedRecords(ViewWithRange1Marked(""), 1, waiting));
  Shard holding;
  holding.held.emplace_back();
  EXPECT_TRUE(KeepsDepartedRecords(ViewWithRange1Marked(""), 1, holding));
  // A range the view does not list (yet): nothing keeps them.
  EXPECT_FALSE(KeepsDepartedRecords(ViewWithRange1Marked(""), 5, Shard()));
}

}  // namespace
}  // namespace keel
