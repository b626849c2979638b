// The range and cross-flag rules of every flag family (cli/*_flags.h), which
// each role and `keel launch --check_flags` apply before anything starts. One
// rule per test; each error names the flag, its value and the rule.
#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <string>

#include "cli/bench_flags.h"
#include "cli/cluster_flags.h"
#include "cli/fault_flags.h"
#include "cli/job_flags.h"
#include "cli/role_flags.h"
#include "cli/wire_flags.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

// Each test sets flags as a command line would; the fixture restores them.
class FlagChecks : public ::testing::Test {
 protected:
  static void Set(const char* flag, const std::string& value) {
    ASSERT_FALSE(gflags::SetCommandLineOption(flag, value.c_str()).empty()) << flag;
  }
  // The error of the scheduler's checks for a cluster of 2 servers and 3 workers.
  static std::string SchedulerError() {
    return ErrorOf([] { CheckSchedulerFlags({2, "servers", 3, "workers"}); });
  }

 private:
  gflags::FlagSaver saver_;
};

TEST_F(FlagChecks, TheDefaultsPass) {
  EXPECT_EQ(SchedulerError(), "no error");
  EXPECT_EQ(ErrorOf([] { CheckNodeFlags(); }), "no error");
  EXPECT_EQ(ErrorOf([] { RequestRetryFromFlags(); }), "no error");
  EXPECT_EQ(ErrorOf([] { BenchFlags(); }), "no error");
}

TEST_F(FlagChecks, ReplicationNeedsMoreServersThanBackups) {
  Set("replication", "5");
  const std::string error = SchedulerError();
  EXPECT_TRUE(Contains(error, "--replication 5 is not in [0, 1]")) << error;
  EXPECT_TRUE(Contains(error, "fewer than --servers")) << error;
  Set("replication", "1");
  EXPECT_EQ(SchedulerError(), "no error");
}

TEST_F(FlagChecks, ServersAndWorkersAreBounded) {
  EXPECT_EQ(ErrorOf([] {
              CheckSchedulerFlags({2, "servers", 100000, "workers"});
            }),
            "--workers 100000 is not in [1, 4096]");
  EXPECT_EQ(ErrorOf([] {
              CheckSchedulerFlags({0, "num_servers", 1, "num_workers"});
            }),
            "--num_servers 0 is not in [1, 1024]");
}

TEST_F(FlagChecks, HeartbeatTimeoutMustBePositive) {
  Set("heartbeat_timeout", "0");
  EXPECT_EQ(SchedulerError(), "--heartbeat_timeout must be positive and at most 1e+07, not 0");
}

TEST_F(FlagChecks, SchedulerTimeoutsRefuseNaN) {
  Set("connect_timeout", "nan");
  EXPECT_TRUE(
      Contains(SchedulerError(), "--connect_timeout must be positive and at most 1e+07, not nan"))
      << SchedulerError();
}

TEST_F(FlagChecks, WorkerReplaceTimeoutMustBePositive) {
  Set("worker_replace_timeout", "-1");
  EXPECT_TRUE(Contains(SchedulerError(),
                       "--worker_replace_timeout must be positive and at most 1e+07, not -1"))
      << SchedulerError();
}

TEST_F(FlagChecks, CheckpointEveryMustNotBeNegative) {
  Set("checkpoint_every", "-5");
  EXPECT_TRUE(Contains(SchedulerError(), "--checkpoint_every -5 is not in [0, 1000000000]"))
      << SchedulerError();
}

TEST_F(FlagChecks, KeepCheckpointsMustNotBeNegative) {
  Set("keep_checkpoints", "-1");
  EXPECT_TRUE(Contains(SchedulerError(), "--keep_checkpoints -1 is not in [0, 1000000000]"))
      << SchedulerError();
}

TEST_F(FlagChecks, CheckpointFullEveryIsAtLeastOne) {
  Set("checkpoint_full_every", "0");
  EXPECT_TRUE(Contains(SchedulerError(), "--checkpoint_full_every 0 is not in [1, 1000000000]"))
      << SchedulerError();
}

