// CheckpointCoordinator's preemption and periodic checkpoints, in one
// process: the scheduler's side driven by hand (workers' CHECKPOINT messages, servers'
// SNAPSHOT replies), with a real checkpoint store in a temporary folder.
#include "scheduler/checkpoint_coordinator.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "io/checkpoint.h"
#include "test_util.h"

namespace keel {
namespace {

constexpr int kServer = 10;
const std::set<int> kWorkers = {1, 2};  // node ids; ranks 0 and 1
const std::set<int> kServers = {kServer};

CheckpointOptions Options(bool delta) {
  CheckpointOptions options;
  options.every = 100;
  options.delta = delta;
  return options;
}

class PreemptionCheckpoint : public testing::TempFolderTest {
 public:
  explicit PreemptionCheckpoint(bool delta = false)
      : coordinator_(
            [&] {
              CheckpointOptions options = Options(delta);
              options.uri = "file://" + folder_ + "/ckpt";
              return options;
            }(),
            [this](int node, Message& message) {
              sent_.push_back({node, message.meta});
            },
            [this](const std::string& id, const std::string& error) {
              std::lock_guard<std::mutex> lock(mutex_);
              committed_[id] = error;
              changed_.notify_all();
            }) {}

  // Worker `node` (rank node - 1) stops at `batches` of epoch 2.
  void Stop(int node, uint64_t batches, bool preempt) { Report(node, 2, batches, preempt, false); }
  // Worker `node` waits at (`epoch`, `batches`), or reports its share of
  // `epoch` done there.
  void Report(int node, int epoch, uint64_t batches, bool preempt, bool done) {
    proto::Meta meta;
    meta.set_sequence(done ? 0 : ++sequence_);
    meta.mutable_cursor()->set_epoch(epoch);
    meta.mutable_cursor()->set_batches(batches);
    meta.mutable_cursor()->set_examples(batches * 20);
    meta.mutable_cursor()->set_epoch_done(done);
    meta.set_preempt(preempt);
    coordinator_.OnWorker(node, node - 1, meta, kWorkers, kServers, 1);
  }
  // The server copied the rows of `id` (reply), then wrote them (report).
  void ServerCopies(const std::string& id) {
    proto::Meta copied;
    copied.set_response(true);
    copied.set_checkpoint(id);
    coordinator_.OnServer(kServer, copied);
  }
  void ServerWrites(const std::string& id, bool delta = false, const std::string& error = "") {
    proto::Meta written;
    written.set_checkpoint(id);
    written.set_error(error);
    written.mutable_file()->set_delta(delta);
    written.mutable_file()->set_name("server-0.snap");
    written.mutable_file()->set_bytes(64);  // what a manifest may name (the file is not read)
    written.mutable_file()->set_checksum("0123456789abcdef");
    coordinator_.OnServer(kServer, written);
  }
  // Waits for the commit thread, then finishes the commit as the scheduler does.
  void AwaitCommit(const std::string& id) {
    std::unique_lock<std::mutex> lock(mutex_);
    ASSERT_TRUE(changed_.wait_for(lock, std::chrono::seconds(30),
                                  [&] { return committed_.count(id) > 0; }));
    const std::string error = committed_[id];
    lock.unlock();
    coordinator_.FinishCommit(id, error);
  }
  // The messages sent so far with `command`, by node.
  std::multimap<int, proto::Meta> Sent(proto::Command command) const {
    std::multimap<int, proto::Meta> found;
    for (const auto& [node, meta] : sent_) {
      if (meta.command() == command) found.emplace(node, meta);
    }
    return found;
  }

