// deploy/kubernetes: the manifests pass yamllint and the Kubernetes API's
// schemas (scripts/k8s-schema), every container's command, as its pod would
// run it (tests/k8s_commands.py prints them), passes `keel --check_flags`,
// and every container has its probes on its metrics port, resource requests
// and limits, and a pod that ends when its process does. The symmetric form,
// deploy/kubernetes/train (yamllint's run covers it too), the same way: each
// index's `keel train --check_flags` on the contract its volumes give it,
// its probes on the watch port, its state on volumes, its grace. Needs no root:
// python3 with PyYAML, yamllint, and Node with scripts/k8s-schema's packages,
// which scripts/setup.sh installs.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace keel::testing {
namespace {

// One container of the manifests, as k8s_commands.py prints it.
struct Container {
  std::string name;                              // KIND/NAME/CONTAINER
  std::string restart;                           // the pod's restartPolicy
  double grace = 0;                              // its terminationGracePeriodSeconds
  std::vector<std::string> env;                  // NAME=VALUE, the pod's environment
  std::vector<std::string> args;                 // the command: keel ROLE FLAGS...
  std::map<std::string, std::string> ports;      // name -> number
  std::map<std::string, std::string> probes;     // kind -> "PATH PORT"
  std::map<std::string, std::string> resources;  // requests.cpu, limits.memory, ... -> value
  std::string job;                               // a Job's "MODE COMPLETIONS PARALLELISM"
  std::string subdomain;                         // the pod's subdomain
  std::map<std::string, std::string> mounts;     // mount path -> "KIND NAME SUBPATH"

  // The value of `--flag=VALUE` among the args; "" if absent.
  std::string Flag(const std::string& flag) const {
    for (const std::string& arg : args) {
      if (arg.rfind("--" + flag + "=", 0) == 0) return arg.substr(flag.size() + 3);
    }
    return "";
  }
};

// `line` after `prefix`, split at its first space into `*key` and `*value`.
void SplitAfter(const std::string& line, size_t prefix, std::string* key, std::string* value) {
  const std::string rest = line.substr(prefix);
  const size_t space = rest.find(' ');
  *key = rest.substr(0, space);
  *value = space == std::string::npos ? "" : rest.substr(space + 1);
}

// The containers of k8s_commands.py's output: blocks of "container NAME",
// "restart POLICY", "grace SECONDS", "env NAME=VALUE", "arg WORD", "port NAME NUMBER",
// "probe KIND PATH PORT", "resource NAME VALUE", "job MODE COMPLETIONS
// PARALLELISM", "subdomain NAME" and "mount PATH KIND NAME SUBPATH" lines,
// each closed by "end".
std::vector<Container> ParseContainers(const std::string& listing) {
  std::vector<Container> containers;
  Container current;
  std::istringstream lines(listing);
  std::string key, value;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("container ", 0) == 0) {
      current = Container{};
      current.name = line.substr(10);
    } else if (line.rfind("restart ", 0) == 0) {
      current.restart = line.substr(8);
    } else if (line.rfind("grace ", 0) == 0) {
      current.grace = std::stod(line.substr(6));
    } else if (line.rfind("env ", 0) == 0) {
      current.env.push_back(line.substr(4));
    } else if (line.rfind("arg ", 0) == 0) {
      current.args.push_back(line.substr(4));
    } else if (line.rfind("port ", 0) == 0) {
      SplitAfter(line, 5, &key, &value);
      current.ports[key] = value;
    } else if (line.rfind("probe ", 0) == 0) {
      SplitAfter(line, 6, &key, &value);
      current.probes[key] = value;
    } else if (line.rfind("resource ", 0) == 0) {
      SplitAfter(line, 9, &key, &value);
      current.resources[key] = value;
    } else if (line.rfind("job ", 0) == 0) {
      current.job = line.substr(4);
    } else if (line.rfind("subdomain ", 0) == 0) {
      current.subdomain = line.substr(10);
    } else if (line.rfind("mount ", 0) == 0) {
      SplitAfter(line, 6, &key, &value);
      current.mounts[key] = value;
    } else if (line == "end") {
      containers.push_back(current);
    }
  }
  return containers;
}

// The manifests' containers (k8s_commands.py run on `folder`,
// deploy/kubernetes unless given, its files written under `out`); fails the
// test if the listing fails.
std::vector<Container> ListContainers(const std::string& out, std::string* listing,
                                      const std::string& folder = "deploy/kubernetes") {
  const auto listed =
      testing::Run({"/usr/bin/env", "python3", SourceDir() + "/tests/k8s_commands.py",
                    SourceDir() + "/" + folder, out},
                   60);
  EXPECT_TRUE(listed.finished && listed.code == 0) << listed.output;
  *listing = listed.output;
  return ParseContainers(listed.output);
}

