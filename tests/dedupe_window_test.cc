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

}  // namespace
}  // namespace keel
