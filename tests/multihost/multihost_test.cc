// A job across machines, proven on this one: hosts as network namespaces, the
// ssh launcher against a real sshd, the Slurm batch script against a real
// Slurm (munged, slurmctld and two slurmd). (The Kubernetes manifests, which
// need no root, are checked in kubernetes_manifests_test.cc.) Each test starts and stops what it
// uses; every process is tracked by PID and killed at the end, every wait is bounded. Needs root
// (namespaces, iptables, daemons); scripts/setup.sh installs the tools.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "kv/van.h"
#include "launch/remote.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::Exit;
using testing::KeelBinary;
using testing::Processes;
using testing::ProcessesMentioning;
using testing::ReadFileOrEmpty;
using testing::ReadMetrics;
using testing::Shell;
using testing::SystemTool;
using testing::TempFolderTest;
using testing::WaitFor;

// Skips the test unless this process is root and every tool is installed.
#define REQUIRE_ROOT_AND_TOOLS(...)                                                              \
  do {                                                                                           \
    if (geteuid() != 0) {                                                                        \
      GTEST_SKIP() << "needs root (network namespaces, iptables, daemons): run scripts/test.sh " \
                      "as root";                                                                 \
    }                                                                                            \
    for (const char* tool : {__VA_ARGS__}) {                                                     \
      if (SystemTool(tool).empty()) {                                                            \
        GTEST_SKIP() << tool << " is not installed; scripts/setup.sh installs it";               \
      }                                                                                          \
    }                                                                                            \
  } while (0)

// A fresh folder that also marks this test's processes (it is in their flags).
class MultiHostTest : public TempFolderTest {
 protected:
  MultiHostTest() : TempFolderTest("multihost") { chmod(folder_.c_str(), 0755); }
  ~MultiHostTest() override {
    for (pid_t pid : ProcessesMentioning(folder_)) kill(pid, SIGKILL);
  }

  // Synthetic linear data in folder/data.
  void Generate(int rows) {
    const auto exit = testing::Run({KeelBinary(), "datagen", "--model=linear",
                                    "--rows=" + std::to_string(rows), "--features=2000", "--nnz=10",
                                    "--seed=7", "--train_files=2", "--out=" + folder_ + "/data"},
                                   60);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

  std::vector<std::string> JobFlags(int epochs) const {
    return {"--job=linear_learner", "--epochs=" + std::to_string(epochs),
            "--train=" + folder_ + "/data/train", "--validation=" + folder_ + "/data/validation",
            "--model_dir=" + folder_ + "/model"};
  }
};

// ---------------------------------------------------------------------------
// Hosts as network namespaces: each has its own 10.77.0.N address on a bridge
// (in a namespace of its own), and reaches the others only through it.

class NamespaceHosts : public MultiHostTest {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_AND_TOOLS("ip", "iptables");
    ip_ = SystemTool("ip");
    std::random_device random;
    prefix_ = "keel" + std::to_string(getpid() % 100000) + "-" + std::to_string(random() % 10000);
    const std::string bridge = prefix_ + "-sw";
    namespaces_.push_back(bridge);
    std::string script = "set -e; ip netns add " + bridge + "; ip -n " + bridge +
                         " link add br0 type bridge; ip -n " + bridge + " link set br0 up; ip -n " +
                         bridge + " link set lo up; ";
    for (int host = 1; host <= 3; ++host) {
      const std::string name = Host(host);
      namespaces_.push_back(name);
      const std::string port = "p" + std::to_string(host);
      script += "ip netns add " + name + "; ip link add eth0 netns " + name +
                " type veth peer name " + port + " netns " + bridge + "; ip -n " + bridge +
                " link set " + port + " master br0 up; ip -n " + name + " addr add " +
                Address(host) + "/24 dev eth0; ip -n " + name + " link set eth0 up; ip -n " + name +
                " link set lo up; ";
    }
    const auto exit = Shell(script);
    ASSERT_TRUE(exit.finished && exit.code == 0) << script << "\n" << exit.output;
  }

  void TearDown() override {
    // Whatever still runs in a namespace is this test's: kill it by PID.
    for (const std::string& name : namespaces_) {
      std::istringstream pids(Shell(ip_ + " netns pids " + name).output);
      for (pid_t pid; pids >> pid;) kill(pid, SIGKILL);
    }
    for (const std::string& name : namespaces_) Shell(ip_ + " netns del " + name);
  }

  std::string Host(int host) const { return prefix_ + "-h" + std::to_string(host); }

  // Gives every namespace `hosts` as its /etc/hosts (ip netns exec reads
  // /etc/netns/NAME/hosts); written in place, so that what runs in a
  // namespace sees a change.
  void WriteHostsFiles(const std::string& hosts) const {
    for (int host = 1; host <= 3; ++host) {
      const std::string folder = "/etc/netns/" + Host(host);
      std::filesystem::create_directories(folder);
      testing::WriteFile(folder + "/hosts", hosts);
    }
  }

  // Stops the hosts (NamespaceHosts::TearDown) and removes what
  // WriteHostsFiles wrote.
  void TearDownWithHostsFiles() {
    NamespaceHosts::TearDown();
    for (int host = 1; host <= 3; ++host) {
      std::error_code ignored;
      std::filesystem::remove_all("/etc/netns/" + Host(host), ignored);
    }
  }
  // The scheduler's --membership_log.
  std::string MembershipLog() const { return folder_ + "/membership.jsonl"; }
  // How many nodes registered from an address on host `address`.
  int JoinsFrom(const std::string& address) const {
    int joins = 0;
    for (auto& join : testing::EventsNamed(MembershipLog(), "join")) {
      joins += join["address"].rfind(address + ":", 0) == 0;
    }
    return joins;
  }
  static std::string Address(int host) { return "10.77.0." + std::to_string(host); }

  // Starts `keel ARGS` inside host `host`'s namespace.
  pid_t StartOn(int host, std::vector<std::string> args) {
    args.insert(args.begin(), {ip_, "netns", "exec", Host(host), KeelBinary()});
    return processes_.Start(args);
  }

