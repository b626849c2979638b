// The cluster secret's file (keel keygen, --secret_file), the log of refused
// peers and the monitor events it reads: kv/cluster_secret.h,
// kv/peer_authenticator.h, kv/monitor_event.h.
#include "kv/cluster_secret.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zmq.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "kv/monitor_event.h"
#include "kv/peer_authenticator.h"
#include "launch/remote.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::ErrorOf;
using testing::ModeOf;
using testing::TempFolderTest;

// A keypair made by libzmq directly, independent of GenerateClusterSecret.
ClusterSecret ZmqKeypair() {
  char public_key[41], secret_key[41];
  EXPECT_EQ(zmq_curve_keypair(public_key, secret_key), 0);
  return ClusterSecret{public_key, secret_key};
}

class SecretFile : public TempFolderTest {};

TEST_F(SecretFile, IsCreatedWithMode0600WhateverTheUmask) {
  const mode_t old_mask = umask(0);  // would leave 0666 to a plain open()
  const std::string path = folder_ + "/cluster.secret";
  WriteClusterSecretFile(path, GenerateClusterSecret());
  umask(old_mask);
  EXPECT_EQ(ModeOf(path), 0600u);
}

TEST_F(SecretFile, ReadsBackTheKeysItWasWrittenWith) {
  const ClusterSecret written = ZmqKeypair();
  const std::string path = folder_ + "/cluster.secret";
  WriteClusterSecretFile(path, written);
  const ClusterSecret read = ReadClusterSecretFile(path);
  EXPECT_EQ(read.public_key, written.public_key);
  EXPECT_EQ(read.secret_key, written.secret_key);
}

TEST_F(SecretFile, IsNeverOverwritten) {
  const std::string path = WriteFile("cluster.secret", "precious\n");
  const std::string error = ErrorOf([&] { WriteClusterSecretFile(path, GenerateClusterSecret()); });
  EXPECT_NE(error.find("cannot create secret file '" + path + "'"), std::string::npos) << error;
  EXPECT_EQ(ReadFile(path), "precious\n");
}

TEST_F(SecretFile, ReadableByOthersIsRefusedNamingTheFileAndItsMode) {
  const std::string path = WriteFile("cluster.secret", FormatClusterSecret(ZmqKeypair()));
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  const std::string error = ErrorOf([&] { ReadClusterSecretFile(path); });
  EXPECT_NE(error.find("secret file '" + path + "' has mode 0644"), std::string::npos) << error;
}

TEST_F(SecretFile, ReadableByTheGroupIsRefused) {
  const std::string path = WriteFile("cluster.secret", FormatClusterSecret(ZmqKeypair()));
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  EXPECT_NE(ErrorOf([&] { ReadClusterSecretFile(path); }).find("has mode 0640"), std::string::npos);
}

TEST(SecretText, KeysThatDoNotBelongTogetherAreRefused) {
  const ClusterSecret one = ZmqKeypair(), other = ZmqKeypair();
  const std::string text = "public_key=" + one.public_key + "\nsecret_key=" + other.secret_key;
  EXPECT_EQ(ErrorOf([&] { ParseClusterSecret(text, "k.secret"); }),
            "k.secret: public_key is not the public half of secret_key");
}

TEST(SecretText, AnUnknownLineIsRefusedWithItsLineNumber) {
  const ClusterSecret keys = ZmqKeypair();
  const std::string text = "# comment\npublic_key=" + keys.public_key + "\npassword=hunter2\n";
  EXPECT_EQ(ErrorOf([&] { ParseClusterSecret(text, "k.secret"); }),
            "k.secret:3: 'password' is not public_key=KEY or secret_key=KEY");
}

TEST(SecretText, AKeyOfTheWrongLengthIsRefused) {
  const std::string error = ErrorOf([&] { ParseClusterSecret("public_key=abc\n", "k.secret"); });
  EXPECT_EQ(error, "k.secret:1: public_key is not 40 Z85 characters (got 3 characters)");
}

