// A server's command line as its rank's replacement (launch/start_over.h).
#include "launch/start_over.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace keel {
namespace {

TEST(StartOver, AReplacementTakesItsRankAndDropsEveryFormOfJoin) {
  const std::vector<std::string> argv = {"keel", "server", "--join", "-join", "--join=true",
                                         "--scheduler=h:1", "--joined_note"};
  EXPECT_EQ(AsReplacement(argv, 3),
            (std::vector<std::string>{"keel", "server", "--scheduler=h:1", "--joined_note",
                                      "--rank=3"}));
}

}  // namespace
}  // namespace keel