TEST_F(FlagChecks, ResumeLatestNeedsACheckpointUri) {
  Set("resume", "latest");
  EXPECT_TRUE(Contains(SchedulerError(), "--resume latest needs --checkpoint_uri"))
      << SchedulerError();
}

TEST_F(FlagChecks, CheckpointUriMustBeUtf8) {
  Set("checkpoint_uri", "/data/ckpt-\xFF");
  EXPECT_EQ(SchedulerError(), "--checkpoint_uri '/data/ckpt-\\xFF' is not valid UTF-8");
}

TEST_F(FlagChecks, PortIsIn0To65535) {
  Set("port", "99999");
  EXPECT_EQ(ErrorOf([] { CheckNodeFlags(); }), "--port 99999 is not in [0, 65535]");
}

TEST_F(FlagChecks, RankIsMinusOneOrARank) {
  Set("rank", "-2");
  EXPECT_TRUE(Contains(ErrorOf([] { CheckNodeFlags(); }), "--rank -2 is not in [-1, 4095]"));
}

TEST_F(FlagChecks, HeartbeatIntervalMustBePositive) {
  Set("heartbeat_interval", "0");
  EXPECT_TRUE(Contains(ErrorOf([] { CheckNodeFlags(); }),
                       "--heartbeat_interval must be positive and at most 1e+07, not 0"));
}

TEST_F(FlagChecks, RegisterTimeoutIsBounded) {
  Set("register_timeout", "1e300");
  EXPECT_EQ(ErrorOf([] { CheckNodeFlags(); }),
            "--register_timeout must be positive and at most 1e+07, not 1e+300");
}

TEST_F(FlagChecks, SchedulerTimeoutMustBePositive) {
  Set("scheduler_timeout", "0");
  EXPECT_TRUE(Contains(ErrorOf([] { CheckNodeFlags(); }),
                       "--scheduler_timeout must be positive and at most 1e+07, not 0"));
}

TEST_F(FlagChecks, DropRateIsAShare) {
  Set("drop_rate", "2");
  EXPECT_EQ(ErrorOf([] { CheckNodeFlags(); }),
            "--drop_rate 2 is not in [0, 1]: a share of the messages");
}

TEST_F(FlagChecks, DelayMustNotBeNegative) {
  Set("delay_ms", "-3");
  EXPECT_TRUE(Contains(ErrorOf([] { TransportFaultsFromFlags(); }), "--delay_ms -3 is not in [0,"));
}

TEST_F(FlagChecks, RequestTimeoutMustBePositive) {
  Set("request_timeout_ms", "0");
  EXPECT_TRUE(Contains(ErrorOf([] { RequestRetryFromFlags(); }),
                       "--request_timeout_ms must be positive and at most 1000000000, not 0"));
}

TEST_F(FlagChecks, RequestMaxTimeoutIsNotBelowTheFirst) {
  Set("request_timeout_ms", "2000");
  Set("request_max_timeout_ms", "1000");
  EXPECT_EQ(ErrorOf([] { RequestRetryFromFlags(); }),
            "--request_max_timeout_ms 1000 is not in [2000, 1000000000]: not below "
            "--request_timeout_ms");
}

TEST_F(FlagChecks, RequestMinTimeoutMustBePositive) {
  Set("request_min_timeout_ms", "0");
  EXPECT_EQ(ErrorOf([] { RequestRetryFromFlags(); }),
            "--request_min_timeout_ms must be positive and at most 1000000000, not 0");
}

TEST_F(FlagChecks, RequestMinTimeoutIsNotAboveTheMax) {
  Set("request_timeout_ms", "1000");
  Set("request_min_timeout_ms", "3000");
  Set("request_max_timeout_ms", "2000");
  EXPECT_EQ(ErrorOf([] { RequestRetryFromFlags(); }),
            "--request_min_timeout_ms 3000 is not in [1, 2000]: not above "
            "--request_max_timeout_ms");
}

