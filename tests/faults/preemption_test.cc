// Preemption of real jobs: a SIGTERM (the notice spot instances get) to a
// process of the job or to `keel launch` checkpoints the job and ends it with
// status 75, naming the checkpoint; the same command with --resume=latest
// reads every epoch exactly once, on the same or another number of servers.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;

constexpr int kPreempted = 75;
constexpr int kEpochs = 30;  // at 20 examples a minibatch, seconds: the notice finds it running

class Preemption : public testing::LinearDataTest {
 public:
  Preemption() : LinearDataTest("preempt", 5) {}

  // A linear learner whose minibatches of 20 make the job last seconds.
  std::vector<std::string> Job(int servers, int workers, std::vector<std::string> more) const {
    std::vector<std::string> argv = testing::LaunchCommand(
        servers, workers,
        {"--job=linear_learner", "--train=" + folder_ + "/data/train",
         "--validation=" + folder_ + "/data/validation", "--epochs=" + std::to_string(kEpochs),
         "--mini_batch_size=20", "--early_stopping_patience=100",
         "--model_dir=" + folder_ + "/model", "--minloglevel=1"});
    argv.insert(argv.end(), more.begin(), more.end());
    return argv;
  }
  std::string Store() const { return "file://" + folder_ + "/ckpt"; }

  // Lines of the training channel's files: the examples of an epoch.
  size_t TrainExamples() const {
    const auto exit = testing::Shell("cat " + folder_ + "/data/train/* | wc -l");
    return static_cast<size_t>(std::stoul(exit.output));
  }

  // The checkpoint id a preempted job's line names ("" if none).
  static std::string NamedCheckpoint(const std::string& output) {
    std::smatch match;
    const std::regex line("preempted \\(exit status 75\\): checkpoint (ckpt-[0-9-]+) committed");
    return std::regex_search(output, match, line) ? match[1].str() : "";
  }

  // Whether the checkpoint chain from LATEST back holds `id`.
  bool ChainHas(const std::string& id) const {
    CheckpointStore store(Store());
    for (std::string at = store.Latest(); !at.empty(); at = store.ReadManifest(at).previous()) {
      if (at == id) return true;
    }
    return false;
  }

  // No process of the job is left (each names the job's folder).
  bool AllGone() const {
    return testing::WaitFor([&] { return testing::ProcessesMentioning(folder_ + "/").empty(); },
                            20);
  }

  // Checks a preempted job's `exit`: status 75, a line naming the checkpoint,
  // which is the store's LATEST, and no process left. Returns the checkpoint.
  std::string PreemptedCheckpoint(const testing::Exit& exit) {
    EXPECT_TRUE(exit.finished) << exit.output;
    EXPECT_EQ(exit.code, kPreempted) << exit.output;
    const std::string named = NamedCheckpoint(exit.output);
    EXPECT_FALSE(named.empty()) << exit.output;
    EXPECT_EQ(CheckpointStore(Store()).Latest(), named);
    EXPECT_TRUE(AllGone());
    return named;
  }

  // The preempted run and the resumed one together decided every epoch of
  // the job once (history.jsonl, which the resumed run goes on with), each
  // with every example of the training channel: the preempted epoch's
  // examples are the checkpoint's cursors and what was read after them.
  void ExpectEveryEpochReadOnce(const testing::Exit& resumed, const std::string& from) {
    ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
    // The resumed run started from `from`: the manifest of its final
    // checkpoint goes back to it.
    EXPECT_TRUE(ChainHas(from)) << resumed.output;
    const auto history = testing::ReadJsonLines(folder_ + "/model/history.jsonl");
    ASSERT_EQ(history.size(), static_cast<size_t>(kEpochs)) << resumed.output;
    const std::string examples = std::to_string(TrainExamples());
    for (int epoch = 1; epoch <= kEpochs; ++epoch) {
      const auto& line = history[static_cast<size_t>(epoch - 1)];
      EXPECT_EQ(line.at("epoch"), std::to_string(epoch));
      EXPECT_EQ(line.at("examples"), examples) << "epoch " << epoch;
    }
  }
  // A job on `servers` servers and `workers` workers checkpointing to
  // Store() (`preempted`), preempted by `fault`, then resumed from its
  // checkpoint on `resumed_servers` and `resumed_workers`: it reads every
  // epoch once. The faults are timed from the job's start (start+TIME): from
  // the launch, a loaded machine could preempt a process before the cluster
  // formed.
  void PreemptAndResume(int servers, int workers, const std::string& fault, int resumed_servers,
                        int resumed_workers, testing::Exit* preempted) {
    *preempted = testing::Run(
        Job(servers, workers, {"--checkpoint_uri=" + Store(), "--faults=" + fault}), 180);
    const std::string checkpoint = PreemptedCheckpoint(*preempted);
    const auto resumed = testing::Run(
        Job(resumed_servers, resumed_workers, {"--checkpoint_uri=" + Store(), "--resume=latest"}),
        180);
    ExpectEveryEpochReadOnce(resumed, checkpoint);
  }
};

