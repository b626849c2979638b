#include "server/shard_copy.h"

#include <gtest/gtest.h>

#include "base/error.h"
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
  Message message = EncodeShardCopy(TwoTables());
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

TEST(ShardCopy, NamesTheRangeAndSenderOfAFrameCountThatDisagrees) {
  Message message = EncodeShardCopy(TwoTables());
  message.meta.set_sender(2);
  message.frames.pop_back();
  const std::string error = ErrorOf([&] { DecodeShardCopy(message); });
  EXPECT_TRUE(Contains(error, "key range 3 from node 2")) << error;
  EXPECT_TRUE(Contains(error, "frames")) << error;
}

TEST(ShardCopy, RefusesRowsThatDisagreeWithTheirTable) {
  Message message = EncodeShardCopy(TwoTables());
  message.meta.mutable_shard()->mutable_tables(0)->set_rows(4);
  const std::string error = ErrorOf([&] { DecodeShardCopy(message); });
  EXPECT_TRUE(Contains(error, "says 4 rows")) << error;
}

TEST(ShardCopy, RefusesUnsortedKeysAndMissingSequences) {
  ShardState state = TwoTables();
  std::swap(state.tables[0].keys[0], state.tables[0].keys[1]);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(EncodeShardCopy(state)); }), "not sorted"));
  Message message = EncodeShardCopy(TwoTables());
  message.meta.mutable_shard()->set_sequence_counts(0, 5);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(message); }), "applied sequences"));
  message.meta.mutable_shard()->add_senders(9);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(message); }), "sequence counts"));
}

TEST(ShardCopy, RefusesARowNarrowerThanItsWeights) {
  Message message = EncodeShardCopy(TwoTables());
  message.meta.mutable_shard()->mutable_tables(1)->set_row_width(1);
  EXPECT_TRUE(Contains(ErrorOf([&] { DecodeShardCopy(message); }), "row width 1"));
}

}  // namespace
}  // namespace keel
