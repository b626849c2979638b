#include "launch/sagemaker_train.h"

#include <glog/logging.h>
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <thread>

#include "base/error.h"
#include "base/exit_status.h"
#include "base/time.h"
#include "io/input_split.h"
#include "launch/gzip_channel.h"
#include "launch/launcher.h"
#include "launch/role_output.h"

namespace keel {
namespace {

std::string MetricValue(double value) {
  if (!std::isfinite(value)) return "nan";
  char text[32];
  snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

// The roles of `role` on this host, ranks from `first`.
void SpawnRoles(const SageMakerTrain& train, const std::string& role, int first, int count,
                ProcessGroup* group) {
  for (int rank = first; rank < first + count; ++rank) {
    std::vector<std::string> argv = {train.self, role, "--scheduler=" + train.plan.scheduler,
                                     "--rank=" + std::to_string(rank)};
    argv.insert(argv.end(), train.role_flags.begin(), train.role_flags.end());
    group->Spawn(role + " " + std::to_string(rank), argv);
  }
}

// What this host's roles print: forwarded as `keel launch --progress=none`
// does ("[name] line"), the leader's progress records turned into metric
// lines, and the first error kept as the failure's cause.
class TrainOutput {
 public:
  void Line(const std::string& name, const std::string& line, bool to_stderr) {
    ProgressRecord record;
    bool is_record = false;
    try {
      is_record = ParseProgressRecord(line, &record);
    } catch (const Error& e) {
      LOG(WARNING) << "a progress record that does not parse: " << e.what();
      is_record = false;  // forwarded as it is
    }
    if (is_record) {
      for (const std::string& metric : SageMakerMetricLines(record)) std::cout << metric << "\n";
      std::cout.flush();
      return;
    }
    (to_stderr ? std::cerr : std::cout) << "[" << name << "] " << line << std::endl;
    if (!to_stderr) return;
    if (name == "scheduler" && line.rfind("preempted", 0) == 0) preempted_ = line;
    const bool error = line.find(": error: ") != std::string::npos ||
                       line.find(": fatal error") != std::string::npos ||
                       KindOfLine(line) == LineKind::kError;
    if (name == "launch") {
      if (fallback_cause_.empty()) fallback_cause_ = line;
    } else if (error && cause_.empty()) {
      cause_ = name + ": " + WithoutGlogPrefix(line);
    }
  }

  // The first cause seen: a role's error, else the launcher's own report.
  std::string Cause() const { return cause_.empty() ? fallback_cause_ : cause_; }
  // The scheduler's line on a preemption: the checkpoint it committed, or why none.
  const std::string& Preempted() const { return preempted_; }

 private:
  // "E20261128 12:34:56.789 4242 file.cc:12] text" -> "text".
  static std::string WithoutGlogPrefix(const std::string& line) {
    if (KindOfLine(line) == LineKind::kPlain) return line;
    const size_t bracket = line.find("] ");
    return bracket == std::string::npos ? line : line.substr(bracket + 2);
  }

  std::string cause_;
  std::string fallback_cause_;
  std::string preempted_;
};

std::string EndedWith(int code) {
  if (code == 124) return "timed out";
  if (code == 130) return "interrupted";
  if (code == kPreemptedExitStatus) return "preempted (SIGTERM)";
  if (code == kDataLostExitStatus) return "the job lost data";
  return "a role failed (exit status " + std::to_string(code) + ")";
}

}  // namespace

SageMakerHostPlan PlanSageMakerHost(const SageMakerHosts& hosts, int servers_per_host,
                                    int workers_per_host, int port,
                                    const std::map<std::string, std::string>& addresses) {
  SageMakerHostPlan plan;
  const int index = hosts.CurrentIndex();
  const int count = static_cast<int>(hosts.hosts.size());
  plan.leads = hosts.Leads();
  const auto address = addresses.find(hosts.Leader());
  plan.scheduler =
      (address == addresses.end() ? hosts.Leader() : address->second) + ":" + std::to_string(port);
  plan.servers = servers_per_host * count;
  plan.workers = workers_per_host * count;
  plan.host_servers = servers_per_host;
  plan.host_workers = workers_per_host;
  plan.first_server = servers_per_host * index;
  plan.first_worker = workers_per_host * index;
  plan.watch_port = port + 1;
  for (const std::string& host : hosts.hosts) {
    if (host == hosts.current_host) continue;
    const auto mapped = addresses.find(host);
    plan.others.push_back(
        {host, mapped == addresses.end() ? host : mapped->second, host == hosts.Leader()});
  }
  return plan;
}

void AwaitLeaderName(const SageMakerHostPlan& plan, double timeout_s) {
  const std::string leader = plan.scheduler.substr(0, plan.scheduler.rfind(':'));
  const double start = MonotonicSeconds();
  for (bool logged = false;; logged = true) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(leader.c_str(), nullptr, &hints, &found) == 0) {
      freeaddrinfo(found);
      if (logged) LOG(INFO) << "the leader's name " << leader << " resolves";
      return;
    }
    if (MonotonicSeconds() - start >= timeout_s) {
      throw MakeError("the leader's name ", leader, " did not resolve within ", timeout_s,
                      " s (--leader_resolve_timeout)");
    }
    if (!logged) LOG(INFO) << "waiting for the leader's name " << leader << " to resolve";
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

std::vector<std::string> SageMakerChannelFlags(const SageMakerContract& contract,
                                               int workers_per_host, const std::string& unpacked) {
  std::vector<std::string> flags;
  std::string format;
  for (const SageMakerChannel& channel : contract.channels) {
    const std::string where = "channel " + channel.name;
    if (channel.gzip && channel.mode == SageMakerChannel::InputMode::kPipe) {
      throw MakeError(where,
                      ": a Gzip channel in Pipe mode is not read by keel train yet (give it "
                      "as File or FastFile, or uncompressed)");
    }
    if (channel.sharded_by_key && channel.name != "train") {
      throw MakeError(where,
                      ": S3DistributionType ShardedByS3Key is read for the train channel "
                      "only (",
                      channel.name, " is scored on the leader, from all its files)");
    }
    if (!channel.data_format.empty()) {
      if (!format.empty() && format != channel.data_format) {
        throw MakeError(where, ": its ContentType reads as ", channel.data_format,
                        ", another channel's as ", format,
                        ": Keel reads every channel in one format");
      }
      format = channel.data_format;
    }
    if (channel.mode == SageMakerChannel::InputMode::kPipe) {
      if (channel.name != "train") {
        throw MakeError(where, ": Pipe mode is read for the train channel only (give ",
                        channel.name, " as File or FastFile)");
      }
      if (workers_per_host != 1) {
        throw MakeError(where,
                        ": Pipe mode gives a host one stream per pass, for one worker: "
                        "workers_per_host must be 1");
      }
      flags.push_back("--" + channel.name + "=pipe:" + contract.ChannelPipes(channel.name));
    } else if (channel.gzip) {
      flags.push_back("--" + channel.name + "=" + unpacked + "/" + channel.name);
    } else {
      flags.push_back("--" + channel.name + "=" + contract.ChannelFolder(channel.name));
    }
    if (channel.sharded_by_key) {
      flags.push_back("--split_within_host=" + std::to_string(workers_per_host));
    }
  }
  if (!format.empty()) flags.push_back("--data_format=" + format);
  return flags;
}

void UnpackGzipChannels(const SageMakerContract& contract, const std::string& unpacked) {
  for (const SageMakerChannel& channel : contract.channels) {
    if (!channel.gzip || channel.mode == SageMakerChannel::InputMode::kPipe) continue;
    const std::string into = unpacked + "/" + channel.name;
    try {
      const uint64_t bytes = UnpackGzipFolder(contract.ChannelFolder(channel.name), into);
      LOG(INFO) << "channel " << channel.name << ": its gzip files unpacked into " << into << " ("
                << bytes << " bytes)";
    } catch (const Error& e) {
      throw MakeError("channel ", channel.name, ": ", e.what());
    }
  }
}

void CheckSageMakerChannelFiles(const SageMakerContract& contract) {
  for (const SageMakerChannel& channel : contract.channels) {
    if (channel.mode == SageMakerChannel::InputMode::kPipe) continue;
    const std::string folder = contract.ChannelFolder(channel.name);
    try {
      ListInputs(folder);
    } catch (const Error& e) {
      throw MakeError("channel ", channel.name, ": ", e.what());
    }
  }
}

std::vector<std::string> SageMakerMetricLines(const ProgressRecord& record) {
  std::string head;
  if (record.type == ProgressRecord::Type::kEpoch) {
    head = "keel-metric epoch=" + std::to_string(record.epoch) + " ";
  } else if (record.type == ProgressRecord::Type::kEnd) {
    head = "keel-metric final ";
  } else {
    return {};
  }
  std::vector<std::string> lines;
  for (const auto& [name, value] : record.metrics) {
    lines.push_back(head + name + "=" + MetricValue(value));
  }
  return lines;
}

int RunSageMakerTrain(const SageMakerTrain& train) {
  const SageMakerHostPlan& plan = train.plan;
  TrainOutput output;
  HostWatch watch(plan.others, plan.watch_port, train.lost_host_ends_job, train.host_grace_s);
  if (!plan.others.empty()) watch.Listen();
  int code = 0;
  {
    ProcessGroup group;
    if (!plan.others.empty()) {
      group.SetObserver(&watch);
      watch.Attach(&group);
    }
    group.DeferNotices();  // every child is a keel role
    group.SetOutput([&output](const std::string& name, const std::string& line, bool to_stderr) {
      output.Line(name, line, to_stderr);
    });
    if (plan.leads) {
      const std::string port = plan.scheduler.substr(plan.scheduler.rfind(':') + 1);
      std::vector<std::string> argv = {train.self,
                                       "scheduler",
                                       "--bind=0.0.0.0",
                                       "--port=" + port,
                                       "--num_servers=" + std::to_string(plan.servers),
                                       "--num_workers=" + std::to_string(plan.workers),
                                       "--progress_records"};
      argv.insert(argv.end(), train.role_flags.begin(), train.role_flags.end());
      group.Spawn("scheduler", argv);
      group.SetPreemptionTarget("scheduler", train.preemption_grace_s);
    } else {
      // A server's or a worker's notice asks the scheduler for the checkpoint.
      group.SetPreemptionTarget(plan.host_servers > 0
                                    ? "server " + std::to_string(plan.first_server)
                                    : "worker " + std::to_string(plan.first_worker),
                                train.preemption_grace_s);
    }
    SpawnRoles(train, "server", plan.first_server, plan.host_servers, &group);
    SpawnRoles(train, "worker", plan.first_worker, plan.host_workers, &group);
    code = group.Wait(train.timeout_s);
  }
  if (!watch.failure().empty()) {
    WriteSageMakerFailure(train.contract.root,
                          train.contract.hosts.current_host + ": " + watch.failure());
    return code != 0 ? code : 1;
  }
  if (code != 0) {
    const std::string cause =
        code == kPreemptedExitStatus
            ? (output.Preempted().empty() ? EndedWith(code) : "scheduler: " + output.Preempted())
            : output.Cause();
    WriteSageMakerFailure(train.contract.root, train.contract.hosts.current_host + ": " +
                                                   (cause.empty() ? EndedWith(code) : cause));
  }
  return code;
}

}  // namespace keel
