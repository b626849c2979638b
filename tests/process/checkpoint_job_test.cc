// Checkpoints of real jobs: `keel launch --checkpoint_uri`, killed with -9,
// resumed with --resume, on the same or another number of servers; and
// damaged checkpoints refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "io/checkpoint.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;
using testing::MetricOf;
using testing::ReadFileOrEmpty;

// A learning rate with which later epochs do worse than the first on this data.
constexpr char kTooLargeRate[] = "5";

class CheckpointJob : public testing::LinearDataTest {
 public:
  CheckpointJob() : LinearDataTest("ckpt", 11) {}

  // A linear learner with synchronous consistency (staleness 0), so that a
  // single worker's run is deterministic.
  std::vector<std::string> Job(int servers, int workers, const std::string& model) const {
    return testing::LaunchCommand(
        servers, workers,
        {"--job=linear_learner", "--train=" + folder_ + "/data/train",
         "--validation=" + folder_ + "/data/validation", "--epochs=5", "--mini_batch_size=50",
         "--optimizer=adam", "--learning_rate=0.02", "--early_stopping_patience=100",
         // The last epoch's weights: a resumed run does not carry the best epoch's.
         "--keep_best_epoch=false", "--staleness=0", "--model_dir=" + folder_ + "/" + model,
         "--minloglevel=1"});
  }
  static std::vector<std::string> With(std::vector<std::string> argv,
                                       const std::vector<std::string>& more) {
    argv.insert(argv.end(), more.begin(), more.end());
    return argv;
  }
  testing::Exit Run(const std::vector<std::string>& argv) { return testing::Run(argv, 180); }
  // Job() on data of 10^5 features (made on first use) for two epochs: a
  // checkpoint interval touches a fraction of them.
  std::vector<std::string> SparseJob(int servers, const std::string& model,
                                     const std::vector<std::string>& more) {
    if (!std::ifstream(folder_ + "/sparse/train/part-0.libsvm")) {
      const auto data = testing::Run(
          {KeelBinary(), "datagen", "--model=linear", "--rows=20000", "--features=100000",
           "--nnz=10", "--seed=12", "--out=" + folder_ + "/sparse"},
          60);
      EXPECT_EQ(data.code, 0) << data.output;
    }
    std::vector<std::string> argv = With(Job(servers, 1, model), more);
    for (std::string& arg : argv) {
      if (arg.rfind("--train=", 0) == 0) arg = "--train=" + folder_ + "/sparse/train";
      if (arg.rfind("--validation=", 0) == 0)
        arg = "--validation=" + folder_ + "/sparse/validation";
    }
    return With(argv, {"--epochs=2"});
  }
  std::string Store(const std::string& name) const { return "file://" + folder_ + "/" + name; }
  std::string Weights(const std::string& model) const {
    return ReadFileOrEmpty(folder_ + "/" + model + "/weights.bin");
  }
  double Loss(const std::string& model) const {
    return MetricOf(folder_ + "/" + model + "/metrics.json", "validation:objective_loss");
  }

  // Starts `argv`, waits until checkpoint store `name` has a committed
  // checkpoint inside epoch 2 or later, then kills every process of the job
  // with SIGKILL. Returns the checkpoint LATEST named at the kill.
  std::string KillAfterAMidEpochCheckpoint(const std::vector<std::string>& argv,
                                           const std::string& name) {
    testing::Processes processes;
    const pid_t launcher = processes.Start(argv);
    CheckpointStore store(Store(name));
    std::string latest;
    const bool reached = testing::WaitFor(
        [&] {
          try {
            latest = store.Latest();
          } catch (const Error&) {
            return false;
          }
          return latest >= CheckpointId(2, 1) && latest.substr(latest.size() - 9) != "000000000";
        },
        120);
    // Every process of the job names the job's folder on its command line.
    for (pid_t pid : testing::ProcessesMentioning(folder_ + "/")) kill(pid, SIGKILL);
    const testing::Exit exit = processes.Wait(launcher, 10);
    EXPECT_TRUE(reached) << "no mid-epoch checkpoint within 120 s:\n" << exit.output;
    EXPECT_EQ(exit.code, 128 + SIGKILL) << "the job ended before it was killed:\n" << exit.output;
    EXPECT_TRUE(
        testing::WaitFor([&] { return testing::ProcessesMentioning(folder_ + "/").empty(); }, 10));
    return latest;
  }
};