  // Drops every packet between hosts `a` and `b` (rules in `a`'s namespace).
  void Partition(int a, int b) {
    const std::string in = "ip netns exec " + Host(a) + " iptables ";
    const auto exit = Shell(in + "-A INPUT -s " + Address(b) + " -j DROP && " + in +
                            "-A OUTPUT -d " + Address(b) + " -j DROP");
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

  std::string ip_;
  std::string prefix_;
  std::vector<std::string> namespaces_;
  Processes processes_;
};

TEST_F(NamespaceHosts, ThreeHostsTrainALinearLearner) {
  Generate(20000);
  const std::string scheduler = Address(1) + ":9000";
  const pid_t scheduler_pid =
      StartOn(1, {"scheduler", "--bind=" + Address(1), "--port=9000", "--num_servers=2",
                  "--num_workers=2", "--membership_log=" + MembershipLog()});
  std::vector<pid_t> nodes;
  for (int host : {2, 3}) {
    for (const char* role : {"server", "worker"}) {
      std::vector<std::string> args = {role, "--scheduler=" + scheduler};
      for (const auto& flag : JobFlags(3)) args.push_back(flag);
      nodes.push_back(StartOn(host, args));
    }
  }
  const auto exit = processes_.Wait(scheduler_pid, 120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "scheduler listening on " + scheduler)) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "job finished: 2 of 2 worker(s) succeeded")) << exit.output;
  // Each node advertised the address of its own host, which the scheduler reached.
  for (int host : {2, 3}) {
    EXPECT_EQ(JoinsFrom(Address(host)), 2) << testing::ReadFileOrEmpty(MembershipLog());
  }
  for (pid_t node : nodes) {
    const auto node_exit = processes_.Wait(node, 30);
    EXPECT_TRUE(node_exit.finished && node_exit.code == 0) << node_exit.output;
    EXPECT_TRUE(Contains(node_exit.output, "advertising 10.77.0.")) << node_exit.output;
  }
  EXPECT_EQ(ReadMetrics(folder_ + "/model/metrics.json").count("validation:roc_auc_score"), 1u);
}

TEST_F(NamespaceHosts, ANodeAdvertisingAnotherHostsAddressIsRefused) {
  const std::string scheduler = Address(1) + ":9000";
  StartOn(1, {"scheduler", "--bind=" + Address(1), "--port=9000", "--connect_timeout=2"});
  // 10.77.0.99 is on the subnet, but no host has it.
  const pid_t worker = StartOn(
      2, {"worker", "--scheduler=" + scheduler, "--advertise=10.77.0.99", "--register_timeout=30",
          "--job=linear_learner", "--train=" + folder_ + "/data/train"});
  const auto exit = processes_.Wait(worker, 45);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 1) << exit.output;
  // The scheduler does not try it: it connects back only to the registering node's own host.
  EXPECT_TRUE(Contains(exit.output, "node at 10.77.0.99:")) << exit.output;
  EXPECT_TRUE(
      Contains(exit.output, "is not on the host its registration came from (" + Address(2) + ")"))
      << exit.output;
}

// A worker cut off from the scheduler (but not from the servers): the
// scheduler hears no heartbeat and removes it from the view after
// --heartbeat_timeout; the servers then refuse its requests; no replacement
// comes within --worker_replace_timeout, so the other worker reads the rest of
// its share, and the job finishes. (Servers cut off from the scheduler are
// the fault-tolerance work still to come.)
TEST_F(NamespaceHosts, AWorkerCutOffFromTheSchedulerIsRemovedAndReported) {
  Generate(40000);
  const std::string scheduler = Address(1) + ":9000";
  const pid_t scheduler_pid =
      StartOn(1, {"scheduler", "--bind=" + Address(1), "--port=9000", "--num_servers=1",
                  "--num_workers=2", "--heartbeat_timeout=3", "--worker_replace_timeout=2",
                  "--membership_log=" + MembershipLog()});
  auto node = [&](int host, const std::string& role, int rank) {
    std::vector<std::string> args = {role,
                                     "--scheduler=" + scheduler,
                                     "--rank=" + std::to_string(rank),
                                     "--heartbeat_interval=0.5",
                                     "--mini_batch_size=50",
                                     "--slow_worker=1:3"};
    for (const auto& flag : JobFlags(5)) args.push_back(flag);
    return StartOn(host, args);
  };
  const pid_t server = node(2, "server", 0);
  const pid_t worker0 = node(2, "worker", 0);
  node(3, "worker", 1);
  ASSERT_TRUE(WaitFor([&] { return !testing::EventsNamed(MembershipLog(), "view").empty(); }, 30))
      << processes_.Output(scheduler_pid);
  Partition(3, 1);

  const auto exit = processes_.Wait(scheduler_pid, 120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  auto leaves = testing::EventsNamed(MembershipLog(), "leave");
  ASSERT_EQ(leaves.size(), 1u) << testing::ReadFileOrEmpty(MembershipLog());
  EXPECT_EQ(leaves[0]["role"], "worker");
  EXPECT_EQ(leaves[0]["rank"], "1");
  EXPECT_EQ(leaves[0]["address"].rfind(Address(3) + ":", 0), 0u) << leaves[0]["address"];
  EXPECT_EQ(leaves[0]["reason"].rfind("no heartbeat", 0), 0u) << leaves[0]["reason"];
  EXPECT_TRUE(Contains(exit.output, "read the rest of its share")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "job finished: 1 of 2 worker(s) succeeded")) << exit.output;
  const auto worker_exit = processes_.Wait(worker0, 30);
  EXPECT_TRUE(worker_exit.finished && worker_exit.code == 0) << worker_exit.output;
  const auto server_exit = processes_.Wait(server, 30);
  EXPECT_TRUE(server_exit.finished && server_exit.code == 0) << server_exit.output;
  // The cut-off worker never hears the end: TearDown kills it.
}

// ---------------------------------------------------------------------------
// `keel train` on three hosts named algo-1, algo-2 and algo-3 (the names each
// namespace's /etc/hosts gives, through /etc/netns/NAME/hosts), each with its
// own copy of SageMaker's contract, each running the same command.