// ListContainers into `out` (`containers`), which must list 3 or more.
void ListThreeOrMore(const std::string& out, std::vector<Container>* containers) {
  std::string listing;
  *containers = ListContainers(out, &listing);
  ASSERT_GE(containers->size(), 3u) << listing;
}

bool HavePyYaml() { return Shell("python3 -c 'import yaml'").code == 0; }

// Why a schema test is skipped when SchemaChecker finds nothing.
const char kNoSchemaChecker[] =
    "node or scripts/k8s-schema's packages are missing; scripts/setup.sh installs them";

// The schema check (`checker`) of a copy of deploy/kubernetes/`file` whose
// first `from` is replaced by `to` (`exit`), which must refuse it.
void CheckEditedManifest(const std::string& checker, const std::string& file,
                         const std::string& from, const std::string& to, testing::Exit* exit) {
  TempFolder broken("manifests");
  std::string text = ReadFileOrEmpty(SourceDir() + "/deploy/kubernetes/" + file);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, from.size(), to);
  WriteFile(broken.path() + "/" + file, text);
  *exit = testing::Run({SystemTool("node"), checker, broken.path()}, 60);
  EXPECT_TRUE(exit->finished && exit->code == 1) << exit->output;
}

// scripts/k8s-schema's checker, or "" when its packages are not installed.
std::string SchemaChecker() {
  const std::string folder = SourceDir() + "/scripts/k8s-schema";
  if (SystemTool("node").empty() ||
      !std::filesystem::exists(folder + "/node_modules/kubernetes-models/package.json")) {
    return "";
  }
  return folder + "/validate.js";
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
  if (!HavePyYaml()) {
    GTEST_SKIP() << "python3 with PyYAML is not installed; scripts/setup.sh installs it";
  }
  TempFolder config_maps("manifests");
  // The cluster secret the README has the user create as Secret keel-cluster
  // (k8s_commands.py gives it the mode its volume gives it).
  ASSERT_EQ(mkdir((config_maps.path() + "/keel-cluster").c_str(), 0700), 0);
  const auto keygen = testing::Run(
      {KeelBinary(), "keygen", "--out=" + config_maps.path() + "/keel-cluster/cluster.secret"}, 30);
  ASSERT_TRUE(keygen.finished && keygen.code == 0) << keygen.output;
  std::string listing;
  const std::vector<Container> containers = ListContainers(config_maps.path(), &listing);
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
  EXPECT_EQ(roles, (std::set<std::string>{"scheduler", "server", "worker"})) << listing;
  EXPECT_GE(containers.size(), 3u);
}

TEST(KubernetesManifests, PassTheKubernetesSchemas) {
  const std::string checker = SchemaChecker();
  if (checker.empty()) GTEST_SKIP() << kNoSchemaChecker;
  const auto exit =
      testing::Run({SystemTool("node"), checker, SourceDir() + "/deploy/kubernetes"}, 60);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  for (const char* workload : {"Job/keel-scheduler", "Job/keel-server", "Job/keel-worker"}) {
    EXPECT_TRUE(Contains(exit.output, std::string("valid ") + workload)) << exit.output;
  }
}

TEST(KubernetesManifests, TheSchemaCheckRefusesAValueTheFieldDoesNotAllow) {
  const std::string checker = SchemaChecker();
  if (checker.empty()) GTEST_SKIP() << kNoSchemaChecker;
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(CheckEditedManifest(checker, "workers.yaml", "restartPolicy: Never",
                                              "restartPolicy: Sometimes", &exit));
  EXPECT_TRUE(Contains(exit.output, "Job/keel-worker: /spec/template/spec/restartPolicy"))
      << exit.output;
}

TEST(KubernetesManifests, TheSchemaCheckRefusesAnUnknownFieldNamingItsPath) {
  // kubectl apply refuses unknown fields; a misspelt probe would otherwise be dropped silently.
  const std::string checker = SchemaChecker();
  if (checker.empty()) GTEST_SKIP() << kNoSchemaChecker;
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(
      CheckEditedManifest(checker, "servers.yaml", "readinessProbe:", "readinesProbe:", &exit));
  EXPECT_TRUE(Contains(exit.output,
                       "Job/keel-server: unknown field spec.template.spec.containers[0]."
                       "readinesProbe"))
      << exit.output;
}

