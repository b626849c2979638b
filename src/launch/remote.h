// Running a job's roles on other machines: over ssh from a hostfile, and as
// the tasks of a Slurm step. See docs/OPERATIONS.md for the user's side.
#ifndef KEEL_LAUNCH_REMOTE_H_
#define KEEL_LAUNCH_REMOTE_H_

#include <map>
#include <string>
#include <vector>

#include "launch/role_output.h"

namespace keel {

// One line of a hostfile:
//   [user@]host[:sshport] [scheduler] [servers=N] [workers=N] [address=HOST] [--flag=value...]
// `address` is where the other nodes reach this host (default: `host`);
// flags go to this host's roles only, after the job's (a local data path).
struct HostEntry {
  std::string ssh_target;  // [user@]host, as ssh takes it
  std::string host;        // host alone
  int ssh_port = 0;        // 0: ssh's default (or the user's ssh config)
  std::string address;     // how the other hosts reach this one
  bool scheduler = false;
  int servers = 0;
  int workers = 0;
  std::vector<std::string> flags;
  int line = 0;
};

// Parses a hostfile (`#` starts a comment). Throws Error naming `path` and
// the line of the first problem; requires exactly one scheduler, at least one
// server and at least one worker.
std::vector<HostEntry> ParseHostfile(const std::string& text, const std::string& path);

// `text` quoted for a POSIX shell (ssh runs the remote command through one).
std::string ShellQuote(const std::string& text);

struct SshLaunch {
  std::vector<HostEntry> hosts;
  std::vector<std::string> role_flags;   // forwarded to every role
  std::vector<std::string> ssh_options;  // before the launcher's own options
  std::string remote_keel;               // the keel binary on the remote hosts
  std::string remote_folder;             // where the remote commands start (if it exists)
  int scheduler_port = 0;                // 0: any free port, read from the scheduler's output
  double timeout_s = 0;                  // 0: none
  // A cluster secret's text (FormatClusterSecret), or empty. Each role gets
  // it on its ssh connection's standard input (`keel guard
  // --secret_from_stdin`), never on a command line or in a shared file.
  std::string secret;
  // Progress, quiet logs and the summary (see LocalCluster::show_progress),
  // shown as `output` says.
  bool show_progress = false;
  LaunchOutputOptions output;
};

// A new cluster secret's text (FormatClusterSecret) for a job across hosts,
// unless `role_flags` name --secret_file (then it is the user's to place on
// every host): "".
std::string JobSecret(const std::vector<std::string>& role_flags);

// Starts the scheduler, then every server and worker, each through
// `ssh ... keel guard -- keel ROLE ...` so that closing the connection stops
// the remote process. Forwards their output with "[host role rank]"
// prefixes; stops all when one fails, on SIGINT/SIGTERM or at the timeout.
// Returns like ProcessGroup::Wait.
int RunSshLaunch(const SshLaunch& launch);

// A Slurm task's part of the job, from the SLURM_* variables in `env`: task 0
// is the scheduler, tasks 1..servers the servers, the rest the workers.
struct SlurmTask {
  std::string role;  // scheduler, server or worker
  int rank = 0;
  int servers = 0;
  int workers = 0;
  std::string scheduler;  // host:port
  std::string node_name;  // the first host of the allocation
  bool port_derived = false;  // the port came from SLURM_JOB_ID (no --scheduler_port)
};

// The ports a Slurm job's scheduler takes without --scheduler_port:
// kSlurmFirstPort + SLURM_JOB_ID % kSlurmPorts (20000..31999).
constexpr int kSlurmFirstPort = 20000;
constexpr int kSlurmPorts = 12000;

// Works out this task's role. `first_host_address` maps the first host of the
// nodelist to the address other tasks reach it at (scontrol in production).
// `port` 0 derives the scheduler's port from SLURM_JOB_ID. Throws Error on
// missing or inconsistent variables.
SlurmTask ResolveSlurmTask(const std::map<std::string, std::string>& env, int servers, int port,
                           const std::vector<std::string>& nodelist_hosts,
                           const std::string& first_host_address);

// The cluster secret every task of Slurm job `job_id` shares: the file
// `folder`/slurm-JOB_ID.secret (mode 0600, in a folder made 0700), made by
// whichever task comes first (written aside, then linked into place, so the
// others read a whole file or make none). `folder` must be the same folder on
// every node (a shared home). Returns its path. Throws Error naming the file.
std::string SlurmJobSecretFile(const std::string& folder, const std::string& job_id);

// `keel launch --slurm`: resolves this task's role (with scontrol) and
// replaces this process with it. Without --secret_file or KEEL_SECRET_FILE,
// the roles use SlurmJobSecretFile($KEEL_SECRET_DIR, else $HOME/.keel).
// Returns only on error (throws).
int RunSlurmTask(const std::string& self, int servers, int port,
                 const std::vector<std::string>& role_flags);

// `keel guard -- COMMAND...`: runs COMMAND in its own process group and
// stops that group (SIGTERM, then SIGKILL after 2 s) when this process's
// standard input reaches its end or it receives SIGHUP, SIGINT or SIGTERM.
// Returns COMMAND's exit status (128 + signal if it was killed).
//
// With `secret_from_stdin` (`keel guard --secret_from_stdin -- ...`, what
// the ssh launcher runs) it first reads a cluster secret's text from
// standard input up to a blank line, writes it to a new file only this user
// can read ($TMPDIR or /tmp, mode 0600), runs COMMAND with KEEL_SECRET_FILE
// naming it and removes it when COMMAND ends: the key never appears on a
// command line nor in a file others can read.
int RunGuard(const std::vector<std::string>& command, bool secret_from_stdin = false);

}  // namespace keel

#endif  // KEEL_LAUNCH_REMOTE_H_