class SageMakerHosts : public NamespaceHosts {
 protected:
  void SetUp() override {
    NamespaceHosts::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string hosts = "127.0.0.1 localhost\n";
    for (int host = 1; host <= 3; ++host)
      hosts += Address(host) + " algo-" + std::to_string(host) + "\n";
    WriteHostsFiles(hosts);
  }

  void TearDown() override { TearDownWithHostsFiles(); }

  std::string Root(int host) const { return folder_ + "/algo-" + std::to_string(host); }

  // Host `host`'s contract: the hyperparameters and channels given, the
  // three hosts, and every channel's files (FullyReplicated: all of them).
  void WriteContract(int host, const std::string& hyperparameters, const std::string& channels) {
    const std::string root = Root(host);
    std::filesystem::create_directories(root + "/input/config");
    testing::WriteFile(root + "/input/config/hyperparameters.json", hyperparameters);
    testing::WriteFile(root + "/input/config/resourceconfig.json",
                       R"({"current_host": "algo-)" + std::to_string(host) +
                           R"(", "hosts": ["algo-3", "algo-1", "algo-2"],
                            "network_interface_name": "eth0"})");
    testing::WriteFile(root + "/input/config/inputdataconfig.json", channels);
    std::filesystem::create_directories(root + "/input/data");
    std::filesystem::copy(folder_ + "/data", root + "/input/data",
                          std::filesystem::copy_options::recursive);
  }

  pid_t Train(int host) { return StartOn(host, {"train", "--sagemaker_root=" + Root(host)}); }

  // `keel train` on the hosts of `order` at once, each waited for: their
  // exits, in that order, into `exits`; each must end with status 0.
  void TrainToTheEnd(const std::vector<int>& order, std::vector<Exit>* exits) {
    std::vector<pid_t> hosts;
    for (int host : order) hosts.push_back(Train(host));
    for (pid_t pid : hosts) exits->push_back(processes_.Wait(pid, 180));
    for (const Exit& exit : *exits) {
      ASSERT_TRUE(exit.finished) << exit.output;
      EXPECT_EQ(exit.code, 0) << exit.output;
    }
  }

  // 20,000 libsvm rows on every host, each with `hyperparameters`, `keel
  // train` started on hosts 1, 2 and 3 (their pids in `hosts`, in order),
  // once the leader printed epoch 1's metrics.
  void TrainPastTheFirstEpoch(const std::string& hyperparameters, std::vector<pid_t>* hosts) {
    Generate(20000);
    for (int host = 1; host <= 3; ++host) {
      WriteContract(host, hyperparameters, R"({"train": {"ContentType": "text/libsvm"}})");
    }
    for (int host = 1; host <= 3; ++host) hosts->push_back(Train(host));
    ASSERT_TRUE(WaitFor(
        [&] { return Contains(processes_.Output(hosts->front()), "keel-metric epoch=1 "); }, 60))
        << processes_.Output(hosts->front());
  }

  // Starts a long job on the three hosts, kills host `victim`'s keel train
  // (its roles die with it) once the first epoch is decided, and checks that
  // each other host fails within seconds, its output/failure saying `why`.
  void KillAHostMidJob(int victim, const std::string& why) {
    std::vector<pid_t> hosts;
    ASSERT_NO_FATAL_FAILURE(TrainPastTheFirstEpoch(
        R"({"feature_dim": "2000", "epochs": "500", "mini_batch_size": "32",
            "heartbeat_timeout": "3"})",
        &hosts));
    kill(hosts[static_cast<size_t>(victim - 1)], SIGKILL);
    for (int host = 1; host <= 3; ++host) {
      if (host == victim) continue;
      const Exit exit = processes_.Wait(hosts[static_cast<size_t>(host - 1)], 30);
      ASSERT_TRUE(exit.finished) << exit.output;
      EXPECT_NE(exit.code, 0) << exit.output;
      const std::string failure = ReadFileOrEmpty(Root(host) + "/output/failure");
      EXPECT_TRUE(Contains(failure, "algo-" + std::to_string(host) + ": " + why))
          << failure << exit.output;
      EXPECT_TRUE(Contains(failure, "so the job cannot go on")) << failure;
    }
  }
};

TEST_F(SageMakerHosts, ThreeHostsTrainTheSameCommandAndTheLeaderWritesTheModel) {
  Generate(20000);
  for (int host = 1; host <= 3; ++host) {
    WriteContract(host, R"({"feature_dim": "2000", "epochs": "3", "mini_batch_size": "100"})",
                  R"({"train": {"ContentType": "text/libsvm"},
                      "validation": {"ContentType": "text/libsvm"}})");
  }
  std::vector<Exit> exits;  // the leader need not be first
  ASSERT_NO_FATAL_FAILURE(TrainToTheEnd({3, 2, 1}, &exits));
  const std::string& leader = exits[2].output;
  EXPECT_TRUE(Contains(leader, "expecting 3 server(s) and 3 worker(s)")) << leader;
  EXPECT_TRUE(Contains(leader, "job finished: 3 of 3 worker(s) succeeded")) << leader;
  EXPECT_TRUE(Contains(leader, "keel-metric epoch=3 validation:roc_auc_score=")) << leader;
  // The other hosts' roles reached the leader by its name, from their own addresses.
  EXPECT_TRUE(Contains(exits[0].output, "scheduler at algo-1:9800")) << exits[0].output;
  EXPECT_TRUE(Contains(exits[0].output, "advertising " + Address(3))) << exits[0].output;
  EXPECT_TRUE(Contains(exits[1].output, "advertising " + Address(2))) << exits[1].output;
  for (int host = 1; host <= 3; ++host) {
    EXPECT_EQ(ReadFileOrEmpty(Root(host) + "/output/failure"), "") << host;
  }
  const auto metrics = ReadMetrics(Root(1) + "/model/metrics.json");
  ASSERT_EQ(metrics.count("validation:roc_auc_score"), 1u) << leader;
  EXPECT_EQ(metrics.at("train:examples_per_epoch"), 20000);
  // `keel predict` scores the leader's model as it scores a launched job's.
  const auto predict =
      testing::Run({KeelBinary(), "predict", "--model_dir=" + Root(1) + "/model",
                    "--data=" + folder_ + "/data/validation", "--out=" + folder_ + "/scores.csv"},
                   60);
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  EXPECT_TRUE(Contains(predict.output, "roc_auc_score")) << predict.output;
}