TEST_F(FlagChecks, RequestMinTimeoutIsNotAboveTheFirstEstimate) {
  Set("request_timeout_ms", "10");
  Set("request_min_timeout_ms", "20");
  EXPECT_EQ(ErrorOf([] { RequestRetryFromFlags(); }),
            "--request_min_timeout_ms 20 is not in [1, 10]: not above --request_timeout_ms, the "
            "first estimate");
}

TEST_F(FlagChecks, RequestMinTimeoutReachesTheWorker) {
  Set("request_min_timeout_ms", "7");
  EXPECT_DOUBLE_EQ(RequestRetryFromFlags().min_timeout_s, 0.007);
}

TEST_F(FlagChecks, RequestAttemptsAreBounded) {
  Set("request_attempts", "0");
  EXPECT_EQ(ErrorOf([] { RequestRetryFromFlags(); }), "--request_attempts 0 is not in [1, 1000]");
}

TEST_F(FlagChecks, HoldoutIsATenthWithoutValidationAndNoneBesideItOrForAPipe) {
  Set("holdout", "auto");
  EXPECT_EQ(HoldoutFromFlags("/data/train", ""), 0.1);
  EXPECT_EQ(HoldoutFromFlags("/data/train", "/data/validation"), 0.0);
  EXPECT_EQ(HoldoutFromFlags("pipe:/opt/ml/input/data/train_0", ""), 0.0);
  Set("holdout", "0.25");
  EXPECT_EQ(HoldoutFromFlags("/data/train", ""), 0.25);
  EXPECT_EQ(ErrorOf([] { HoldoutFromFlags("/data/train", "/data/validation"); }),
            "--holdout 0.25 and --validation /data/validation: a job validates on one or the "
            "other (--holdout=0 or auto with --validation)");
  EXPECT_NE(ErrorOf([] { HoldoutFromFlags("pipe:/p", ""); }).find("is a pipe, read once"),
            std::string::npos);
  Set("holdout", "0.9");
  EXPECT_EQ(ErrorOf([] { HoldoutFromFlags("/data/train", ""); }),
            "--holdout 0.9 is not auto or a share in [0, 0.5]");
  Set("holdout", "0");
  EXPECT_EQ(HoldoutFromFlags("/data/train", ""), 0.0);
}

TEST_F(FlagChecks, JobCountsAreBounded) {
  Set("job", "linear_learner");
  Set("mini_batch_size", "2000000000");
  EXPECT_EQ(ErrorOf([] { HyperparametersFromFlags(); }),
            "--mini_batch_size '2000000000' is not auto or an integer in 1..10000000");
}

TEST_F(FlagChecks, EpochsAreBounded) {
  Set("job", "linear_learner");
  Set("epochs", "2000000000");
  EXPECT_EQ(ErrorOf([] { HyperparametersFromFlags(); }),
            "--epochs 2000000000 is not in [1, 1000000]");
}

TEST_F(FlagChecks, ThreadsAreBounded) {
  Set("threads", "100000");
  EXPECT_EQ(ErrorOf([] { CheckComputeFlags(); }),
            "--threads 100000 is not in [0, 1024]: 0 is one per hardware thread");
}

TEST_F(FlagChecks, BenchSecondsMustBePositive) {
  Set("bench_seconds", "0");
  EXPECT_TRUE(Contains(ErrorOf([] { BenchFlags(); }),
                       "--bench_seconds must be positive and at most 1e+07, not 0"));
}

TEST_F(FlagChecks, BenchInflightIsBounded) {
  Set("inflight", "100000");
  EXPECT_EQ(ErrorOf([] { BenchFlags(); }), "--inflight 100000 is not in [1, 1024]");
}

TEST_F(FlagChecks, BenchSizesAreBoundedEvenWhereTheUnitWouldOverflow) {
  Set("dense_sizes", "17592186044416MiB");  // 2^44 MiB: 2^64 bytes
  EXPECT_TRUE(Contains(ErrorOf([] { BenchFlags(); }), "is above 1073741824"));
}