 protected:
  uint64_t sequence_ = 100;
  std::vector<std::pair<int, proto::Meta>> sent_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> committed_;
  CheckpointCoordinator coordinator_;
};

TEST_F(PreemptionCheckpoint, TakesEachWorkerWhereItStoppedAndAnswersOnlyOnceCommitted) {
  coordinator_.Preempt();
  Stop(1, 37, /*preempt=*/true);
  EXPECT_TRUE(Sent(proto::SNAPSHOT).empty()) << "worker 2 has not stopped yet";
  Stop(2, 35, /*preempt=*/true);
  const std::string id = CheckpointId(2, 37);  // the furthest worker's minibatch
  ASSERT_EQ(Sent(proto::SNAPSHOT).size(), 1u);
  EXPECT_EQ(Sent(proto::SNAPSHOT).begin()->second.checkpoint(), id);

  ServerCopies(id);
  EXPECT_TRUE(Sent(proto::CHECKPOINT).empty()) << "the workers wait for the commit, not the copy";
  std::string committed, error;
  EXPECT_FALSE(coordinator_.PreemptionOver(&committed, &error));

  ServerWrites(id);
  AwaitCommit(id);
  ASSERT_TRUE(coordinator_.PreemptionOver(&committed, &error));
  EXPECT_EQ(committed, id);
  EXPECT_EQ(error, "");
  const auto answers = Sent(proto::CHECKPOINT);
  ASSERT_EQ(answers.size(), 2u);
  for (const auto& [node, meta] : answers) {
    EXPECT_TRUE(meta.preempt()) << "node " << node;
    EXPECT_EQ(meta.error(), "");
  }
  const proto::CheckpointManifest manifest =
      CheckpointStore("file://" + folder_ + "/ckpt").ReadManifest(id);
  ASSERT_EQ(manifest.workers_size(), 2);
  std::map<int, uint64_t> batches;
  for (const auto& cursor : manifest.workers()) batches[cursor.rank()] = cursor.batches();
  EXPECT_EQ(batches, (std::map<int, uint64_t>{{0, 37}, {1, 35}}));
}

TEST_F(PreemptionCheckpoint, AWorkerAtAPeriodicPointCountsAsStoppedAndNoCheckpointFollows) {
  coordinator_.Preempt();
  Stop(1, 100, /*preempt=*/false);  // at the periodic point when the order came
  Stop(2, 64, /*preempt=*/true);
  const std::string id = CheckpointId(2, 100);
  ASSERT_EQ(Sent(proto::SNAPSHOT).size(), 1u);
  ServerCopies(id);
  ServerWrites(id);
  AwaitCommit(id);
  // Workers stopping again find no checkpoint taken: the job ends after this one.
  Stop(1, 101, /*preempt=*/true);
  Stop(2, 65, /*preempt=*/true);
  EXPECT_EQ(Sent(proto::SNAPSHOT).size(), 1u);
}

using PeriodicCheckpoint = PreemptionCheckpoint;

// A worker that rejoined after the others went on without it (out of the
// view for a while) reaches the points they passed: it goes on at once
// instead of waiting for workers that will not come back to them.
TEST_F(PeriodicCheckpoint, AWorkerAtAPointTheOthersPassedGoesOnWithoutOne) {
  Report(1, 9, 100, false, /*done=*/true);  // worker 1's share of epoch 9 is done
  Report(2, 9, 0, false, false);            // the rejoined worker at epoch 9's start
  auto answers = Sent(proto::CHECKPOINT);
  ASSERT_EQ(answers.count(2), 1u) << "the rejoined worker waits for a checkpoint that never comes";
  EXPECT_EQ(answers.find(2)->second.error(), "");
  Report(2, 9, 100, false, false);  // and at the point where worker 1 finished
  EXPECT_EQ(Sent(proto::CHECKPOINT).count(2), 2u);
  EXPECT_TRUE(Sent(proto::SNAPSHOT).empty());
}

TEST_F(PeriodicCheckpoint, AWorkerBehindOneThatWaitsFurtherOnGoesOnAndMeetsItThere) {
  Report(1, 9, 200, false, false);  // waits at minibatch 200
  Report(2, 9, 100, false, false);  // the rejoined worker, at minibatch 100
  ASSERT_EQ(Sent(proto::CHECKPOINT).count(2), 1u);
  EXPECT_EQ(Sent(proto::CHECKPOINT).count(1), 0u);
  EXPECT_TRUE(Sent(proto::SNAPSHOT).empty());
  Report(2, 9, 200, false, false);
  const auto snapshots = Sent(proto::SNAPSHOT);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots.begin()->second.checkpoint(), CheckpointId(9, 200));
}

TEST_F(PeriodicCheckpoint, AWorkerWhoseShareEndedBeforeThePointDoesNotHoldItBack) {
  Report(1, 9, 80, false, /*done=*/true);  // a shorter share
  Report(2, 9, 100, false, false);
  EXPECT_EQ(Sent(proto::CHECKPOINT).count(2), 0u) << "answered only once the copy is made";
  const auto snapshots = Sent(proto::SNAPSHOT);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots.begin()->second.checkpoint(), CheckpointId(9, 100));
}

// A restarted scheduler hears a worker waiting at a checkpoint before its
// servers have registered again: nothing can be copied yet, and the
// checkpoint must not start (it would wait for ever for copies no server was
// asked for).
TEST_F(PeriodicCheckpoint, NoCheckpointStartsWithoutServersAndOneStartsOnceTheyAreBack) {
  proto::Meta meta;
  meta.set_sequence(7);
  meta.mutable_cursor()->set_epoch(7);
  meta.mutable_cursor()->set_batches(100);
  coordinator_.OnWorker(2, 1, meta, {2}, /*servers=*/{}, 1);
  EXPECT_TRUE(Sent(proto::SNAPSHOT).empty());
  coordinator_.OnMembership({2}, kServers, 1);
  const auto snapshots = Sent(proto::SNAPSHOT);
  ASSERT_EQ(snapshots.size(), 1u) << "stuck: a copy begun with no server to make it";
  EXPECT_EQ(snapshots.begin()->second.checkpoint(), CheckpointId(7, 100));
}