TEST_F(SageMakerHosts, WithShardedByS3KeyEachHostTrainsOnItsOwnFiles) {
  const auto generated = testing::Run(
      {KeelBinary(), "datagen", "--model=linear", "--rows=18000", "--features=2000", "--nnz=10",
       "--seed=7", "--train_files=3", "--out=" + folder_ + "/data"},
      60);
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  for (int host = 1; host <= 3; ++host) {
    WriteContract(host,
                  R"({"feature_dim": "2000", "epochs": "2", "mini_batch_size": "100",
                      "workers_per_host": "2"})",
                  R"({"train": {"ContentType": "text/libsvm", "S3DistributionType": "ShardedByS3Key"},
                      "validation": {"ContentType": "text/libsvm"}})");
    // Host N keeps the N-th training file only: its share, as SageMaker copies it.
    for (int other = 0; other < 3; ++other) {
      if (other != host - 1) {
        std::filesystem::remove(Root(host) + "/input/data/train/part-" + std::to_string(other) +
                                ".libsvm");
      }
    }
  }
  std::vector<Exit> exits;
  ASSERT_NO_FATAL_FAILURE(TrainToTheEnd({1, 2, 3}, &exits));
  EXPECT_TRUE(Contains(exits[0].output, "expecting 3 server(s) and 6 worker(s)")) << exits[0].output;
  // Every row of every host's share, once an epoch.
  const auto metrics = ReadMetrics(Root(1) + "/model/metrics.json");
  ASSERT_EQ(metrics.count("train:examples_per_epoch"), 1u) << exits[0].output;
  EXPECT_EQ(metrics.at("train:examples_per_epoch"), 18000) << exits[0].output;
}

TEST_F(SageMakerHosts, PipeChannelsStreamEachHostsShareThroughAFifoPerPass) {
  const auto generated = testing::Run(
      {KeelBinary(), "datagen", "--model=linear", "--rows=18000", "--features=2000", "--nnz=10",
       "--seed=7", "--train_files=3", "--out=" + folder_ + "/data"},
      60);
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  std::vector<pid_t> writers;
  for (int host = 1; host <= 3; ++host) {
    // No batch cache: every pass is read from its own FIFO.
    WriteContract(host, R"({"feature_dim": "2000", "epochs": "3", "mini_batch_size": "100",
                            "cache_dir": "none"})",
                  R"({"train": {"ContentType": "text/libsvm", "TrainingInputMode": "Pipe",
                                "S3DistributionType": "ShardedByS3Key"},
                      "validation": {"ContentType": "text/libsvm"}})");
    // SageMaker's side: host N's share streamed into a FIFO per pass,
    // train_0, train_1, ..., each made once the one before it was read.
    const std::string fifo = Root(host) + "/input/data/train_";
    const std::string share = folder_ + "/data/train/part-" + std::to_string(host - 1) + ".libsvm";
    writers.push_back(processes_.Start(
        {"/bin/sh", "-c",
         "for pass in 0 1 2; do mkfifo " + fifo + "$pass && cat " + share + " > " + fifo +
             "$pass && echo pass $pass written || exit 1; done"}));
  }
  std::vector<Exit> exits;
  ASSERT_NO_FATAL_FAILURE(TrainToTheEnd({1, 2, 3}, &exits));
  for (pid_t writer : writers) {
    const Exit written = processes_.Wait(writer, 10);
    EXPECT_TRUE(written.finished && written.code == 0) << written.output;
    EXPECT_TRUE(Contains(written.output, "pass 2 written")) << written.output;
  }
  // Every host's stream, whole, every epoch, each from its pass's FIFO.
  const auto metrics = ReadMetrics(Root(1) + "/model/metrics.json");
  ASSERT_EQ(metrics.count("train:examples_per_epoch"), 1u) << exits[0].output;
  EXPECT_EQ(metrics.at("train:examples_per_epoch"), 18000) << exits[0].output;
  EXPECT_EQ(metrics.at("train:epochs"), 3) << exits[0].output;
}

// Spot training: SIGTERM to every host, SageMaker's sync of every host's
// checkpoints/ to one S3 prefix and back (here: each folder copied into the
// others), then the same command again on every host.
TEST_F(SageMakerHosts, SigtermToEveryHostCheckpointsAndTheSameCommandResumes) {
  std::vector<pid_t> hosts;
  ASSERT_NO_FATAL_FAILURE(TrainPastTheFirstEpoch(
      R"({"feature_dim": "2000", "epochs": "40", "mini_batch_size": "32",
          "early_stopping_patience": "100"})",
      &hosts));
  for (pid_t pid : hosts) kill(pid, SIGTERM);
  for (int host = 1; host <= 3; ++host) {
    const Exit exit = processes_.Wait(hosts[static_cast<size_t>(host - 1)], 60);
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 75) << exit.output;
    EXPECT_FALSE(Contains(exit.output, "keel-metric epoch=40 ")) << exit.output;
  }
  ASSERT_NE(ReadFileOrEmpty(Root(1) + "/checkpoints/LATEST"), "");
  for (int from = 1; from <= 3; ++from) {
    for (int to = 1; to <= 3; ++to) {
      if (from == to) continue;
      std::filesystem::copy(Root(from) + "/checkpoints", Root(to) + "/checkpoints",
                            std::filesystem::copy_options::recursive |
                                std::filesystem::copy_options::skip_existing);
    }
  }
  std::vector<Exit> exits;
  ASSERT_NO_FATAL_FAILURE(TrainToTheEnd({1, 2, 3}, &exits));
  for (const Exit& exit : exits) {
    EXPECT_TRUE(Contains(exit.output, "the job resumes from it")) << exit.output;
  }
  EXPECT_FALSE(Contains(exits[0].output, "keel-metric epoch=1 ")) << exits[0].output;
  EXPECT_TRUE(Contains(exits[0].output, "keel-metric epoch=40 ")) << exits[0].output;
  EXPECT_EQ(ReadMetrics(Root(1) + "/model/metrics.json").count("train:objective_loss"), 1u);
}