TEST_F(FlagChecks, WirePrecisionIsCheckedAndRefusedByTheJobsThatKeepFloat32) {
  // auto: fp16 for the linear learner's classifiers alone; the jobs that keep
  // float32 take auto.
  EXPECT_EQ(WirePrecisionFromFlags("linear_learner", "binary_classifier"), proto::WIRE_FP16);
  EXPECT_EQ(WirePrecisionFromFlags("linear_learner", "multiclass_classifier"), proto::WIRE_FP16);
  EXPECT_EQ(WirePrecisionFromFlags("linear_learner", "regressor"), proto::WIRE_FP32);
  for (const char* job : {"factorization_machines", "exact_sum", "kv_bench"}) {
    EXPECT_EQ(WirePrecisionFromFlags(job, "binary_classifier"), proto::WIRE_FP32) << job;
  }
  Set("wire_precision", "fp32");
  EXPECT_EQ(WirePrecisionFromFlags("linear_learner", "binary_classifier"), proto::WIRE_FP32);
  Set("wire_precision", "bf16");
  EXPECT_EQ(WirePrecisionFromFlags("linear_learner", "binary_classifier"), proto::WIRE_BF16);
  Set("wire_precision", "fp16");
  EXPECT_EQ(WirePrecisionFromFlags("factorization_machines", "binary_classifier"),
            proto::WIRE_FP16);
  // exact_sum checks the servers' sums exactly: it refuses a 16-bit wire,
  // and so does a worker's check of its job's flags (before it joins).
  Set("wire_precision", "bf16");
  Set("job", "exact_sum");
  Set("model_dir", ::testing::TempDir());
  const std::string error = ErrorOf([] { CheckWorkerJobFlags(); });
  EXPECT_TRUE(Contains(error, "--wire_precision=bf16 is refused by --job=exact_sum")) << error;
  EXPECT_TRUE(Contains(ErrorOf([] { WirePrecisionFromFlags("kv_bench", "binary_classifier"); }),
                       "--job=kv_bench"));
  Set("wire_precision", "fp32");
  EXPECT_EQ(ErrorOf([] { CheckWorkerJobFlags(); }), "no error");
  Set("wire_precision", "fp8");
  EXPECT_EQ(ErrorOf([] { WirePrecisionFromFlags("linear_learner", "binary_classifier"); }),
            "--wire_precision: 'fp8' is not auto, fp32, bf16 or fp16");
  Set("wire_precision", "auto");
  EXPECT_EQ(ErrorOf([] { CheckWorkerJobFlags(); }), "no error");  // exact_sum
}

TEST_F(FlagChecks, ServerApplyThreadsIsAutoOrIn1To64) {
  EXPECT_EQ(ServerApplyThreadsFromFlags(), AutoApplyThreads(UsableCores()));
  Set("server_apply_threads", "3");
  EXPECT_EQ(ServerApplyThreadsFromFlags(), 3);
  for (const char* bad : {"0", "65", "-1", "two", "", "2x"}) {
    Set("server_apply_threads", bad);
    const std::string error = ErrorOf([] { ServerApplyThreadsFromFlags(); });
    EXPECT_TRUE(Contains(error, "--server_apply_threads '" + std::string(bad) +
                                    "' is not auto or an integer in 1..64"))
        << error;
  }
}

TEST_F(FlagChecks, AutoApplyThreadsAreOneBelowFourCoresElseHalfAtMostEight) {
  EXPECT_EQ(AutoApplyThreads(1), 1);
  EXPECT_EQ(AutoApplyThreads(2), 1);
  EXPECT_EQ(AutoApplyThreads(3), 1);
  EXPECT_EQ(AutoApplyThreads(4), 2);
  EXPECT_EQ(AutoApplyThreads(9), 4);
  EXPECT_EQ(AutoApplyThreads(64), 8);
}

}  // namespace
}  // namespace keel
