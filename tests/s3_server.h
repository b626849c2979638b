// A real S3-protocol server on loopback for tests: @20minutes/s3rver (which
// checks AWS Signature V4) run by Node from scripts/s3rver/ (installed by
// scripts/setup.sh).
#ifndef KEEL_TESTS_S3_SERVER_H_
#define KEEL_TESTS_S3_SERVER_H_

#include <sys/types.h>

#include <string>

#include "io/storage.h"
#include "test_util.h"

namespace keel::testing {

class S3Server {
 public:
  static constexpr char kBucket[] = "keel-test";
  static constexpr char kAccessKey[] = "KEELTESTACCESSKEY";
  static constexpr char kSecretKey[] = "keel-test-secret-9f3a71c0";

  S3Server() = default;
  ~S3Server();  // stops the server (SIGTERM, then SIGKILL) and removes its folder
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  // Starts the server on 127.0.0.1 with an unused port, a fresh folder and
  // the bucket kBucket, and waits (bounded) until it answers. Returns "" on
  // success, else what went wrong and how to install what is missing.
  std::string Start();

  // "http://127.0.0.1:PORT".
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Options that reach this server with the test credentials: small retry
  // counts and back-off.
  S3Options Options() const;
  // Sets the AWS_* variables of this process (inherited by children) so that
  // OpenStorage("s3://...") reaches this server.
  void ExportEnvironment() const;
  // The server's output so far.
  std::string Output() const;

 private:
  Processes processes_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string folder_;
};

}  // namespace keel::testing

#endif  // KEEL_TESTS_S3_SERVER_H_