TEST_F(SageMakerHosts, ABadHyperparameterFailsEveryHostNamingIt) {
  Generate(2000);
  for (int host = 1; host <= 3; ++host) {
    WriteContract(host, R"({"feature_dim": "2000", "mini_batch_size": "lots"})",
                  R"({"train": {"ContentType": "text/libsvm"}})");
  }
  std::vector<pid_t> hosts;
  for (int host = 1; host <= 3; ++host) hosts.push_back(Train(host));
  for (int host = 1; host <= 3; ++host) {
    const Exit exit = processes_.Wait(hosts[static_cast<size_t>(host - 1)], 30);
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_NE(exit.code, 0) << exit.output;
    const std::string failure = ReadFileOrEmpty(Root(host) + "/output/failure");
    EXPECT_TRUE(Contains(failure, "algo-" + std::to_string(host) + ": ")) << failure;
    EXPECT_TRUE(Contains(failure, "mini_batch_size")) << failure;
  }
}

TEST_F(SageMakerHosts, AHostKilledMidJobFailsEverySurvivingHostNamingIt) {
  KillAHostMidJob(3, "host algo-3 is gone");
}

TEST_F(SageMakerHosts, TheLeaderKilledMidJobFailsEverySurvivingHostNamingIt) {
  KillAHostMidJob(1, "the leader algo-1 is gone");
}

// ---------------------------------------------------------------------------
// `keel train` as deploy/kubernetes/train runs it: three pods of one Indexed
// Job, named keel-train-0.keel-train, ... (each namespace's /etc/hosts, as the
// headless Service's DNS gives them), each with the same command and its own
// JOB_COMPLETION_INDEX, a contract without resourceconfig.json (the hosts come
// from --hosts), and the volumes every pod mounts: the data, and one folder
// holding checkpoints/ and model/.

class KubernetesPods : public NamespaceHosts {
 protected:
  void SetUp() override {
    NamespaceHosts::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    PublishNames(0);
  }

  // Every namespace's /etc/hosts names the pods from index `first` on, as
  // the headless Service's DNS names the pods that have an address.
  // Rewritten in place, so that what runs in a namespace sees the change.
  void PublishNames(int first) {
    std::string hosts = "127.0.0.1 localhost\n";
    for (int index = first; index < 3; ++index) {
      hosts += Address(index + 1) + " " + Pod(index) + "\n";
    }
    WriteHostsFiles(hosts);
  }

  void TearDown() override { TearDownWithHostsFiles(); }

  static std::string Pod(int index) {
    return "keel-train-" + std::to_string(index) + ".keel-train";
  }
  std::string Root(int index) const { return folder_ + "/pod-" + std::to_string(index); }
  std::string State() const { return folder_ + "/state"; }

  // Pod `index`'s /opt/ml: the ConfigMap's two files, and the volumes.
  void WriteContract(int index, const std::string& hyperparameters, const std::string& channels) {
    const std::string root = Root(index);
    std::filesystem::create_directories(root + "/input/config");
    testing::WriteFile(root + "/input/config/hyperparameters.json", hyperparameters);
    testing::WriteFile(root + "/input/config/inputdataconfig.json", channels);
    std::filesystem::create_directories(State() + "/checkpoints");
    std::filesystem::create_directories(State() + "/model");
    std::filesystem::create_directory_symlink(folder_ + "/data", root + "/input/data");
    std::filesystem::create_directory_symlink(State() + "/checkpoints", root + "/checkpoints");
    std::filesystem::create_directory_symlink(State() + "/model", root + "/model");
  }

  // Pod `index`'s keel train, in host index + 1's namespace.
  pid_t Train(int index) {
    return processes_.Start({ip_, "netns", "exec", Host(index + 1), "/usr/bin/env",
                             "JOB_COMPLETION_INDEX=" + std::to_string(index), KeelBinary(), "train",
                             "--sagemaker_root=" + Root(index),
                             "--hosts=keel-train-{0..2}.keel-train", "--preemption_grace=30"});
  }
};

TEST_F(KubernetesPods, ThreePodsTrainTheSameCommandAndIndexZeroWritesTheModel) {
  Generate(20000);
  for (int index = 0; index < 3; ++index) {
    WriteContract(index, R"({"feature_dim": "2000", "epochs": "3", "mini_batch_size": "100"})",
                  R"({"train": {"ContentType": "text/libsvm"},
                      "validation": {"ContentType": "text/libsvm"}})");
  }
  // The leader's pod comes last, its name after the others have started.
  PublishNames(1);
  std::vector<pid_t> pods(3);
  for (int index : {2, 1}) pods[static_cast<size_t>(index)] = Train(index);
  for (int index : {2, 1}) {
    const pid_t pid = pods[static_cast<size_t>(index)];
    ASSERT_TRUE(WaitFor(
        [&] {
          return Contains(processes_.Output(pid),
                          "waiting for the leader's name " + Pod(0) + " to resolve");
        },
        30))
        << processes_.Output(pid);
  }
  PublishNames(0);
  pods[0] = Train(0);
  std::vector<Exit> exits;
  for (pid_t pid : pods) exits.push_back(processes_.Wait(pid, 180));
  for (const Exit& exit : exits) {
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 0) << exit.output;
  }
  const std::string& leader = exits[0].output;
  EXPECT_TRUE(Contains(leader, "host " + Pod(0) + " (the leader: scheduler")) << leader;
  EXPECT_TRUE(Contains(leader, "expecting 3 server(s) and 3 worker(s)")) << leader;
  EXPECT_TRUE(Contains(leader, "job finished: 3 of 3 worker(s) succeeded")) << leader;
  EXPECT_TRUE(Contains(leader, "keel-metric epoch=3 validation:roc_auc_score=")) << leader;
  // The others reached the leader by its pod name, from their own addresses.
  EXPECT_TRUE(Contains(exits[2].output, "this host: " + Pod(2) + ", index 2 of 3"))
      << exits[2].output;
  EXPECT_TRUE(Contains(exits[2].output, "scheduler at " + Pod(0) + ":9800")) << exits[2].output;
  EXPECT_TRUE(Contains(exits[2].output, "the leader's name " + Pod(0) + " resolves"))
      << exits[2].output;
  EXPECT_TRUE(Contains(exits[1].output, "advertising " + Address(2))) << exits[1].output;
  for (int index = 0; index < 3; ++index) {
    EXPECT_EQ(ReadFileOrEmpty(Root(index) + "/output/failure"), "") << index;
  }
  const auto metrics = ReadMetrics(State() + "/model/metrics.json");
  ASSERT_EQ(metrics.count("validation:roc_auc_score"), 1u) << leader;
  EXPECT_EQ(metrics.at("train:examples_per_epoch"), 20000);
}

