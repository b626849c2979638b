// deploy/kubernetes: the manifests pass yamllint, and every container's
// command, as its pod would run it (tests/k8s_commands.py prints them),
// passes `keel --check_flags`. Needs no root: python3 with PyYAML and
// yamllint, which scripts/setup.sh installs.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace keel::testing {
namespace {

// One container of the manifests, as k8s_commands.py prints it.
struct Container {
  std::string name;               // KIND/NAME/CONTAINER
  std::vector<std::string> env;   // NAME=VALUE, the pod's environment
  std::vector<std::string> args;  // the command: keel ROLE FLAGS...
};

// The containers of k8s_commands.py's output: blocks of "container NAME",
// "env NAME=VALUE", "arg WORD" lines, each closed by "end".
std::vector<Container> ParseContainers(const std::string& listing) {
  std::vector<Container> containers;
  Container current;
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("container ", 0) == 0) {
      current = Container{line.substr(10), {}, {}};
    } else if (line.rfind("env ", 0) == 0) {
      current.env.push_back(line.substr(4));
    } else if (line.rfind("arg ", 0) == 0) {
      current.args.push_back(line.substr(4));
    } else if (line == "end") {
      containers.push_back(current);
    }
  }
  return containers;
}

// `container`'s command run here with only the pod's environment, the keel
// under test in place of the image's, and --check_flags added.
std::vector<std::string> CheckFlagsCommand(const Container& container) {
  std::vector<std::string> argv = {"/usr/bin/env", "-i"};
  argv.insert(argv.end(), container.env.begin(), container.env.end());
  argv.push_back(KeelBinary());
  argv.insert(argv.end(), container.args.begin() + 1, container.args.end());
  argv.push_back("--check_flags");
  return argv;
}

TEST(KubernetesManifests, PassYamllint) {
  const std::string yamllint = SystemTool("yamllint");
  if (yamllint.empty()) {
    GTEST_SKIP() << "yamllint is not installed; scripts/setup.sh installs it";
  }
  const auto exit = testing::Run(
      {yamllint, "-s", "-c", SourceDir() + "/.yamllint", SourceDir() + "/deploy/kubernetes"}, 60);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
}

TEST(KubernetesManifests, EveryContainersCommandPassesCheckFlags) {
  if (Shell("python3 -c 'import yaml'").code != 0) {
    GTEST_SKIP() << "python3 with PyYAML is not installed; scripts/setup.sh installs it";
  }
  TempFolder config_maps("manifests");
  // The cluster secret the README has the user create as Secret keel-cluster
  // (k8s_commands.py gives it the mode its volume gives it).
  ASSERT_EQ(mkdir((config_maps.path() + "/keel-cluster").c_str(), 0700), 0);
  const auto keygen = testing::Run(
      {KeelBinary(), "keygen", "--out=" + config_maps.path() + "/keel-cluster/cluster.secret"}, 30);
  ASSERT_TRUE(keygen.finished && keygen.code == 0) << keygen.output;
  const auto listed =
      testing::Run({"/usr/bin/env", "python3", SourceDir() + "/tests/k8s_commands.py",
                    SourceDir() + "/deploy/kubernetes", config_maps.path()},
                   60);
  ASSERT_TRUE(listed.finished && listed.code == 0) << listed.output;
  const std::vector<Container> containers = ParseContainers(listed.output);
  std::set<std::string> roles;
  for (const Container& container : containers) {
    ASSERT_GE(container.args.size(), 2u) << container.name;
    EXPECT_EQ(std::filesystem::path(container.args[0]).filename(), "keel") << container.name;
    roles.insert(container.args[1]);
    const auto exit = testing::Run(CheckFlagsCommand(container), 30);
    EXPECT_TRUE(exit.finished && exit.code == 0) << container.name << ": " << exit.output;
    // The confirmation is the behaviour --check_flags promises.
    EXPECT_TRUE(Contains(exit.output, "flags ok")) << container.name << ": " << exit.output;
  }
  EXPECT_EQ(roles, (std::set<std::string>{"scheduler", "server", "worker"})) << listed.output;
  EXPECT_GE(containers.size(), 3u);
}

}  // namespace
}  // namespace keel::testing