class DeltaCheckpoint : public PreemptionCheckpoint {
 public:
  DeltaCheckpoint() : PreemptionCheckpoint(/*delta=*/true) {}
  // Both workers at minibatch `batches` of epoch 9; the SNAPSHOT sent.
  proto::Meta Point(uint64_t batches) {
    Report(1, 9, batches, false, false);
    Report(2, 9, batches, false, false);
    const auto snapshots = Sent(proto::SNAPSHOT);
    EXPECT_FALSE(snapshots.empty());
    proto::Meta last;
    for (const auto& [node, meta] : snapshots) {
      if (meta.checkpoint() == CheckpointId(9, batches)) last = meta;
    }
    EXPECT_EQ(last.checkpoint(), CheckpointId(9, batches));
    return last;
  }
  bool Committed(const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return committed_.count(id) > 0;
  }
};

// A delta may build on a checkpoint still being written, but commits only
// after it; it is abandoned with its base; the job's final checkpoint builds
// on a committed one only.
TEST_F(DeltaCheckpoint, ADeltaCommitsAfterItsBaseAndIsAbandonedWithIt) {
  const std::string a = CheckpointId(9, 100), b = CheckpointId(9, 200), c = CheckpointId(9, 300),
                    d = CheckpointId(9, 400);
  EXPECT_EQ(Point(100).delta_base(), "");  // the first is full
  ServerCopies(a);
  EXPECT_EQ(Point(200).delta_base(), a);  // a is still being written
  ServerCopies(b);
  ServerWrites(b, /*delta=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(Committed(b)) << "a delta committed before its base";
  ServerWrites(a);
  AwaitCommit(a);
  AwaitCommit(b);
  CheckpointStore store("file://" + folder_ + "/ckpt");
  EXPECT_EQ(store.Latest(), b);
  EXPECT_EQ(store.ReadManifest(b).delta_of(), a);
  EXPECT_EQ(store.ReadManifest(b).delta_depth(), 1);

  EXPECT_EQ(Point(300).delta_base(), b);
  ServerCopies(c);
  EXPECT_EQ(Point(400).delta_base(), c);
  ServerCopies(d);
  ServerWrites(d, /*delta=*/true);
  ServerWrites(c, /*delta=*/true, "disk full");  // c is abandoned, and d with it
  EXPECT_FALSE(Committed(d));
  EXPECT_EQ(store.Latest(), b);
  EXPECT_EQ(store.Incomplete().size(), 0u);  // nothing was written by the fake server

  // 9-500 is full (its base was abandoned). The final checkpoint, ready
  // while 9-500 is still being written, waits for its commit and is then a
  // delta of it.
  EXPECT_EQ(Point(500).delta_base(), "") << "the base was abandoned";
  ServerCopies(CheckpointId(9, 500));
  proto::Meta final_point;
  final_point.set_final(true);
  final_point.mutable_cursor()->set_epoch(10);
  for (int node : kWorkers) {
    final_point.set_sequence(++sequence_);
    coordinator_.OnWorker(node, node - 1, final_point, kWorkers, kServers, 1);
  }
  auto final_base = [&] {
    std::string base = "none sent";
    for (const auto& [node, meta] : Sent(proto::SNAPSHOT)) {
      if (meta.checkpoint() == CheckpointId(10, 0)) base = meta.delta_base();
    }
    return base;
  };
  EXPECT_EQ(final_base(), "none sent");
  ServerWrites(CheckpointId(9, 500));
  AwaitCommit(CheckpointId(9, 500));
  EXPECT_EQ(final_base(), CheckpointId(9, 500));
}

// A new job on a store holding another job's committed checkpoints would mix
// its checkpoints with them (pruned as the oldest, LATEST naming the earlier
// job's): refused, naming the store, the latest and --resume. A scheduler
// that takes over the running job (restarted) takes them as its own.
TEST_F(PreemptionCheckpoint, ANewJobRefusesAStoreHoldingAnEarlierJobsCheckpoints) {
  coordinator_.Preempt();
  Stop(1, 37, /*preempt=*/true);
  Stop(2, 35, /*preempt=*/true);
  const std::string id = CheckpointId(2, 37);
  ServerCopies(id);
  ServerWrites(id);
  AwaitCommit(id);

  CheckpointOptions options = Options(false);
  options.uri = "file://" + folder_ + "/ckpt";
  auto make = [&] {
    CheckpointCoordinator next(options, [](int, Message&) {}, [](const std::string&, const std::string&) {});
  };
  const std::string error = testing::ErrorOf(make);
  EXPECT_TRUE(testing::Contains(error, options.uri + " holds 1 checkpoint(s) of an earlier job")) << error;
  EXPECT_TRUE(testing::Contains(error, "the latest " + id)) << error;
  EXPECT_TRUE(testing::Contains(error, "--resume=latest")) << error;

  options.takes_over = true;
  EXPECT_NO_THROW(make());

  options.takes_over = false;
  options.uri = "file://" + folder_ + "/other";  // a store of its own
  EXPECT_NO_THROW(make());
}

}  // namespace
}  // namespace keel