TEST_F(KubernetesPods, SigtermToOnePodCheckpointsTheJobOnTheVolumeAndTheSameJobResumes) {
  // A node drained: its pod gets SIGTERM, the whole job checkpoints into the
  // shared volume and every pod exits 75; the Job starts every index again.
  Generate(20000);
  for (int index = 0; index < 3; ++index) {
    WriteContract(index, R"({"feature_dim": "2000", "epochs": "40", "mini_batch_size": "32",
                             "early_stopping_patience": "100"})",
                  R"({"train": {"ContentType": "text/libsvm"}})");
  }
  std::vector<pid_t> pods;
  for (int index = 0; index < 3; ++index) pods.push_back(Train(index));
  ASSERT_TRUE(
      WaitFor([&] { return Contains(processes_.Output(pods[0]), "keel-metric epoch=1 "); }, 60))
      << processes_.Output(pods[0]);
  kill(pods[1], SIGTERM);
  for (int index = 0; index < 3; ++index) {
    const Exit exit = processes_.Wait(pods[static_cast<size_t>(index)], 60);
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 75) << index << ": " << exit.output;
    EXPECT_FALSE(Contains(exit.output, "keel-metric epoch=40 ")) << exit.output;
  }
  ASSERT_NE(ReadFileOrEmpty(State() + "/checkpoints/LATEST"), "");
  pods.clear();
  for (int index = 0; index < 3; ++index) pods.push_back(Train(index));
  std::vector<Exit> exits;
  for (pid_t pid : pods) exits.push_back(processes_.Wait(pid, 180));
  for (const Exit& exit : exits) {
    ASSERT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, 0) << exit.output;
    EXPECT_TRUE(Contains(exit.output, "the job resumes from it")) << exit.output;
  }
  EXPECT_FALSE(Contains(exits[0].output, "keel-metric epoch=1 ")) << exits[0].output;
  EXPECT_TRUE(Contains(exits[0].output, "keel-metric epoch=40 ")) << exits[0].output;
  EXPECT_EQ(ReadMetrics(State() + "/model/metrics.json").count("train:objective_loss"), 1u);
}

TEST_F(KubernetesPods, AResourceConfigBesideHostsFailsThePodNamingBoth) {
  Generate(2000);
  WriteContract(1, R"({"feature_dim": "2000"})", R"({"train": {"ContentType": "text/libsvm"}})");
  testing::WriteFile(Root(1) + "/input/config/resourceconfig.json",
                     R"({"current_host": "algo-1", "hosts": ["algo-1"]})");
  const Exit exit = processes_.Wait(Train(1), 30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(ReadFileOrEmpty(Root(1) + "/output/failure"),
                       "resourceconfig.json and --hosts give the hosts: give one"))
      << exit.output;
}

// ---------------------------------------------------------------------------
// `keel launch --hostfile` over a real sshd on 127.0.0.1 (its own host key,
// client key, config and port), reached as two hosts: 127.0.0.1 and localhost.

class SshHosts : public MultiHostTest {
 protected:
  void SetUp() override {
    REQUIRE_ROOT_AND_TOOLS("sshd", "ssh", "ssh-keygen");
    port_ = testing::UnusedPort();
    const std::string keygen = "ssh-keygen -q -t ed25519 -N '' -f ";
    auto exit =
        Shell(keygen + folder_ + "/host_key && " + keygen + folder_ + "/client_key && cp " +
              folder_ + "/client_key.pub " + folder_ + "/authorized_keys && mkdir -p /run/sshd");
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
    testing::WriteFile(folder_ + "/sshd_config", "Port " + std::to_string(port_) +
                                                     "\nListenAddress 127.0.0.1\nHostKey " +
                                                     folder_ + "/host_key\nPidFile " + folder_ +
                                                     "/sshd.pid\nAuthorizedKeysFile " + folder_ +
                                                     "/authorized_keys\n"
                                                     "PermitRootLogin prohibit-password\n"
                                                     "PasswordAuthentication no\n"
                                                     "KbdInteractiveAuthentication no\n"
                                                     "UsePAM no\nStrictModes no\nPrintMotd no\n");
    testing::WriteFile(folder_ + "/ssh_config",
                       "Host *\n  IdentityFile " + folder_ +
                           "/client_key\n  IdentitiesOnly yes\n"
                           "  StrictHostKeyChecking no\n  UserKnownHostsFile " +
                           folder_ + "/known_hosts\n  LogLevel ERROR\n");
    sshd_ = processes_.Start({SystemTool("sshd"), "-D", "-e", "-f", folder_ + "/sshd_config"});
    const std::string address = "127.0.0.1:" + std::to_string(port_);
    ASSERT_TRUE(WaitFor([&] { return ProbeAddress(address, 1).empty(); }, 15))
        << processes_.Output(sshd_);
    exit = testing::Run({SystemTool("ssh"), "-F", folder_ + "/ssh_config", "-o", "BatchMode=yes",
                         "-p", std::to_string(port_), "127.0.0.1", "--", "true"},
                        30);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output << processes_.Output(sshd_);
  }

  // A hostfile of two hosts, each running a server and a worker; the first
  // also the scheduler. `second_host_flags` go to the second host's roles.
  std::string Hostfile(const std::string& second_host_flags = "") {
    const std::string port = std::to_string(port_);
    const std::string path = folder_ + "/hosts";
    testing::WriteFile(path, "# two hosts, one machine\nroot@127.0.0.1:" + port +
                                 " scheduler servers=1 workers=1\nlocalhost:" + port +
                                 " servers=1 workers=1 " + second_host_flags + "\n");
    return path;
  }

