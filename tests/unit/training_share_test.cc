// Which training files a worker reads: the whole job's channel split among
// every worker, or a host's own share split among the host's workers.
#include "worker/training_share.h"

#include <gtest/gtest.h>

#include <set>

#include "test_util.h"

namespace keel {
namespace {

class TrainingShareTest : public testing::TempFolderTest {
 protected:
  void SetUp() override {
    for (const char* name : {"a", "b", "c", "d"}) WriteFile(name, "1 1:1\n");
    options_.train = folder_;
  }

  std::set<std::string> Paths(int rank, int workers) const {
    std::set<std::string> paths;
    for (const InputSplit& split : TrainingShare(options_, rank, workers)) paths.insert(split.path);
    return paths;
  }

  TrainerOptions options_;
};

TEST_F(TrainingShareTest, TheJobsChannelIsSplitAmongEveryWorker) {
  EXPECT_EQ(WorkersSharingChannel(options_, 4), 4);
  EXPECT_EQ(Paths(1, 4), std::set<std::string>{folder_ + "/b"});
  EXPECT_EQ(Paths(3, 4), std::set<std::string>{folder_ + "/d"});
}

TEST_F(TrainingShareTest, AHostsOwnShareIsSplitAmongItsWorkers) {
  options_.split_within_host = 2;  // two workers a host: ranks 0-1 on one, 2-3 on the next
  EXPECT_EQ(WorkersSharingChannel(options_, 4), 2);
  EXPECT_EQ(Paths(0, 4), (std::set<std::string>{folder_ + "/a", folder_ + "/c"}));
  EXPECT_EQ(Paths(1, 4), (std::set<std::string>{folder_ + "/b", folder_ + "/d"}));
  // The next host's workers read their host's folder the same way.
  EXPECT_EQ(Paths(2, 4), Paths(0, 4));
  EXPECT_EQ(Paths(3, 4), Paths(1, 4));
}

}  // namespace
}  // namespace keel