TEST(KubernetesManifests, EveryContainerIsProbedOnItsMetricsPortAndHasResources) {
  if (!HavePyYaml()) GTEST_SKIP() << "python3 with PyYAML is not installed";
  TempFolder out("manifests");
  std::vector<Container> containers;
  ASSERT_NO_FATAL_FAILURE(ListThreeOrMore(out.path(), &containers));
  for (const Container& container : containers) {
    // The kubelet probes the pod's IP: the port must be bound beyond loopback.
    const std::string port = container.Flag("metrics_port");
    EXPECT_FALSE(port.empty()) << container.name;
    EXPECT_EQ(container.Flag("metrics_bind"), "0.0.0.0") << container.name;
    ASSERT_TRUE(container.ports.count("metrics")) << container.name;
    EXPECT_EQ(container.ports.at("metrics"), port) << container.name;
    ASSERT_TRUE(container.probes.count("readiness") && container.probes.count("liveness"))
        << container.name;
    EXPECT_EQ(container.probes.at("readiness"), "/readyz metrics") << container.name;
    EXPECT_EQ(container.probes.at("liveness"), "/healthz metrics") << container.name;
    for (const char* resource : {"requests.cpu", "requests.memory", "limits.memory"}) {
      EXPECT_TRUE(container.resources.count(resource)) << container.name << ": " << resource;
    }
  }
}

TEST(KubernetesManifests, EveryRoleRunsInAJobWhosePodsEndWithTheirProcess) {
  // A Deployment or StatefulSet starts a process that exited 0 at the end of
  // the job again; a Job's pod with restartPolicy Never completes.
  if (!HavePyYaml()) GTEST_SKIP() << "python3 with PyYAML is not installed";
  TempFolder out("manifests");
  std::string listing;
  for (const Container& container : ListContainers(out.path(), &listing)) {
    EXPECT_EQ(container.name.rfind("Job/", 0), 0u) << container.name;
    EXPECT_EQ(container.restart, "Never") << container.name;
  }
}

// The seconds of `--preemption_grace` a container runs with: its argument,
// else its flagfile's line, else the default `keel scheduler --help` shows.
double PreemptionGrace(const Container& container) {
  std::string value = container.Flag("preemption_grace");
  const std::string flagfile = container.Flag("flagfile");
  if (value.empty() && !flagfile.empty()) {
    std::istringstream lines(ReadFileOrEmpty(flagfile));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("--preemption_grace=", 0) == 0) value = line.substr(19);
    }
  }
  if (value.empty()) {
    const auto help = testing::Run({KeelBinary(), "scheduler", "--help"}, 10);
    const size_t at = help.output.find("--preemption_grace=");
    EXPECT_NE(at, std::string::npos) << help.output;
    if (at == std::string::npos) return 0;
    value = help.output.substr(at + 19, help.output.find(' ', at) - at - 19);
  }
  return std::stod(value);
}

TEST(KubernetesManifests, EveryPodOutlastsThePreemptionGraceBeforeTheKubeletKillsIt) {
  // On a SIGTERM (a node drained, a spot instance reclaimed) the job takes its
  // preemption checkpoint within --preemption_grace and exits 75; a pod whose
  // terminationGracePeriodSeconds is shorter is killed before it can commit.
  if (!HavePyYaml()) GTEST_SKIP() << "python3 with PyYAML is not installed";
  TempFolder out("manifests");
  std::vector<Container> containers;
  ASSERT_NO_FATAL_FAILURE(ListThreeOrMore(out.path(), &containers));
  for (const Container& container : containers) {
    const double grace = PreemptionGrace(container);
    EXPECT_GT(grace, 0) << container.name;
    // The checkpoint commits within the grace; SHUTDOWN and the exits follow.
    EXPECT_GE(container.grace, grace + 10)
        << container.name << ": the pod's grace " << container.grace << " s, --preemption_grace "
        << grace << " s";
  }
}

// ---------------------------------------------------------------------------
// deploy/kubernetes/train: keel train on every pod of one Indexed Job, the
// hosts from --hosts (the pods' names through a headless Service) and each
// pod's JOB_COMPLETION_INDEX, the job's hyperparameters and channels from a
// ConfigMap mounted where SageMaker's contract has them.

constexpr char kTrainFolder[] = "deploy/kubernetes/train";

