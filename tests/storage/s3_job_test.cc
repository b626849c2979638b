// A training job on S3: `keel launch` reads its channels from a real
// S3-protocol server on loopback and writes its model there, and
// `keel predict` scores with the model read back from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "io/storage.h"
#include "s3_server.h"
#include "test_util.h"

namespace keel::testing {
namespace {

class S3JobTest : public TempFolderTest {
 protected:
  void SetUp() override {
    const std::string problem = server_.Start();
    ASSERT_TRUE(problem.empty()) << problem;
    server_.ExportEnvironment();  // the keel processes inherit it
    root_ = std::string("s3://") + S3Server::kBucket + "/job";
    storage_ = OpenS3Storage(root_, server_.Options());
  }

  // Uploads every file of the local folder `channel` to data/`channel`/;
  // returns the examples (lines) it holds.
  size_t Upload(const std::string& channel) {
    size_t lines = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder_ + "/" + channel)) {
      const std::string text = ReadFileOrEmpty(entry.path());
      lines += CountLines(text);
      storage_->Put("data/" + channel + "/" + entry.path().filename().string(), text);
    }
    return lines;
  }

  // 6000 rows of 1000 features in two training files, and a validation
  // channel, in the bucket.
  void UploadSmallData() {
    const Exit generate = keel::testing::Run(
        {KeelBinary(), "datagen", "--model=linear", "--rows=6000", "--features=1000", "--nnz=10",
         "--seed=5", "--train_files=2", "--out=" + folder_},
        60);
    ASSERT_TRUE(generate.finished && generate.code == 0) << generate.output;
    Upload("train");
    Upload("validation");
  }

  // A 3-epoch linear learner on that data, 2 servers and 1 worker,
  // synchronous, its model at `model` in the bucket.
  Exit CheckpointedJob(const std::string& model, const std::vector<std::string>& more) {
    std::vector<std::string> argv = {
        KeelBinary(), "launch", "--servers=2", "--workers=1", "--job=linear_learner", "--epochs=3",
        "--mini_batch_size=100", "--optimizer=adam",
        // The last epoch's weights: a resumed run does not carry the best epoch's.
        "--keep_best_epoch=false", "--staleness=0", "--train=" + root_ + "/data/train/",
        "--validation=" + root_ + "/data/validation/", "--model_dir=" + root_ + "/" + model,
        "--minloglevel=1", "--verbose"};
    argv.insert(argv.end(), more.begin(), more.end());
    return keel::testing::Run(argv, 180);
  }

  // The manifests under `prefix`, sorted.
  std::vector<std::string> Manifests(const std::string& prefix) {
    std::vector<std::string> manifests;
    for (const ObjectInfo& object : storage_->List(prefix)) {
      if (object.key.size() > 14 && object.key.substr(object.key.size() - 14) == "/manifest.json") {
        manifests.push_back(object.key);
      }
    }
    std::sort(manifests.begin(), manifests.end());
    return manifests;
  }

  S3Server server_;
  std::string root_;
  std::unique_ptr<Storage> storage_;
};

TEST_F(S3JobTest, LinearLearnerTrainsFromS3WritesItsModelThereAndPredictReadsIt) {
  const Exit generate = keel::testing::Run(
      {KeelBinary(), "datagen", "--model=linear", "--rows=20000", "--features=2000", "--nnz=10",
       "--seed=7", "--train_files=3", "--out=" + folder_},
      60);
  ASSERT_TRUE(generate.finished && generate.code == 0) << generate.output;
  const size_t train_examples = Upload("train");
  Upload("validation");
  const size_t test_examples = Upload("test");

  const Exit train = keel::testing::Run(
      {KeelBinary(), "launch", "--servers=1", "--workers=2", "--job=linear_learner", "--epochs=2",
       "--learning_rate=0.01", "--train=" + root_ + "/data/train/",
       "--validation=" + root_ + "/data/validation/", "--test=" + root_ + "/data/test/",
       "--model_dir=" + root_ + "/model", "--minloglevel=1",
       "--verbose"},  // worker 0's epoch lines, read below
      180);
  ASSERT_TRUE(train.finished && train.code == 0) << train.output << server_.Output();
  // Every training example was read once per epoch, from S3.
  std::regex epoch_line("epoch [0-9]+: ([0-9]+) examples across");
  std::vector<size_t> per_epoch;
  for (auto it = std::sregex_iterator(train.output.begin(), train.output.end(), epoch_line);
       it != std::sregex_iterator(); ++it) {
    per_epoch.push_back(std::stoul((*it)[1]));
  }
  EXPECT_EQ(per_epoch, (std::vector<size_t>{train_examples, train_examples})) << train.output;

  // The model and the job's timeline are in the bucket, and nowhere on the local disk.
  std::vector<std::string> keys;
  for (const ObjectInfo& object : storage_->List("model/")) keys.push_back(object.key);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "model/history.jsonl", "model/metrics.json", "model/model.json",
                      "model/model.manifest", "model/timeline/launch.jsonl",
                      "model/timeline/scheduler.jsonl", "model/timeline/worker-0.jsonl",
                      "model/timeline/worker-1.jsonl", "model/weights.bin"}));
  EXPECT_FALSE(std::filesystem::exists("s3:"));
  EXPECT_EQ(CountLines(storage_->Get("model/history.jsonl")), 2u);
  const auto metrics = ParseMetrics(storage_->Get("model/metrics.json"));
  ASSERT_TRUE(metrics.count("validation:roc_auc_score")) << storage_->Get("model/metrics.json");
  ASSERT_TRUE(metrics.count("test:roc_auc_score"));
  EXPECT_GT(metrics.at("validation:roc_auc_score"), 0.6);

  // The report reads it all back from the bucket.
  const std::string report = folder_ + "/report.html";
  const Exit drawn =
      keel::testing::Run({KeelBinary(), "report", root_ + "/model", "--out=" + report}, 60);
  ASSERT_TRUE(drawn.finished && drawn.code == 0) << drawn.output;
  const std::string html = ReadFileOrEmpty(report);
  EXPECT_TRUE(Contains(html, "Examples/s per worker")) << html;
  EXPECT_TRUE(Contains(html, ">worker 1</text>")) << html;
  EXPECT_TRUE(Contains(html, "Validation roc_auc_score per epoch")) << html;

  const std::string predictions = folder_ + "/predictions.csv";
  const Exit predict =
      keel::testing::Run({KeelBinary(), "predict", "--model_dir=" + root_ + "/model",
                          "--data=" + root_ + "/data/test/", "--out=" + predictions},
                         60);
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  EXPECT_EQ(CountLines(ReadFileOrEmpty(predictions)), test_examples);
  // The model read back from S3 scores the test channel as the job did.
  std::smatch auc;
  ASSERT_TRUE(std::regex_search(predict.output, auc, std::regex("roc_auc_score ([0-9.]+)")))
      << predict.output;
  EXPECT_NEAR(std::stod(auc[1]), metrics.at("test:roc_auc_score"), 1e-4);
}

