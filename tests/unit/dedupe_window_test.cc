#include "server/dedupe_window.h"

#include <gtest/gtest.h>

namespace keel {
namespace {

TEST(DedupeWindow, RecognisesARepeatedSequence) {
  DedupeWindow window;
  EXPECT_TRUE(window.Insert(1));
  EXPECT_TRUE(window.Insert(3));
  EXPECT_FALSE(window.Insert(1));
  EXPECT_FALSE(window.Insert(3));
  EXPECT_TRUE(window.Insert(2));
}

TEST(DedupeWindow, ForgetsSequencesOlderThanItsCapacity) {
  DedupeWindow window(2);
  EXPECT_TRUE(window.Insert(1));
  EXPECT_TRUE(window.Insert(2));
  EXPECT_TRUE(window.Insert(3));
  EXPECT_FALSE(window.Insert(3));
  EXPECT_FALSE(window.Insert(2));
  EXPECT_TRUE(window.Insert(1));  // fell out of the window
}

using Verdict = DedupeWindow::Verdict;

TEST(DedupeWindow, TheFirstSequenceOfASenderSetsTheWindow) {
  DedupeWindow window;
  EXPECT_EQ(window.Record(uint64_t{1} << 50), Verdict::kNew);
  EXPECT_EQ(window.newest(), uint64_t{1} << 50);
}

TEST(DedupeWindow, RefusesASequenceFurtherAheadThanTheWindow) {
  DedupeWindow window;
  EXPECT_EQ(window.Record(100), Verdict::kNew);
  EXPECT_EQ(window.Record(100 + DedupeWindow::kMaxAhead + 1), Verdict::kOutOfWindow);
  EXPECT_EQ(window.newest(), 100u);  // a refused sequence does not move the window
  EXPECT_EQ(window.Record(100 + DedupeWindow::kMaxAhead), Verdict::kNew);
}

TEST(DedupeWindow, RefusesASequenceFurtherBehindThanTheWindow) {
  DedupeWindow window;
  const uint64_t newest = 100000;
  EXPECT_EQ(window.Record(newest), Verdict::kNew);
  EXPECT_EQ(window.Record(newest - DedupeWindow::kMaxBehind - 1), Verdict::kOutOfWindow);
  EXPECT_EQ(window.Record(newest - DedupeWindow::kMaxBehind), Verdict::kNew);
  EXPECT_EQ(window.Record(newest), Verdict::kRepeat);
}

}  // namespace
}  // namespace keel