// The one container of deploy/kubernetes/train (its ConfigMaps written under
// `out`), which must run the image's `train`.
void ListTrainContainer(const std::string& out, Container* container, std::string* listing) {
  const std::vector<Container> containers = ListContainers(out, listing, kTrainFolder);
  ASSERT_EQ(containers.size(), 1u) << *listing;
  *container = containers[0];
  ASSERT_FALSE(container->args.empty()) << *listing;
  // The image's entry point runs `keel train` for the argument train.
  EXPECT_EQ(container->args[0], "train") << *listing;
}

// The Job's completions (`job` is "Indexed COMPLETIONS PARALLELISM"); fails
// the test unless the Job is Indexed with parallelism equal to completions.
int IndexedCompletions(const Container& container) {
  std::istringstream words(container.job);
  std::string mode;
  int completions = 0, parallelism = 0;
  words >> mode >> completions >> parallelism;
  EXPECT_EQ(mode, "Indexed") << container.name;
  EXPECT_EQ(parallelism, completions) << container.name << ": every host runs at once";
  return completions;
}

// The value of `--flag` in `keel train --help`'s usage ("--flag=VALUE ").
std::string TrainHelpDefault(const std::string& flag) {
  const auto help = testing::Run({KeelBinary(), "train", "--help"}, 10);
  const size_t at = help.output.find("--" + flag + "=");
  EXPECT_NE(at, std::string::npos) << help.output;
  if (at == std::string::npos) return "0";
  const size_t from = at + flag.size() + 3;
  return help.output.substr(from, help.output.find_first_of(" \n", from) - from);
}

TEST(KubernetesTrainManifests, PassTheKubernetesSchemas) {
  const std::string checker = SchemaChecker();
  if (checker.empty()) GTEST_SKIP() << kNoSchemaChecker;
  const auto exit =
      testing::Run({SystemTool("node"), checker, SourceDir() + "/" + kTrainFolder}, 60);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  for (const char* object :
       {"Job/keel-train", "Service/keel-train", "ConfigMap/keel-train-config",
        "PersistentVolumeClaim/keel-train-data", "PersistentVolumeClaim/keel-train-state"}) {
    EXPECT_TRUE(Contains(exit.output, std::string("valid ") + object)) << exit.output;
  }
}

TEST(KubernetesTrainManifests, EveryIndexsCommandPassesCheckFlagsAsItsHostAmongThePods) {
  // Each pod's command, run here with its JOB_COMPLETION_INDEX on a copy of
  // the contract its volumes give it: the ConfigMap's files in input/config
  // and a line of data in each channel's folder.
  if (!HavePyYaml()) GTEST_SKIP() << "python3 with PyYAML is not installed";
  TempFolder out("manifests");
  Container container;
  std::string listing;
  ASSERT_NO_FATAL_FAILURE(ListTrainContainer(out.path(), &container, &listing));
  EXPECT_EQ(container.restart, "Never") << listing;
  const std::string root = container.Flag("sagemaker_root");
  ASSERT_FALSE(root.empty()) << listing;
  ASSERT_TRUE(container.mounts.count(root + "/input/config")) << listing;
  std::istringstream config(container.mounts.at(root + "/input/config"));
  std::string kind, config_map;
  config >> kind >> config_map;
  ASSERT_EQ(kind, "configMap") << listing;
  EXPECT_FALSE(std::filesystem::exists(out.path() + "/" + config_map + "/resourceconfig.json"))
      << "the hosts come from --hosts; keel train refuses a resourceconfig.json beside it";
  TempFolder contract("contract");
  std::filesystem::create_directories(contract.path() + "/input");
  std::filesystem::copy(out.path() + "/" + config_map, contract.path() + "/input/config",
                        std::filesystem::copy_options::recursive);
  for (const char* channel : {"train", "validation", "test"}) {
    const std::string folder = contract.path() + "/input/data/" + channel;
    std::filesystem::create_directories(folder);
    WriteFile(folder + "/part-0", "1 3:1 7:0.5\n0 2:1\n");
  }
  // The pods' names: the Job's name and index (the pod's hostname), then its
  // subdomain, a headless Service that publishes pods not yet ready.
  const std::string job = container.name.substr(4, container.name.rfind('/') - 4);
  ASSERT_FALSE(container.subdomain.empty()) << listing;
  EXPECT_TRUE(Contains(listing, "headless_service " + container.subdomain + " true")) << listing;
  const int hosts = IndexedCompletions(container);
  ASSERT_GE(hosts, 2) << listing;
  std::string names;
  for (int index = 0; index < hosts; ++index) {
    names += (index ? "," : "") + job + "-" + std::to_string(index) + "." + container.subdomain;
  }
  for (int index = 0; index < hosts; ++index) {
    std::vector<std::string> argv = {"/usr/bin/env", "-i",
                                     "JOB_COMPLETION_INDEX=" + std::to_string(index), KeelBinary()};
    for (const std::string& arg : container.args) {
      argv.push_back(arg.rfind("--sagemaker_root=", 0) == 0 ? "--sagemaker_root=" + contract.path()
                                                            : arg);
    }
    argv.push_back("--check_flags");
    const auto exit = testing::Run(argv, 30);
    ASSERT_TRUE(exit.finished && exit.code == 0) << index << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, "flags ok")) << exit.output;
    EXPECT_TRUE(Contains(exit.output, "in index order (index 0 leads): " + names + ";"))
        << names << "\n"
        << exit.output;
    EXPECT_TRUE(Contains(exit.output, "this host: " + job + "-" + std::to_string(index) + "." +
                                          container.subdomain + ", index " + std::to_string(index) +
                                          " of " + std::to_string(hosts)))
        << exit.output;
  }
}