// Data, checkpoints and model all in the bucket: a run resumed from an S3
// checkpoint inside an epoch ends where the whole run did (one worker,
// synchronous: bit for bit).
TEST_F(S3JobTest, JobCheckpointsToS3AndResumesFromThereToTheSameWeights) {
  UploadSmallData();
  const Exit whole =
      CheckpointedJob("whole", {"--checkpoint_uri=" + root_ + "/ckpt", "--checkpoint_every=25"});
  ASSERT_TRUE(whole.finished && whole.code == 0) << whole.output << server_.Output();
  // Two inside each of 3 epochs, two between epochs, the final one.
  EXPECT_EQ(Manifests("ckpt/").size(), 9u);
  EXPECT_EQ(storage_->Get("ckpt/LATEST"), "ckpt-000004-000000000\n");

  const std::string middle = root_ + "/ckpt/ckpt-000002-000000025";
  const Exit verify = keel::testing::Run({KeelBinary(), "checkpoint", "verify", middle}, 60);
  EXPECT_EQ(verify.code, 0) << verify.output;
  const Exit resumed = CheckpointedJob("resumed", {"--resume=" + middle});
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
  // It trained epochs 2 and 3 only.
  EXPECT_FALSE(Contains(resumed.output, "epoch 1:")) << resumed.output;
  EXPECT_TRUE(Contains(resumed.output, "epoch 2:")) << resumed.output;
  EXPECT_TRUE(storage_->Get("resumed/weights.bin") == storage_->Get("whole/weights.bin"));
  EXPECT_FALSE(Contains(resumed.output + whole.output, S3Server::kSecretKey));
}

// Delta checkpoints on S3: every third full, the newest two kept with the
// checkpoint their chain needs, and a resume from a delta there ends where
// the whole run did.
TEST_F(S3JobTest, DeltaCheckpointChainsLiveOnS3AndResumeToTheSameWeights) {
  UploadSmallData();
  const Exit whole = CheckpointedJob(
      "whole", {"--checkpoint_uri=" + root_ + "/ckpt", "--checkpoint_every=25",
                "--checkpoint_delta", "--checkpoint_full_every=3", "--keep_checkpoints=2"});
  ASSERT_TRUE(whole.finished && whole.code == 0) << whole.output << server_.Output();
  // 1-25 full, 1-50, 2-0, 2-25 full, 2-50, 3-0, 3-25 full, 3-50, 4-0: the
  // newest two are deltas of 3-25, which is kept for them.
  EXPECT_EQ(Manifests("ckpt/"),
            (std::vector<std::string>{"ckpt/ckpt-000003-000000025/manifest.json",
                                      "ckpt/ckpt-000003-000000050/manifest.json",
                                      "ckpt/ckpt-000004-000000000/manifest.json"}));
  const std::string middle = root_ + "/ckpt/ckpt-000003-000000050";
  const Exit verify = keel::testing::Run({KeelBinary(), "checkpoint", "verify", middle}, 60);
  EXPECT_EQ(verify.code, 0) << verify.output;
  EXPECT_TRUE(Contains(verify.output,
                       "with its chain: 2 checkpoints from the full "
                       "ckpt-000003-000000025"))
      << verify.output;
  const Exit resumed = CheckpointedJob("resumed", {"--resume=" + middle});
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output;
  EXPECT_TRUE(storage_->Get("resumed/weights.bin") == storage_->Get("whole/weights.bin"));
}

TEST_F(S3JobTest, PredictNamesAMissingModelOnS3) {
  const Exit predict =
      keel::testing::Run({KeelBinary(), "predict", "--model_dir=" + root_ + "/no-model",
                          "--data=" + root_ + "/data/", "--out=" + folder_ + "/p.csv"},
                         60);
  EXPECT_TRUE(predict.finished);
  EXPECT_NE(predict.code, 0);
  EXPECT_TRUE(Contains(predict.output, root_ + "/no-model/weights.bin")) << predict.output;
  EXPECT_FALSE(Contains(predict.output, S3Server::kSecretKey)) << predict.output;
}

}  // namespace
}  // namespace keel::testing