  std::vector<std::string> Launch(const std::string& hostfile) {
    return {KeelBinary(), "launch", "--hostfile=" + hostfile,
            "--ssh_options=-F " + folder_ + "/ssh_config", "--timeout=150", "--verbose"};
  }

  // Processes of this test's job still running (the sshd aside).
  std::vector<pid_t> Leftovers() const {
    std::vector<pid_t> found;
    for (pid_t pid : ProcessesMentioning(folder_)) {
      if (pid != sshd_) found.push_back(pid);
    }
    return found;
  }

  // Starts a long job over ssh and waits until every role has joined.
  pid_t StartLongJob() {
    auto argv = Launch(Hostfile());
    for (const std::string flag : {"--job=kv_bench", "--mode=dense", "--dense_sizes=64KiB",
                                   "--bench_seconds=100", "--minloglevel=0"}) {
      argv.push_back(flag);
    }
    argv.push_back("--bench_out=" + folder_);
    const pid_t launcher = processes_.Start(argv);
    EXPECT_TRUE(
        WaitFor([&] { return Contains(processes_.Output(launcher), "cluster view epoch 1"); }, 60))
        << processes_.Output(launcher);
    // The launcher, its ssh clients, and the remote guards and roles.
    EXPECT_GE(Leftovers().size(), 10u);
    return launcher;
  }

  int port_ = 0;
  pid_t sshd_ = -1;
  Processes processes_;
};

TEST_F(SshHosts, LaunchRunsAJobOnTwoHostsWithPrefixedLogs) {
  Generate(10000);
  auto argv = Launch(Hostfile());
  for (const auto& flag : JobFlags(2)) argv.push_back(flag);
  const auto exit = testing::Run(argv, 180);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_EQ(exit.code, 0) << exit.output;
  for (const char* prefix :
       {"[127.0.0.1 scheduler] ", "[127.0.0.1 server 0] ", "[127.0.0.1 worker 0] ",
        "[localhost server 1] ", "[localhost worker 1] "}) {
    EXPECT_TRUE(Contains(exit.output, prefix)) << prefix << "\n" << exit.output;
  }
  EXPECT_TRUE(Contains(exit.output, "job finished: 2 of 2 worker(s) succeeded")) << exit.output;
  EXPECT_EQ(ReadMetrics(folder_ + "/model/metrics.json").count("validation:roc_auc_score"), 1u);
  EXPECT_TRUE(WaitFor([&] { return Leftovers().empty(); }, 10));
}

TEST_F(SshHosts, ABadFlagOnOneHostStopsEveryRemoteProcess) {
  Generate(2000);
  auto argv = Launch(Hostfile("--heartbeat_interval=-1"));
  for (const auto& flag : JobFlags(50)) argv.push_back(flag);
  const auto exit = testing::Run(argv, 120);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "--heartbeat_interval must be positive")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "stopping the others")) << exit.output;
  EXPECT_TRUE(WaitFor([&] { return Leftovers().empty(); }, 15))
      << Leftovers().size() << " processes remain";
}

TEST_F(SshHosts, CtrlCStopsEveryRemoteProcess) {
  const pid_t launcher = StartLongJob();
  kill(launcher, SIGINT);
  const auto exit = processes_.Wait(launcher, 20);
  EXPECT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 130) << exit.output;
  EXPECT_TRUE(WaitFor([&] { return Leftovers().empty(); }, 15))
      << Leftovers().size() << " processes remain";
}

TEST_F(SshHosts, SigtermToTheLauncherStopsEveryRemoteProcess) {
  const pid_t launcher = StartLongJob();
  kill(launcher, SIGTERM);
  const auto exit = processes_.Wait(launcher, 20);
  EXPECT_TRUE(exit.finished) << exit.output;
  EXPECT_TRUE(WaitFor([&] { return Leftovers().empty(); }, 15))
      << Leftovers().size() << " processes remain\n" << exit.output;
}

TEST_F(SshHosts, KillingTheLauncherClosesTheConnectionsAndStopsEveryRemoteProcess) {
  const pid_t launcher = StartLongJob();
  kill(launcher, SIGKILL);
  processes_.Wait(launcher, 10);
  EXPECT_TRUE(WaitFor([&] { return Leftovers().empty(); }, 15))
      << Leftovers().size() << " processes remain";
}

// ---------------------------------------------------------------------------
// scripts/slurm/keel.sbatch against a real Slurm: munged with its own key and
// socket, slurmctld and two slurmd (two nodes on 127.0.0.1, different
// ports), all configured from a slurm.conf in the test's folder.

class SlurmCluster : public MultiHostTest {
 protected:
  // A port for a Slurm daemon. Every job of the fresh controller is 1, 2, ...,
  // whose scheduler takes kSlurmFirstPort + the job id: a daemon must not
  // hold those (a free pick from UnusedPort's range could).
  static int DaemonPort() {
    for (;;) {
      const int port = testing::UnusedPort();
      if (port < kSlurmFirstPort || port > kSlurmFirstPort + 100) return port;
    }
  }

