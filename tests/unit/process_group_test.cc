// ProcessGroup::Spawn when the child cannot start: the forked child reports
// its errno on a pipe, and Spawn throws an error that names the process,
// the program and the reason.
#include <gtest/gtest.h>

#include <string>

#include "launch/launcher.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

TEST(ProcessGroupSpawn, AProgramThatDoesNotExistIsNamedWithTheReason) {
  ProcessGroup group;
  const std::string error =
      ErrorOf([&] { group.Spawn("worker 0", {"/nonexistent/keel-no-such-program"}); });
  EXPECT_EQ(error,
            "cannot start worker 0: /nonexistent/keel-no-such-program: No such file or directory");
}

// A cgroup folder whose cgroup.procs cannot be written (here a plain folder,
// where it does not exist): the child fails to join before it runs anything.
TEST(ProcessGroupSpawn, AChildThatCannotJoinItsCgroupIsNotStarted) {
  testing::TempFolder folder("cgroup");
  ProcessGroup group;
  group.SetCgroupFolder(folder.path());
  const std::string error = ErrorOf([&] { group.Spawn("server 1", {"true"}); });
  EXPECT_TRUE(Contains(error, "cannot start server 1: true: ")) << error;
  EXPECT_FALSE(group.Running("server 1"));
}

}  // namespace
}  // namespace keel
