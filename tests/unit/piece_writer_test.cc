// PieceWriter: the bytes reach the sink in order, in pieces of at most the
// piece size (a larger array as it is), ending with their checksum.
#include "base/piece_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/checksum.h"

namespace keel {
namespace {

TEST(PieceWriter, HandsOverEveryByteInPiecesThenTheChecksumOfThemAll) {
  std::vector<std::string> pieces;
  const PieceWriter::Sink sink = [&](std::string_view piece) { pieces.emplace_back(piece); };
  PieceWriter writer(sink, 16);
  std::string expected;
  for (uint32_t i = 0; i < 10; ++i) {
    writer.Put(i);
    expected.append(reinterpret_cast<const char*>(&i), sizeof(i));
  }
  const std::string large(40, 'x');  // above the piece size: handed over as it is
  writer.Bytes(large.data(), large.size());
  expected += large;
  writer.Bytes(nullptr, 0);
  const uint64_t sum = writer.Finish();
  EXPECT_EQ(sum, Checksum64::Of(expected.data(), expected.size()));
  expected.append(reinterpret_cast<const char*>(&sum), sizeof(sum));

  std::string all;
  for (const std::string& piece : pieces) {
    EXPECT_TRUE(piece.size() <= 16 || piece == large) << piece.size();
    all += piece;
  }
  EXPECT_EQ(all, expected);
  EXPECT_EQ(writer.bytes(), expected.size());
  EXPECT_EQ(writer.checksum(), Checksum64::Of(expected.data(), expected.size()));
}

}  // namespace
}  // namespace keel
