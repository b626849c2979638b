// Edit distance and the nearest name, behind every "did you mean".
#include "base/edit_distance.h"

#include <gtest/gtest.h>

namespace keel {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("epochs", "epochs"), 0u);
  EXPECT_EQ(EditDistance("epoch", "epochs"), 1u);
  EXPECT_EQ(EditDistance("epochs", "epoch"), 1u);
  EXPECT_EQ(EditDistance("epochs", "epocks"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(NearestName, FindsTheNearestCandidate) {
  EXPECT_EQ(NearestName("epoch", {"seed", "epochs", "echo_s"}), "epochs");
  EXPECT_EQ(NearestName("lanch", {"launch", "bench", "worker"}), "launch");
}

TEST(NearestName, FindsNoneWhenEveryCandidateIsFar) {
  EXPECT_EQ(NearestName("xyzzy", {"epochs", "seed"}), "");
  EXPECT_EQ(NearestName("a", {}), "");
}

TEST(NearestName, BreaksTiesAlphabetically) { EXPECT_EQ(NearestName("ab", {"ac", "aa"}), "aa"); }

}  // namespace
}  // namespace keel