// With several models (num_models 4): the checkpoint holds every model's rows
// and losses, so the resumed job goes on with all of them.
TEST_F(CheckpointJob, KilledJobResumesToTheUninterruptedRunsWeightsBitForBitWithOneWorker) {
  const auto uninterrupted = Run(With(Job(2, 1, "whole"), {"--num_models=4"}));
  ASSERT_TRUE(uninterrupted.finished && uninterrupted.code == 0) << uninterrupted.output;

  const std::string at = KillAfterAMidEpochCheckpoint(
      With(Job(2, 1, "killed"),
           {"--num_models=4", "--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=40"}),
      "ckpt");
  const auto resumed =
      Run(With(Job(2, 1, "resumed"), {"--num_models=4", "--checkpoint_uri=" + Store("ckpt"),
                                      "--checkpoint_every=40", "--resume=latest"}));
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
  ASSERT_FALSE(Weights("whole").empty());
  EXPECT_TRUE(Weights("resumed") == Weights("whole"))
      << "resumed from " << at << ": the final weights differ from the uninterrupted run's";
  EXPECT_EQ(Loss("resumed"), Loss("whole"));
  const std::string whole = folder_ + "/whole/metrics.json";
  const std::string resumed_metrics = folder_ + "/resumed/metrics.json";
  EXPECT_EQ(MetricOf(resumed_metrics, "train:selected_model"),
            MetricOf(whole, "train:selected_model"));
  for (int k = 0; k < 4; ++k) {
    for (const std::string name : {":validation:objective_loss", ":train:objective_loss"}) {
      const std::string metric = "model_" + std::to_string(k) + name;
      EXPECT_EQ(MetricOf(resumed_metrics, metric), MetricOf(whole, metric)) << metric;
    }
  }
}