  void SetUp() override {
    REQUIRE_ROOT_AND_TOOLS("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo");
    const std::string& dir = folder_;
    for (const char* sub : {"/state", "/spool", "/log"}) mkdir((dir + sub).c_str(), 0755);
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::string key(1024, '\0');
    random.read(&key[0], 1024);
    testing::WriteFile(dir + "/munge.key", key);
    chmod((dir + "/munge.key").c_str(), 0400);
    processes_.Start({SystemTool("munged"), "--foreground", "--force",
                      "--socket=" + dir + "/munge.sock", "--key-file=" + dir + "/munge.key",
                      "--pid-file=" + dir + "/munged.pid", "--seed-file=" + dir + "/munged.seed",
                      "--log-file=" + dir + "/munged.log"});
    ASSERT_TRUE(WaitFor([&] { return access((dir + "/munge.sock").c_str(), F_OK) == 0; }, 15));

    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    std::string conf =
        "ClusterName=keeltest\nSlurmctldHost=" + std::string(host) +
        "(127.0.0.1)\nSlurmctldPort=" + std::to_string(DaemonPort()) +
        "\nSlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
        "AuthInfo=socket=" +
        dir + "/munge.sock\nStateSaveLocation=" + dir + "/state\nSlurmdSpoolDir=" + dir +
        "/spool/%n\nSlurmctldPidFile=" + dir + "/slurmctld.pid\nSlurmdPidFile=" + dir +
        "/slurmd-%n.pid\nSlurmctldLogFile=" + dir + "/log/slurmctld.log\nSlurmdLogFile=" + dir +
        "/log/slurmd-%n.log\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        "MpiDefault=none\nSchedulerType=sched/builtin\nSelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core\nReturnToService=2\nSlurmdParameters=config_overrides\n"
        "InactiveLimit=0\nKillWait=5\nMinJobAge=300\n";
    for (int node = 1; node <= 2; ++node) {
      const std::string name = "knode" + std::to_string(node);
      mkdir((dir + "/spool/" + name).c_str(), 0755);
      conf += "NodeName=" + name + " NodeAddr=127.0.0.1 NodeHostname=" + host +
              " Port=" + std::to_string(DaemonPort()) + " CPUs=4 State=UNKNOWN\n";
    }
    conf +=
        "PartitionName=keel Nodes=knode1,knode2 Default=YES MaxTime=10 State=UP "
        "OverSubscribe=YES\n";
    testing::WriteFile(dir + "/slurm.conf", conf);
    setenv("SLURM_CONF", (dir + "/slurm.conf").c_str(), 1);  // for the tools and daemons
    daemons_.push_back(
        processes_.Start({SystemTool("slurmctld"), "-D", "-f", dir + "/slurm.conf"}));
    for (const char* name : {"knode1", "knode2"}) {
      daemons_.push_back(
          processes_.Start({SystemTool("slurmd"), "-D", "-N", name, "-f", dir + "/slurm.conf"}));
    }
    ASSERT_TRUE(WaitFor(
        [&] {
          const auto idle = Shell("sinfo -h -N -t idle -o %N", 10);
          return Contains(idle.output, "knode1") && Contains(idle.output, "knode2");
        },
        45))
        << ReadFileOrEmpty(dir + "/log/slurmctld.log");
  }

  void TearDown() override {
    if (!job_.empty()) Shell("scancel " + job_, 10);
    unsetenv("SLURM_CONF");
    // slurmd before slurmctld, each given 5 s to stop its steps and go
    // (Wait kills it by PID after that); munged goes with processes_.
    for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
      kill(*it, SIGTERM);
      processes_.Wait(*it, 5);
    }
  }

  std::string job_;
  std::vector<pid_t> daemons_;
  Processes processes_;
};

TEST_F(SlurmCluster, SbatchRunsAJobAcrossTheAllocation) {
  Generate(10000);
  std::string command = "cd " + folder_ + " && sbatch --parsable -N 2 -n 4 -o " + folder_ +
                        "/job-%j.out --export=ALL,KEEL=" + KeelBinary() + " " + testing::SourceDir() +
                        "/scripts/slurm/keel.sbatch --servers=1";
  for (const auto& flag : JobFlags(2)) command += " " + flag;
  const auto submitted = Shell(command);
  ASSERT_TRUE(submitted.finished && submitted.code == 0) << submitted.output;
  job_ = submitted.output.substr(0, submitted.output.find_first_of(";\n"));
  std::string state;
  WaitFor(
      [&] {
        const auto shown = Shell("scontrol show job -o " + job_, 10);
        const size_t at = shown.output.find("JobState=");
        state = at == std::string::npos
                    ? ""
                    : shown.output.substr(at + 9, shown.output.find(' ', at) - at - 9);
        return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" ||
               state == "TIMEOUT" || state == "NODE_FAIL";
      },
      150);
  const std::string output = ReadFileOrEmpty(folder_ + "/job-" + job_ + ".out");
  ASSERT_EQ(state, "COMPLETED") << output << ReadFileOrEmpty(folder_ + "/log/slurmctld.log");
  job_.clear();
  EXPECT_TRUE(Contains(output, "0: ")) << output;  // srun --label: task 0, the scheduler
  EXPECT_TRUE(Contains(output, ": scheduler, scheduler 127.0.0.1:")) << output;
  EXPECT_TRUE(Contains(output, "job finished: 2 of 2 worker(s) succeeded")) << output;
  EXPECT_TRUE(Contains(output, "on node 1: worker")) << output;  // the second node's tasks
  EXPECT_EQ(ReadMetrics(folder_ + "/model/metrics.json").count("validation:roc_auc_score"), 1u);
}

TEST_F(SlurmCluster, SigtermToSrunStopsEveryTask) {
  // keel.sbatch's step, run by srun itself (the batch script execs it): a
  // scheduler, a server and two workers over the two nodes.
  const std::string marker = "--bench_out=" + folder_;
  setenv("KEEL_SECRET_DIR", (folder_ + "/secrets").c_str(), 1);
  const pid_t launcher = processes_.Start(
      {SystemTool("srun"), "-N", "2", "-n", "4", "--kill-on-bad-exit=1", "--label", KeelBinary(),
       "launch", "--slurm", "--servers=1", "--job=kv_bench", "--mode=dense", "--dense_sizes=64KiB",
       "--bench_seconds=100", "--minloglevel=0", marker});
  unsetenv("KEEL_SECRET_DIR");
  // Its four roles (each task execs its role), and srun's helper process.
  const auto tasks = [&] {
    std::vector<pid_t> found;
    for (pid_t pid : ProcessesMentioning(marker)) {
      if (pid != launcher) found.push_back(pid);
    }
    return found;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return Contains(processes_.Output(launcher), "cluster view epoch 1") && tasks().size() >= 4;
      },
      90))
      << processes_.Output(launcher) << ReadFileOrEmpty(folder_ + "/log/slurmctld.log");
  kill(launcher, SIGTERM);
  const auto exit = processes_.Wait(launcher, 30);
  EXPECT_TRUE(exit.finished) << exit.output;
  EXPECT_TRUE(WaitFor([&] { return tasks().empty(); }, 15))
      << tasks().size() << " tasks remain\n" << exit.output;
}

}  // namespace
}  // namespace keel
