#include "s3_server.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace keel::testing {
namespace {

const char kInstallHint[] =
    "install it with scripts/setup.sh (Debian: apt-get install nodejs npm; then "
    "npm ci in scripts/s3rver)";

// The absolute path of `program` on PATH, or "".
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string folders = path == nullptr ? "/usr/local/bin:/usr/bin:/bin" : path;
  size_t begin = 0;
  while (begin <= folders.size()) {
    size_t end = folders.find(':', begin);
    if (end == std::string::npos) end = folders.size();
    const std::string candidate = folders.substr(begin, end - begin) + "/" + program;
    if (end > begin && access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return "";
}

}  // namespace

S3Server::~S3Server() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    processes_.Wait(pid_, 5);  // SIGKILL if it is still running then
  }
  if (!folder_.empty()) std::filesystem::remove_all(folder_);
}

std::string S3Server::Start() {
  const std::string scripts = SourceDir() + "/scripts/s3rver";
  const std::string node = FindOnPath("node");
  if (node.empty()) return std::string("node (Node.js 20) is not installed: ") + kInstallHint;
  if (access((scripts + "/node_modules/@20minutes/s3rver/package.json").c_str(), R_OK) != 0) {
    return "the S3 test server (@20minutes/s3rver) is not installed in " + scripts +
           "/node_modules: " + kInstallHint;
  }
  char pattern[] = "/tmp/keel-s3rver-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return "cannot create a folder for the S3 server";
  folder_ = pattern;
  port_ = UnusedPort();
  pid_ = processes_.Start({"/usr/bin/env", std::string("AWS_ACCESS_KEY_ID=") + kAccessKey,
                           std::string("AWS_SECRET_ACCESS_KEY=") + kSecretKey, node,
                           // s3rver's continuation tokens use DES, which OpenSSL 3 keeps
                           // in its legacy provider.
                           "--openssl-legacy-provider", scripts + "/start.js", "--address",
                           "127.0.0.1", "--port", std::to_string(port_), "--directory", folder_,
                           "--bucket", kBucket});
  const std::string ready = "s3rver listening on";
  bool failed = false;
  const bool started = WaitFor(
      [&] {
        const std::string output = Output();
        failed = Contains(output, "s3rver:") || Contains(output, "Error");
        return failed || Contains(output, ready);
      },
      30);
  if (!started || failed) {
    return "the S3 test server did not start (" +
           std::string(started ? "failed" : "no answer in 30 s") + "): " + Output();
  }
  return "";
}

S3Options S3Server::Options() const {
  S3Options options;
  options.endpoint = endpoint();
  options.access_key_id = kAccessKey;
  options.secret_access_key = kSecretKey;
  options.max_retries = 2;
  options.initial_backoff_s = 0.01;
  options.max_backoff_s = 0.05;
  options.connect_timeout_s = 5;
  return options;
}

void S3Server::ExportEnvironment() const {
  setenv("AWS_ENDPOINT_URL", endpoint().c_str(), 1);
  setenv("AWS_ACCESS_KEY_ID", kAccessKey, 1);
  setenv("AWS_SECRET_ACCESS_KEY", kSecretKey, 1);
  setenv("AWS_REGION", "us-east-1", 1);
  unsetenv("AWS_SESSION_TOKEN");
  unsetenv("KEEL_S3_ENDPOINT");
  unsetenv("KEEL_S3_ADDRESSING");
}

std::string S3Server::Output() const { return pid_ > 0 ? processes_.Output(pid_) : ""; }

}  // namespace keel::testing