// With two workers the order in which a server applies the two workers'
// pushes of one clock is not fixed, so even two uninterrupted runs differ in
// the last bits; the bound is on the loss.
TEST_F(CheckpointJob, KilledJobWithTwoWorkersResumesWithinOnePercentOfTheUninterruptedLoss) {
  const auto uninterrupted = Run(Job(2, 2, "whole"));
  ASSERT_TRUE(uninterrupted.finished && uninterrupted.code == 0) << uninterrupted.output;
  KillAfterAMidEpochCheckpoint(
      With(Job(2, 2, "killed"), {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=20"}),
      "ckpt");
  const auto resumed =
      Run(With(Job(2, 2, "resumed"),
               {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=20", "--resume=latest"}));
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
  ASSERT_GT(Loss("whole"), 0);
  EXPECT_NEAR(Loss("resumed"), Loss("whole"), 0.01 * Loss("whole"));
}

TEST_F(CheckpointJob, ResumesOnFewerAndOnMoreServersThanWroteTheCheckpoint) {
  const auto written = Run(
      With(Job(3, 1, "whole"), {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=150"}));
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  const std::string middle = Store("ckpt") + "/" + CheckpointId(3, 150);
  for (int servers : {2, 4}) {
    const std::string model = "on" + std::to_string(servers);
    const auto resumed = Run(With(Job(servers, 1, model), {"--resume=" + middle}));
    ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
    // One worker: the result does not depend on how keys are spread.
    EXPECT_TRUE(Weights(model) == Weights("whole")) << servers << " servers";
  }
}

// The best validation epoch comes before the checkpoint a job resumes from
// (a learning rate too large for this data: epoch 1 is the best): the resumed
// job ends with that epoch's model and figures, as the uninterrupted run does,
// not with its last epoch's.
TEST_F(CheckpointJob, AResumedJobKeepsTheBestEpochBeforeTheResume) {
  const std::vector<std::string> settings = {"--keep_best_epoch=true", "--optimizer=sgd",
                                             "--learning_rate=" + std::string(kTooLargeRate)};
  const auto written = Run(With(With(Job(2, 1, "whole"), settings),
                                {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=150"}));
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  const std::string whole = folder_ + "/whole/metrics.json";
  ASSERT_EQ(MetricOf(whole, "train:best_epoch"), 1) << "the test needs epoch 1 to be the best";
  const auto resumed = Run(With(With(Job(2, 1, "resumed"), settings),
                                {"--resume=" + Store("ckpt") + "/" + CheckpointId(3, 150)}));
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
  EXPECT_TRUE(Contains(resumed.output, "(epoch 1, kept for its lowest loss)")) << resumed.output;
  const std::string after = folder_ + "/resumed/metrics.json";
  EXPECT_EQ(MetricOf(after, "train:best_epoch"), 1);
  EXPECT_EQ(MetricOf(after, "validation:objective_loss"),
            MetricOf(whole, "validation:objective_loss"));
  ASSERT_FALSE(Weights("whole").empty());
  EXPECT_TRUE(Weights("resumed") == Weights("whole"));
}

// A checkpoint naming a best epoch's folder that is not one (a name from the
// manifest, which is input) is not read: the job says so and goes on.
TEST_F(CheckpointJob, ABestEpochFolderOutsideTheStoreIsNotRead) {
  const std::vector<std::string> settings = {"--keep_best_epoch=true", "--optimizer=sgd",
                                             "--learning_rate=" + std::string(kTooLargeRate)};
  const auto written = Run(With(With(Job(2, 1, "whole"), settings),
                                {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=150"}));
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  const std::string manifest = folder_ + "/ckpt/" + CheckpointId(3, 150) + "/manifest.json";
  std::string json = ReadFileOrEmpty(manifest);
  const std::string named = "\"best-model-epoch-1\"";
  ASSERT_NE(json.find(named), std::string::npos) << json;
  json.replace(json.find(named), named.size(), "\"../../whole\"");
  std::ofstream(manifest) << json;
  const auto resumed = Run(With(With(Job(2, 1, "resumed"), settings),
                                {"--resume=" + Store("ckpt") + "/" + CheckpointId(3, 150)}));
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
  EXPECT_TRUE(Contains(resumed.output, "'../../whole' as its best epoch's model folder"))
      << resumed.output;
}

// The first figure `key` has in `json` ("key": 12, "key": "12" or "key":1e-05), or -1.
double JsonFigure(const std::string& json, const std::string& key) {
  std::smatch match;
  const std::regex pattern("\"" + key + "\":\\s*\"?([-0-9.eE+]+)");
  return std::regex_search(json, match, pattern) ? std::stod(match[1]) : -1;
}

// A resumed job takes its data statistics for the training rows its
// checkpoint names (so its frequency prior stays the one it trained with),
// and a checkpoint without them (a build before they were kept) for the rows
// not known: the prior's auto is then its cap, as those builds' was.
TEST_F(CheckpointJob, AResumedJobKeepsTheRowsItsStatisticsWereTakenFor) {
  const auto written = Run(
      With(Job(1, 1, "whole"), {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=150"}));
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  const std::string model_json = ReadFileOrEmpty(folder_ + "/whole/model.json");
  const double rows = JsonFigure(model_json, "training_rows");
  EXPECT_GT(rows, 10000) << model_json;  // 20,000 rows less the validation's
  const std::string manifest = folder_ + "/ckpt/" + CheckpointId(3, 150) + "/manifest.json";
  const std::string json = ReadFileOrEmpty(manifest);
  EXPECT_EQ(JsonFigure(json, "statistics_rows"), rows) << json;

  const auto resume = [&](const std::string& edited, const std::string& model) {
    std::ofstream(manifest, std::ios::trunc) << edited;
    const auto resumed =
        Run(With(Job(1, 1, model), {"--resume=" + Store("ckpt") + "/" + CheckpointId(3, 150)}));
    EXPECT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
    return ReadFileOrEmpty(folder_ + "/" + model + "/model.json");
  };
  // The rows named (here 10^8, not the data's) are the ones taken.
  const std::regex named("\"statistics_rows\":\\s*\"?[0-9]+\"?");
  const std::string larger =
      resume(std::regex_replace(json, named, "\"statistics_rows\": \"100000000\""), "larger");
  EXPECT_EQ(JsonFigure(larger, "training_rows"), 1e8) << larger;
  EXPECT_NEAR(JsonFigure(larger, "frequency_prior"), 1e-5, 1e-12) << larger;
  // None named: the rows not known, the cap.
  const std::string legacy = resume(
      std::regex_replace(
          json, std::regex(",?\\s*" + std::string("\"statistics_rows\":\\s*\"?[0-9]+\"?")), ""),
      "legacy");
  EXPECT_EQ(JsonFigure(legacy, "training_rows"), 0) << legacy;
  EXPECT_DOUBLE_EQ(JsonFigure(legacy, "frequency_prior"), 0.003) << legacy;
  // No state of worker 0's at all (its share ended before the checkpoint's
  // point: the trainer state is empty, best_loss 0): the rows estimated again.
  std::string unreported =
      std::regex_replace(json, std::regex(",?\\s*\"statistics_rows\":\\s*\"?[0-9]+\"?"), "");
  unreported = std::regex_replace(unreported, std::regex("\"best_loss\":\\s*[-0-9.eE+]+"),
                                  "\"best_loss\": 0");
  ASSERT_NE(unreported.find("\"best_loss\": 0"), std::string::npos) << unreported;
  const std::string estimated = resume(unreported, "estimated");
  EXPECT_EQ(JsonFigure(estimated, "training_rows"), rows) << estimated;
}

TEST_F(CheckpointJob, CorruptedCheckpointIsRefusedNamingTheFileAndThePreviousGoodOne) {
  const auto written =
      Run(With(Job(2, 1, "whole"), {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=0"}));
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  CheckpointStore store(Store("ckpt"));
  const std::string latest = store.Latest();
  const std::vector<std::string> all = store.Committed();
  ASSERT_GE(all.size(), 3u);
  const std::string previous = all[all.size() - 2];
  {
    const std::string path = folder_ + "/ckpt/" + latest + "/server-1.snap";
    std::string bytes = ReadFileOrEmpty(path);
    bytes[bytes.size() / 2] ^= 0x40;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  const auto refused =
      Run(With(Job(2, 1, "resumed"), {"--checkpoint_uri=" + Store("ckpt"), "--resume=latest"}));
  EXPECT_TRUE(refused.finished);
  EXPECT_NE(refused.code, 0);
  EXPECT_TRUE(Contains(refused.output, latest + "/server-1.snap: checksum check failed"))
      << refused.output;
  EXPECT_TRUE(Contains(refused.output, "the previous good checkpoint is " + previous))
      << refused.output;

  const auto verify = testing::Run({KeelBinary(), "checkpoint", "verify", Store("ckpt")}, 60);
  EXPECT_EQ(verify.code, 1);
  EXPECT_TRUE(Contains(verify.output, "server-1.snap: checksum check failed")) << verify.output;
  const auto good =
      testing::Run({KeelBinary(), "checkpoint", "verify", Store("ckpt") + "/" + previous}, 60);
  EXPECT_EQ(good.code, 0) << good.output;

  // A checkpoint without its manifest does not exist.
  std::remove((folder_ + "/ckpt/" + previous + "/manifest.json").c_str());
  const auto missing =
      Run(With(Job(2, 1, "resumed"), {"--resume=" + Store("ckpt") + "/" + previous}));
  EXPECT_NE(missing.code, 0);
  EXPECT_TRUE(Contains(missing.output, "has no manifest.json")) << missing.output;
}

TEST_F(CheckpointJob, KeepCheckpointsLeavesTheNewestAndLsMarksLatest) {
  const auto written =
      Run(With(Job(2, 1, "whole"), {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=100",
                                    "--keep_checkpoints=2"}));
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  CheckpointStore store(Store("ckpt"));
  const std::vector<std::string> kept = store.Committed();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept.back(), store.Latest());
  EXPECT_TRUE(store.ReadManifest(kept.back()).final());
  EXPECT_EQ(kept.back(), CheckpointId(6, 0));  // after the fifth and last epoch
  const auto ls = testing::Run({KeelBinary(), "checkpoint", "ls", Store("ckpt")}, 60);
  EXPECT_EQ(ls.code, 0);
  EXPECT_TRUE(Contains(ls.output, kept.back() + "  epoch 6 minibatch 0")) << ls.output;
  EXPECT_TRUE(Contains(ls.output, "final  LATEST")) << ls.output;
  // The pruned checkpoints left no folder behind.
  std::vector<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(folder_ + "/ckpt")) {
    if (entry.is_directory()) folders.push_back(entry.path().filename().string());
  }
  std::sort(folders.begin(), folders.end());
  EXPECT_EQ(folders, kept);

  // The same command again is a new job on this job's store: refused before
  // it trains, naming the store, its latest and --resume; the store is as it was.
  const auto again =
      Run(With(Job(2, 1, "again"), {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=100",
                                    "--keep_checkpoints=2"}));
  EXPECT_TRUE(again.finished && again.code != 0) << again.output;
  EXPECT_TRUE(Contains(again.output, Store("ckpt") + " holds 2 checkpoint(s) of an earlier job"))
      << again.output;
  EXPECT_TRUE(Contains(again.output, "the latest " + kept.back())) << again.output;
  EXPECT_TRUE(Contains(again.output, "--resume=latest")) << again.output;
  EXPECT_EQ(store.Committed(), kept);
  EXPECT_EQ(store.Latest(), kept.back());
}

// A checkpoint inside an epoch resumes on another number of workers: the
// rest of that epoch is the shares of the workers that took it, and every
// epoch from there on reads every example once (preemption checkpoints, the
// usual case: tests/faults/preemption_test.cc). It used to be refused.
TEST_F(CheckpointJob, CheckpointInsideAnEpochResumesOnMoreAndOnFewerWorkers) {
  const auto written = Run(
      With(Job(2, 2, "whole"), {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=100"}));
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  const std::string examples =
      std::to_string(std::stoul(testing::Shell("cat " + folder_ + "/data/train/* | wc -l").output));
  for (const int workers : {3, 1}) {
    const std::string model = "resumed-on-" + std::to_string(workers);
    const auto resumed = Run(
        With(Job(2, workers, model), {"--resume=" + Store("ckpt") + "/" + CheckpointId(2, 100)}));
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    const auto history = testing::ReadJsonLines(folder_ + "/" + model + "/history.jsonl");
    ASSERT_EQ(history.size(), 4u) << resumed.output;  // epochs 2 to 5
    for (const auto& line : history) {
      EXPECT_EQ(line.at("examples"), examples) << workers << " workers, epoch " << line.at("epoch");
    }
  }
  // Between epochs any number of workers may resume.
  const auto between =
      Run(With(Job(2, 3, "between"), {"--resume=" + Store("ckpt") + "/" + CheckpointId(3, 0)}));
  EXPECT_EQ(between.code, 0) << between.output;
}

// Delta checkpoints: a chain (a full checkpoint, then only the rows changed
// since the one before) restores the very tables a full checkpoint written at
// the same point holds. The keys are many (10^5 features), so each interval
// changes a fraction of the rows and the rest must come from the chain's
// earlier links.
TEST_F(CheckpointJob, ADeltaChainRestoresTheTablesOfAFullCheckpointAtTheSamePointBitForBit) {
  auto job = [&](int servers, const std::string& model, const std::vector<std::string>& more) {
    return SparseJob(servers, model, With(more, {"--num_models=2"}));
  };
  const auto full =
      Run(job(2, "full", {"--checkpoint_uri=" + Store("full"), "--checkpoint_every=100"}));
  ASSERT_EQ(full.code, 0) << full.output;
  const auto delta = Run(job(2, "delta",
                             {"--checkpoint_uri=" + Store("delta"), "--checkpoint_every=100",
                              "--checkpoint_delta", "--checkpoint_full_every=4"}));
  ASSERT_EQ(delta.code, 0) << delta.output;
  ASSERT_FALSE(Weights("full").empty());
  ASSERT_TRUE(Weights("delta") == Weights("full")) << "the two runs trained differently";

  CheckpointStore full_store(Store("full")), delta_store(Store("delta"));
  const std::vector<std::string> ids = delta_store.Committed();
  ASSERT_EQ(ids, full_store.Committed());
  // Ten checkpoints (minibatches 100 to 400 of each epoch, then the final
  // one), every fourth full: the final one is a delta of the ninth.
  ASSERT_EQ(ids.size(), 10u);
  const std::string middle = ids[6], last = ids[9];
  const proto::CheckpointManifest middle_manifest = delta_store.ReadManifest(middle);
  EXPECT_EQ(middle_manifest.delta_depth(), 2);
  EXPECT_EQ(middle_manifest.delta_of(), ids[5]);
  EXPECT_EQ(delta_store.ReadManifest(ids[8]).delta_depth(), 0);
  const proto::CheckpointManifest last_manifest = delta_store.ReadManifest(last);
  EXPECT_TRUE(last_manifest.final());
  EXPECT_EQ(last_manifest.delta_of(), ids[8]);
  for (const auto& file : middle_manifest.files()) EXPECT_TRUE(file.delta()) << file.name();
  uint64_t delta_rows = 0, full_rows = 0;
  for (const auto& file : middle_manifest.files()) delta_rows += file.rows();
  const proto::CheckpointManifest full_middle = full_store.ReadManifest(middle);
  for (const auto& file : full_middle.files()) full_rows += file.rows();
  EXPECT_LT(delta_rows * 10, full_rows * 6) << "a delta of 100 minibatches holds most rows";

  // The final checkpoints restored and written out as models at once: the
  // tables themselves, compared bit for bit.
  for (const std::string& store : {std::string("full"), std::string("delta")}) {
    const auto resumed = Run(job(2, "final-" + store, {"--resume=" + Store(store) + "/" + last}));
    ASSERT_EQ(resumed.code, 0) << resumed.output;
  }
  EXPECT_TRUE(Weights("final-delta") == Weights("final-full"));
  EXPECT_TRUE(Weights("final-delta") == Weights("full"));
  // Training on from the middle of a chain, on another number of servers.
  const auto on3 = Run(job(3, "middle-on-3", {"--resume=" + Store("delta") + "/" + middle}));
  ASSERT_EQ(on3.code, 0) << on3.output;
  EXPECT_TRUE(Weights("middle-on-3") == Weights("full"));

  const auto verify =
      testing::Run({KeelBinary(), "checkpoint", "verify", Store("delta") + "/" + middle}, 60);
  EXPECT_EQ(verify.code, 0) << verify.output;
  EXPECT_TRUE(Contains(verify.output, "with its chain: 3 checkpoints from the full " + ids[4]))
      << verify.output;
  const auto ls = testing::Run({KeelBinary(), "checkpoint", "ls", Store("delta")}, 60);
  EXPECT_TRUE(Contains(ls.output, "delta 2 of " + ids[5])) << ls.output;
}

// Evicted rows (--evict_after) go into the next delta as removed keys: the
// final checkpoint's chain, on a job that evicts between checkpoints,
// restores the tables of a full checkpoint written at the same point.
TEST_F(CheckpointJob, ADeltaChainCarriesTheRowsEvictedBetweenItsCheckpoints) {
  const std::vector<std::string> evicting = {"--evict_after=30", "--admit_after=2"};
  const auto full = Run(SparseJob(
      2, "full", With(evicting, {"--checkpoint_uri=" + Store("full"), "--checkpoint_every=100"})));
  ASSERT_EQ(full.code, 0) << full.output;
  const auto delta =
      Run(SparseJob(2, "delta",
                    With(evicting, {"--checkpoint_uri=" + Store("delta"), "--checkpoint_every=100",
                                    "--checkpoint_delta", "--checkpoint_full_every=100"})));
  ASSERT_EQ(delta.code, 0) << delta.output;
  ASSERT_TRUE(Weights("delta") == Weights("full")) << "the two runs trained differently";
  CheckpointStore delta_store(Store("delta"));
  const std::string last = delta_store.Latest();
  ASSERT_EQ(delta_store.Chain(last).size(), 10u);
  // Some delta lists removed keys: a server's log says so at the resume,
  // and the restored tables match only if they were applied.
  for (const std::string& store : {std::string("full"), std::string("delta")}) {
    const auto resumed = Run(
        SparseJob(2, "final-" + store, With(evicting, {"--resume=" + Store(store) + "/" + last})));
    ASSERT_EQ(resumed.code, 0) << resumed.output;
  }
  EXPECT_TRUE(Weights("final-delta") == Weights("final-full"));
  EXPECT_TRUE(Weights("final-full") == Weights("full"));
}

// Checkpoints carry eviction's state (each row's clock of its last push, each
// range's clock): a job resumed from the middle of a delta chain evicts
// what the uninterrupted one did when it did, so its final weights are the
// same bit for bit.
TEST_F(CheckpointJob, EvictionResumesWhereItStoppedFromTheMiddleOfAChain) {
  const std::vector<std::string> evicting = {"--evict_after=30", "--admit_after=2",
                                             "--admit_sketch_mib=1"};
  const auto whole =
      Run(SparseJob(2, "whole",
                    With(evicting, {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=100",
                                    "--checkpoint_delta", "--checkpoint_full_every=4"})));
  ASSERT_EQ(whole.code, 0) << whole.output;
  CheckpointStore store(Store("ckpt"));
  const std::vector<std::string> ids = store.Committed();
  ASSERT_GE(ids.size(), 8u);
  ASSERT_EQ(store.ReadManifest(ids[6]).delta_depth(), 2);
  const auto resumed =
      Run(SparseJob(2, "resumed", With(evicting, {"--resume=" + Store("ckpt") + "/" + ids[6]})));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_TRUE(Weights("resumed") == Weights("whole"));
}

// Checkpoints carry the admission counters (--admit_after): a job resumed
// from the middle of a delta chain admits the same features at the same
// pushes as the uninterrupted one, so its final weights are the same bit for
// bit (without the counters they differ: features seen before the checkpoint
// would wait for their pushes again).
TEST_F(CheckpointJob, AdmissionCountersResumeWithTheirCheckpoint) {
  const std::vector<std::string> admission = {"--admit_after=3", "--admit_sketch_mib=1"};
  const auto whole =
      Run(SparseJob(2, "whole",
                    With(admission, {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=100",
                                     "--checkpoint_delta", "--checkpoint_full_every=4"})));
  ASSERT_EQ(whole.code, 0) << whole.output;
  const auto plain = Run(SparseJob(2, "plain", {}));
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_FALSE(Weights("whole") == Weights("plain")) << "admission changed nothing";
  CheckpointStore store(Store("ckpt"));
  const std::vector<std::string> ids = store.Committed();
  ASSERT_GE(ids.size(), 8u);
  // Early in the first epoch most features have been seen once or twice:
  // counters lost at the resume would delay their rows.
  const std::string at = ids[2];
  ASSERT_EQ(store.ReadManifest(at).delta_depth(), 2);
  const auto resumed =
      Run(SparseJob(2, "resumed", With(admission, {"--resume=" + Store("ckpt") + "/" + at})));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_TRUE(Weights("resumed") == Weights("whole"));
  // On three servers a range's counters are the sum of the checkpoint's
  // ranges it overlaps: a count can only rise (a feature may be admitted a
  // push early), so the model is close, not equal.
  const auto on3 =
      Run(SparseJob(3, "on3", With(admission, {"--resume=" + Store("ckpt") + "/" + at})));
  ASSERT_EQ(on3.code, 0) << on3.output;
  EXPECT_NEAR(Loss("on3"), Loss("whole"), 0.01 * Loss("whole"));
}

// Retention keeps what a kept delta needs: with --keep_checkpoints=1 the
// final delta's whole chain stays, and it still resumes.
TEST_F(CheckpointJob, KeepCheckpointsNeverDeletesTheBaseOfAKeptDelta) {
  const auto written =
      Run(With(Job(2, 1, "whole"),
               {"--checkpoint_uri=" + Store("ckpt"), "--checkpoint_every=100", "--checkpoint_delta",
                "--checkpoint_full_every=100", "--keep_checkpoints=1", "--epochs=2"}));
  ASSERT_EQ(written.code, 0) << written.output;
  CheckpointStore store(Store("ckpt"));
  const std::string latest = store.Latest();
  std::vector<std::string> chain;
  for (const auto& link : store.Chain(latest)) chain.push_back(link.id());
  EXPECT_EQ(store.Committed(), chain);
  EXPECT_EQ(chain.size(), 10u);  // 1-100 full to the final 3-0
  const auto resumed = Run(With(Job(2, 1, "resumed"), {"--resume=" + Store("ckpt"), "--epochs=2"}));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_TRUE(Weights("resumed") == Weights("whole"));
}

// With the push filter, a worker pushes every remainder it holds before it
// stops for a checkpoint, so a checkpoint holds all it was given: a killed
// job resumes to the weights of an uninterrupted run that stopped for the
// same checkpoints, bit for bit. (A remainder kept through the checkpoint
// would be lost with the killed worker, and the resumed run would differ.)
TEST_F(CheckpointJob, WithThePushFilterAKilledJobResumesToTheUninterruptedRunsWeightsBitForBit) {
  const auto filtered = [this](const std::string& model, const std::string& store) {
    return With(Job(2, 1, model), {"--push_filter_threshold=0.01", "--checkpoint_every=40",
                                   "--checkpoint_uri=" + Store(store)});
  };
  const auto uninterrupted = Run(filtered("whole", "whole_ckpt"));
  ASSERT_TRUE(uninterrupted.finished && uninterrupted.code == 0) << uninterrupted.output;
  const std::string at = KillAfterAMidEpochCheckpoint(filtered("killed", "ckpt"), "ckpt");
  const auto resumed = Run(With(filtered("resumed", "ckpt"), {"--resume=latest"}));
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
  ASSERT_FALSE(Weights("whole").empty());
  EXPECT_TRUE(Weights("resumed") == Weights("whole"))
      << "resumed from " << at << ": the final weights differ from the uninterrupted run's";
  EXPECT_EQ(Loss("resumed"), Loss("whole"));
}

}  // namespace
}  // namespace keel
