// The cluster secret from the command line: `keel keygen`, --secret_file and
// KEEL_SECRET_FILE checked by --check_flags, `keel guard --secret_from_stdin`,
// and `keel launch --hostfile` handing a new key to every host over ssh (here
// a stand-in ssh that runs the command on this machine: no root needed).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "launch/remote.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::CountOf;
using testing::KeelBinary;
using testing::ModeOf;
using testing::ProcessesMentioning;
using testing::ReadFileOrEmpty;
using testing::Shell;
using testing::TempFolderTest;

class SecretCommands : public TempFolderTest {
 protected:
  SecretCommands() : TempFolderTest("curve") {}

  std::string Keygen(const std::string& name) {
    const std::string path = folder_ + "/" + name;
    const auto exit = testing::Run({KeelBinary(), "keygen", "--out=" + path}, 30);
    EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
    return path;
  }
};

TEST_F(SecretCommands, KeygenWritesAFileOnlyItsOwnerCanRead) {
  const std::string path = Keygen("cluster.secret");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_TRUE(Contains(ReadFileOrEmpty(path), "secret_key="));
}

TEST_F(SecretCommands, KeygenRefusesToOverwriteAFile) {
  const std::string path = Keygen("cluster.secret");
  const std::string before = ReadFileOrEmpty(path);
  const auto exit = testing::Run({KeelBinary(), "keygen", "--out=" + path}, 30);
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "cannot create secret file '" + path + "'")) << exit.output;
  EXPECT_EQ(ReadFileOrEmpty(path), before);
}

TEST_F(SecretCommands, EveryRoleRefusesASecretFileOthersCanRead) {
  const std::string path = Keygen("cluster.secret");
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  for (const std::vector<std::string>& role :
       {std::vector<std::string>{"scheduler", "--port=9000"},
        std::vector<std::string>{"server", "--scheduler=h:1"},
        std::vector<std::string>{"worker", "--scheduler=h:1", "--job=kv_bench",
                                 "--bench_out=" + folder_}}) {
    std::vector<std::string> argv = {KeelBinary()};
    argv.insert(argv.end(), role.begin(), role.end());
    argv.insert(argv.end(), {"--secret_file=" + path, "--check_flags"});
    const auto exit = testing::Run(argv, 30);
    EXPECT_EQ(exit.code, 1) << role[0] << ": " << exit.output;
    EXPECT_TRUE(Contains(exit.output, "--secret_file: secret file '" + path + "' has mode 0644"))
        << role[0] << ": " << exit.output;
  }
}

TEST_F(SecretCommands, TheSecretFileMayComeFromTheEnvironment) {
  const std::string path = Keygen("cluster.secret");
  const auto good = Shell("KEEL_SECRET_FILE=" + path + " " + KeelBinary() +
                          " server --scheduler=h:1 --check_flags 2>&1");
  EXPECT_EQ(good.code, 0) << good.output;
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  const auto refused = Shell("KEEL_SECRET_FILE=" + path + " " + KeelBinary() +
                             " server --scheduler=h:1 --check_flags 2>&1");
  EXPECT_EQ(refused.code, 1) << refused.output;
  EXPECT_TRUE(
      Contains(refused.output, "KEEL_SECRET_FILE: secret file '" + path + "' has mode 0640"))
      << refused.output;
}

TEST_F(SecretCommands, GuardHandsTheSecretToItsCommandInAPrivateFileAndRemovesIt) {
  const std::string secret = ReadFileOrEmpty(Keygen("cluster.secret"));
  const std::string tmp = folder_ + "/tmp";
  ASSERT_EQ(mkdir(tmp.c_str(), 0700), 0);
  // The command prints the file's mode, its path and its contents, then
  // marks that it is done. Standard input stays open until then (at most
  // 10 s), as an ssh connection's does: guard stops its command when its
  // input ends.
  const std::string done = folder_ + "/done";
  const auto exit =
      Shell("{ printf '%s\\n' " + ShellQuote(secret) + "; for i in $(seq 200); do [ -e " + done +
            " ] && break; sleep 0.05; done; } | TMPDIR=" + tmp + " " + KeelBinary() +
            " guard --secret_from_stdin -- sh -c 'stat -c %a \"$KEEL_SECRET_FILE\"; "
            "echo \"$KEEL_SECRET_FILE\"; cat \"$KEEL_SECRET_FILE\"; touch " + done + "' 2>&1");
  ASSERT_EQ(exit.code, 0) << exit.output;
  EXPECT_EQ(exit.output.substr(0, 4), "600\n") << exit.output;
  EXPECT_TRUE(Contains(exit.output, "\n" + tmp + "/keel-secret-")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, secret)) << exit.output;
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "the secret file was left behind";
}

TEST_F(SecretCommands, GuardRefusesInputThatIsNotASecret) {
  const auto exit =
      Shell("printf 'hello\\n\\n' | " + KeelBinary() + " guard --secret_from_stdin -- true 2>&1");
  EXPECT_EQ(exit.code, 1) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "the cluster secret on standard input:1: 'hello'"))
      << exit.output;
}

// `keel launch --hostfile` through a stand-in ssh that records its arguments
// and runs the remote command here.
TEST_F(SecretCommands, HostfileLaunchHandsEveryHostANewSecretOffTheCommandLine) {
  const std::string bin = folder_ + "/bin", tmp = folder_ + "/tmp";
  ASSERT_EQ(mkdir(bin.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(tmp.c_str(), 0700), 0);
  WriteFile("bin/ssh",
            "#!/bin/sh\n"
            "echo \"$@\" >> " +
                folder_ +
                "/ssh-arguments\n"
                "while [ \"$1\" != -- ]; do shift; done\n"
                "shift\n"
                "exec sh -c \"$1\"\n");
  ASSERT_EQ(chmod((bin + "/ssh").c_str(), 0700), 0);
  WriteFile("hosts", "127.0.0.1 scheduler servers=1 workers=1\n");
  const auto exit = Shell("PATH=" + bin + ":$PATH TMPDIR=" + tmp + " " + KeelBinary() +
                              " launch --hostfile=" + folder_ +
                              "/hosts --timeout=100 --job=kv_bench --bench_out=" + folder_ +
                              " --mode=sparse --sparse_keys=100 --key_space=10000 "
                              "--sparse_widths=1 --bench_seconds=0.2 --verbose 2>&1",
                          120);
  EXPECT_EQ(exit.code, 0) << exit.output;
  // Every role (scheduler, server, worker) ran with CURVE on.
  EXPECT_EQ(CountOf(exit.output, "CURVE on:"), 3u) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "INSECURE")) << exit.output;
  const std::string arguments = ReadFileOrEmpty(folder_ + "/ssh-arguments");
  EXPECT_EQ(CountOf(arguments, "guard --secret_from_stdin --"), 3u) << arguments;
  EXPECT_FALSE(Contains(arguments, "secret_key")) << arguments;
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "a secret file was left behind";
  EXPECT_TRUE(ProcessesMentioning(folder_).empty());
}

}  // namespace
}  // namespace keel