TEST(KubernetesTrainManifests, CheckpointsAndTheModelOutliveThePods) {
  // A job started again resumes from what its checkpoints folder holds: it
  // must be a volume, not the pod's own disk, and so must the model.
  if (!HavePyYaml()) GTEST_SKIP() << "python3 with PyYAML is not installed";
  TempFolder out("manifests");
  Container container;
  std::string listing;
  ASSERT_NO_FATAL_FAILURE(ListTrainContainer(out.path(), &container, &listing));
  const std::string root = container.Flag("sagemaker_root");
  for (const char* folder : {"/checkpoints", "/model", "/input/data"}) {
    ASSERT_TRUE(container.mounts.count(root + folder)) << folder << "\n" << listing;
    EXPECT_EQ(container.mounts.at(root + folder).rfind("persistentVolumeClaim ", 0), 0u)
        << folder << "\n"
        << listing;
  }
}

TEST(KubernetesTrainManifests, ProbesAskTheWatchPortAndThePodHasResources) {
  // keel train serves no HTTP: it listens on the watch port, --sagemaker_port + 1.
  if (!HavePyYaml()) GTEST_SKIP() << "python3 with PyYAML is not installed";
  TempFolder out("manifests");
  Container container;
  std::string listing;
  ASSERT_NO_FATAL_FAILURE(ListTrainContainer(out.path(), &container, &listing));
  std::string port = container.Flag("sagemaker_port");
  if (port.empty()) port = TrainHelpDefault("sagemaker_port");
  ASSERT_TRUE(container.ports.count("scheduler") && container.ports.count("watch")) << listing;
  EXPECT_EQ(container.ports.at("scheduler"), port);
  EXPECT_EQ(container.ports.at("watch"), std::to_string(std::stoi(port) + 1));
  EXPECT_EQ(container.probes["readiness"], "tcp watch") << listing;
  EXPECT_EQ(container.probes["liveness"], "tcp watch") << listing;
  // Until its roles start (the leader's name may take minutes to resolve).
  EXPECT_EQ(container.probes["startup"], "tcp watch") << listing;
  for (const char* resource : {"requests.cpu", "requests.memory", "limits.memory"}) {
    EXPECT_TRUE(container.resources.count(resource)) << resource << "\n" << listing;
  }
}

TEST(KubernetesTrainManifests, ThePodsOutlastThePreemptionGraceBeforeTheKubeletKillsThem) {
  if (!HavePyYaml()) GTEST_SKIP() << "python3 with PyYAML is not installed";
  TempFolder out("manifests");
  Container container;
  std::string listing;
  ASSERT_NO_FATAL_FAILURE(ListTrainContainer(out.path(), &container, &listing));
  // keel train's --preemption_grace, else the hyperparameter's, else its default.
  std::string grace = container.Flag("preemption_grace");
  std::smatch hyperparameter;
  const std::string hyperparameters =
      ReadFileOrEmpty(out.path() + "/keel-train-config/hyperparameters.json");
  if (grace.empty() && std::regex_search(hyperparameters, hyperparameter,
                                         std::regex("\"preemption_grace\"\\s*:\\s*\"([^\"]*)\""))) {
    grace = hyperparameter[1];
  }
  if (grace.empty()) grace = TrainHelpDefault("preemption_grace");
  EXPECT_GT(std::stod(grace), 0);
  EXPECT_GE(container.grace, std::stod(grace) + 10)
      << "the pod's grace " << container.grace << " s, --preemption_grace " << grace << " s";
}

}  // namespace
}  // namespace keel::testing