TEST(SecretText, AMissingSecretKeyIsRefused) {
  const std::string text = "public_key=" + ZmqKeypair().public_key + "\n";
  EXPECT_EQ(ErrorOf([&] { ParseClusterSecret(text, "k.secret"); }),
            "k.secret: secret_key is missing");
}

TEST(RefusalLog, LogsAnAddressOnceHoweverOftenItIsRefused) {
  RefusalLog log("test node", /*summary_interval_s=*/1e9);
  for (int i = 0; i < 50; ++i) log.Record("10.0.0.9", "no key");
  EXPECT_EQ(log.refused(), 50u);
  EXPECT_EQ(log.lines_logged(), 1u);
}

TEST(RefusalLog, SummarisesRepeatedRefusalsOncePerInterval) {
  RefusalLog log("test node", /*summary_interval_s=*/0);
  log.Record("10.0.0.1", "no key");  // logged
  log.Record("10.0.0.1", "no key");  // a summary is due at once
  EXPECT_EQ(log.lines_logged(), 2u);
}

TEST(RefusalLog, LogsEachNewAddressOnce) {
  RefusalLog log("test node", /*summary_interval_s=*/1e9);
  for (int i = 0; i < 3; ++i) {
    log.Record("10.0.0.1", "no key");
    log.Record("10.0.0.2", "no key");
  }
  EXPECT_EQ(log.lines_logged(), 2u);
}

TEST(RefusalLog, ARefusalOfAnUnknownAddressIsCountedForTheSummaryNotLoggedAlone) {
  RefusalLog log("test node", /*summary_interval_s=*/1e9);
  log.Record("", "no key");           // libzmq gave no address: counted only
  log.Record("127.0.0.1", "no key");  // the same peer again, with its address: logged
  EXPECT_EQ(log.refused(), 2u);
  EXPECT_EQ(log.lines_logged(), 1u);
}

TEST(RefusalLog, RemembersABoundedNumberOfAddresses) {
  RefusalLog log("test node", /*summary_interval_s=*/1e9);
  const size_t addresses = RefusalLog::kMaxAddresses + 500;
  for (size_t i = 0; i < addresses; ++i) log.Record("address " + std::to_string(i), "no key");
  EXPECT_EQ(log.refused(), addresses);
  // One line per remembered address; the rest wait for a summary.
  EXPECT_EQ(log.lines_logged(), RefusalLog::kMaxAddresses);
}

// A monitor's event frame: the event id (uint16) then its value (uint32), in
// native order; a frame too short to hold both is no event.
TEST(MonitorEvent, ReadsTheIdAndValueOfTheFirstFrame) {
  char bytes[6];
  const uint16_t id = ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
  const uint32_t value = ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
  memcpy(bytes, &id, sizeof(id));
  memcpy(bytes + 2, &value, sizeof(value));
  std::vector<zmq::message_t> frames;
  frames.emplace_back(bytes, sizeof(bytes));
  frames.emplace_back(std::string("tcp://127.0.0.1:9000"));
  const std::optional<MonitorEvent> event = ReadMonitorEvent(frames);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(event->id, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL);
  EXPECT_EQ(event->value, static_cast<uint32_t>(ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH));

  std::vector<zmq::message_t> short_frame;
  short_frame.emplace_back(bytes, 5);
  EXPECT_FALSE(ReadMonitorEvent(short_frame).has_value());
  EXPECT_FALSE(ReadMonitorEvent({}).has_value());
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

class SlurmSecret : public TempFolderTest {};

TEST_F(SlurmSecret, EveryTaskOfAJobGetsTheSameSecretInAPrivateFolder) {
  const std::string folder = folder_ + "/keel";
  const std::string first = SlurmJobSecretFile(folder, "4242");
  const std::string second = SlurmJobSecretFile(folder, "4242");  // another task
  EXPECT_EQ(first, folder + "/slurm-4242.secret");
  EXPECT_EQ(second, first);
  EXPECT_EQ(ModeOf(folder), 0700u);
  EXPECT_EQ(ModeOf(first), 0600u);
  EXPECT_NE(ReadFile(SlurmJobSecretFile(folder, "4243")), ReadFile(first));  // a job, a key
}

}  // namespace
}  // namespace keel