TEST_F(Preemption, APreemptedWorkerCheckpointsTheJobAndResumeReadsEveryEpochOnce) {
  testing::Exit preempted;
  PreemptAndResume(2, 2, "preempt:worker:0@start+0.5s", 2, 2, &preempted);
  EXPECT_TRUE(Contains(preempted.output, "\"event\": \"preempt\"")) << preempted.output;
  EXPECT_TRUE(Contains(preempted.output, "job preempted")) << preempted.output;
}

TEST_F(Preemption, APreemptedJobResumesOnAnotherNumberOfServers) {
  testing::Exit preempted;
  PreemptAndResume(2, 2, "preempt:server:1@start+0.5s", 3, 2, &preempted);
}

// A preemption checkpoint is inside an epoch; resumed on another number of
// workers, the rest of that epoch is the shares of the workers that took it,
// each handed out whole (the new ranks have none of their own in it), and
// the epochs after it are sharded anew. (It used to refuse: "resume it with 2
// worker(s)".) The notice comes a second later than in the tests above (as
// when both were timed from the launch, to find the first epoch begun on a
// loaded machine: start+ waits for that now). It may still find the workers
// between epochs (then any number resumes as before): checkpoints taken at a
// chosen minibatch inside an epoch resume on more and on fewer workers in
// tests/process/checkpoint_job_test.cc.
TEST_F(Preemption, APreemptedJobResumesOnMoreWorkers) {
  testing::Exit preempted;
  PreemptAndResume(2, 2, "preempt:worker:1@start+1.5s", 2, 3, &preempted);
}

TEST_F(Preemption, APreemptedJobResumesOnFewerWorkers) {
  testing::Exit preempted;
  PreemptAndResume(2, 3, "preempt:worker:2@start+1.5s", 2, 1, &preempted);
}

TEST_F(Preemption, APreemptedJobWithoutACheckpointStoreSaysSoAndExitsPreempted) {
  const auto preempted = testing::Run(Job(1, 2, {"--faults=preempt:worker:1@start+0.5s"}), 180);
  EXPECT_TRUE(preempted.finished) << preempted.output;
  EXPECT_EQ(preempted.code, kPreempted) << preempted.output;
  EXPECT_TRUE(Contains(preempted.output, "no checkpoint: --checkpoint_uri is not set"))
      << preempted.output;
  EXPECT_TRUE(AllGone());
}

TEST_F(Preemption, ASigtermToTheLauncherCheckpointsTheJobAndExitsPreempted) {
  testing::Processes processes;
  const pid_t launcher =
      processes.Start(Job(2, 2, {"--checkpoint_uri=" + Store(), "--checkpoint_every=100"}));
  // Training is under way once a checkpoint inside the first epoch is committed.
  CheckpointStore store(Store());
  const bool training = testing::WaitFor(
      [&] {
        try {
          return !store.Latest().empty();
        } catch (const Error&) {
          return false;
        }
      },
      120);
  ASSERT_TRUE(training) << processes.Output(launcher);
  kill(launcher, SIGTERM);
  const testing::Exit exit = processes.Wait(launcher, 150);
  EXPECT_TRUE(Contains(exit.output, "preemption notice (SIGTERM)")) << exit.output;
  const std::string checkpoint = PreemptedCheckpoint(exit);
  const auto resumed =
      testing::Run(Job(2, 2, {"--checkpoint_uri=" + Store(), "--resume=latest"}), 180);
  ExpectEveryEpochReadOnce(resumed, checkpoint);
}

}  // namespace
}  // namespace keel
