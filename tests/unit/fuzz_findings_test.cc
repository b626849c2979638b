// What the fuzz targets of tests/fuzz found, each as the input that showed it,
// decoded the way the target decoded it. Undefined behaviour shows only in the
// clang tree (scripts/sanitize_build.sh: UBSan makes it fatal); the expected
// outcomes hold in every build.
#include <gtest/gtest.h>

#include "io/checkpoint.h"

namespace keel {
namespace {

// fuzz_snapshot: a table of 0 rows read its keys and rows with memcpy into
// the null data() of an empty vector, undefined even for 0 bytes.
TEST(FuzzFindings, SnapshotWithAnEmptyTableDecodes) {
  ServerSnapshot snapshot;
  snapshot.server_rank = 2;
  SnapshotTable empty;
  empty.table = 3;
  empty.weight_width = 1;
  empty.row_width = 2;
  snapshot.tables.push_back(empty);
  const ServerSnapshot decoded = DecodeSnapshot(EncodeSnapshot(snapshot, nullptr), "empty.snap");
  ASSERT_EQ(decoded.tables.size(), 1u);
  EXPECT_EQ(decoded.tables[0].table, 3u);
  EXPECT_EQ(decoded.tables[0].row_width, 2u);
  EXPECT_TRUE(decoded.tables[0].keys.empty());
  EXPECT_TRUE(decoded.tables[0].rows.empty());
}

}  // namespace
}  // namespace keel
