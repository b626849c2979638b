#include "faults/fault_runner.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "kv/node.h"
#include "scheduler/admin_client.h"
#include "scheduler/progress_record.h"

namespace keel {
namespace {

std::string Number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string StatusText(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// The launcher's name for a process: "worker 3", or "scheduler" (there is one).
std::string ChildName(const std::string& role, int rank) {
  return role == "scheduler" ? role : role + " " + std::to_string(rank);
}

// "worker 3" -> "role": "worker", "rank": 3; "scheduler" -> "role": "scheduler".
std::string RoleFields(const std::string& name) {
  const size_t space = name.find(' ');
  if (space == std::string::npos) return "\"role\": " + JsonQuote(name);
  return "\"role\": " + JsonQuote(name.substr(0, space)) + ", \"rank\": " + name.substr(space + 1);
}

}  // namespace

FaultRunner::FaultRunner(ProcessGroup* group, FaultSchedule schedule, int servers, int workers,
                         const std::string& event_log, uint64_t seed, TimelineWriter* timeline,
                         Partitioner* partitioner)
    : group_(group),
      schedule_(std::move(schedule)),
      servers_(servers),
      workers_(workers),
      start_(MonotonicSeconds()),
      echo_(!schedule_.empty() || !event_log.empty()),
      timeline_(timeline),
      partitioner_(partitioner),
      random_(seed),
      job_end_(workers) {
  if (!event_log.empty()) {
    log_.open(event_log, std::ios::trunc);
    if (!log_) throw MakeError("cannot create the event log ", event_log);
  }
  group_->SetObserver(this);
  for (const FaultItem& item : schedule_.items) {
    if (item.transport()) {
      const std::string who = item.rank == FaultItem::kEveryRank
                                  ? "\"role\": " + JsonQuote(item.role) + ", \"rank\": \"*\""
                                  : RoleFields(ChildName(item.role, item.rank));
      Log(FaultActionName(item.action), "",
          who + (item.action == FaultAction::kDrop
                     ? ", \"share\": " + Number(item.drop_rate)
                     : ", \"delay_ms\": " + Number(item.delay_ms) +
                           ", \"jitter_ms\": " + Number(item.jitter_ms)));
    } else if (item.rate_per_s > 0) {
      ScheduleNext(item, 0);
    } else if (item.after_start) {
      awaiting_start_.push_back(&item);
    } else {
      pending_.push_back(Pending{item.at_s, &item, false, "", -1});
    }
  }
  // The group calls it on this thread, the one that runs Wait and Round.
  handles_lines_ = !awaiting_start_.empty();
  if (handles_lines_) {
    group_->SetLineHandler(
        [this](const std::string& name, const std::string& line) { OnLine(name, line); });
  }
}

FaultRunner::~FaultRunner() {
  if (handles_lines_) group_->SetLineHandler(nullptr);
  group_->SetObserver(nullptr);
}

void FaultRunner::OnLine(const std::string& name, const std::string& line) {
  if (awaiting_start_.empty() || name != "scheduler" || line.rfind(kProgressRecordPrefix, 0) != 0) {
    return;
  }
  const double started_at = Now();
  Log("job_started", "", "\"reason\": \"the scheduler's first progress record\"");
  for (const FaultItem* item : awaiting_start_) {
    pending_.push_back(Pending{started_at + item->at_s, item, false, "", -1});
  }
  awaiting_start_.clear();
}

void FaultRunner::SetCluster(const std::string& self, std::vector<std::string> server_args,
                             const std::string& scheduler, std::optional<ClusterSecret> secret) {
  self_ = self;
  server_args_ = std::move(server_args);
  scheduler_ = scheduler;
  secret_ = std::move(secret);
}

void FaultRunner::Join(const FaultItem& item) {
  const std::string spec = "\"spec\": " + JsonQuote(item.text);
  const std::string name = ChildName("server", servers_ + joined_);
  if (self_.empty()) {
    Log("skipped", name, spec + ", \"reason\": \"no cluster to join\"");
    return;
  }
  ++joined_;
  // Its rank asked for, so that the scheduler's rank is the launcher's name.
  std::vector<std::string> argv = {self_, "server", "--join",
                                   "--rank=" + std::to_string(servers_ + joined_ - 1)};
  argv.insert(argv.end(), server_args_.begin(), server_args_.end());
  try {
    const pid_t pid = group_->Spawn(name, argv);
    Log("join", name, "\"pid\": " + std::to_string(pid) + ", " + spec);
  } catch (const Error& e) {
    Log("join_failed", name, spec + ", \"reason\": " + JsonQuote(e.what()));
  }
}

void FaultRunner::Drain(const FaultItem& item, const std::string& name) {
  const std::string spec = "\"spec\": " + JsonQuote(item.text);
  try {
    if (scheduler_.empty()) throw MakeError("no scheduler to ask");
    constexpr double kTimeoutS = 10;
    RequestDrain(scheduler_, item.rank, secret_, kTimeoutS);
    job_end_.Drained(name);  // its exit, once its ranges moved, is no end of the job
    group_->Tolerate(name);
    Log("drain", name, spec);
  } catch (const Error& e) {
    Log("drain_failed", name, spec + ", \"reason\": " + JsonQuote(e.what()));
  }
}

double FaultRunner::Now() const { return MonotonicSeconds() - start_; }

void FaultRunner::ScheduleNext(const FaultItem& item, double after) {
  std::exponential_distribution<double> gap(item.rate_per_s);
  pending_.push_back(Pending{after + gap(random_), &item, false, "", -1});
}

void FaultRunner::Log(const std::string& event, const std::string& name,
                      const std::string& fields) {
  char t[32];
  snprintf(t, sizeof(t), "%.3f", Now());
  std::string line = std::string("{\"t\": ") + t + ", \"event\": " + JsonQuote(event);
  if (!name.empty()) line += ", " + RoleFields(name);
  if (!fields.empty()) line += ", " + fields;
  line += "}";
  if (log_.is_open()) log_ << line << std::endl;
  if (timeline_)
    timeline_->RecordLine("{\"time\": " + JsonUnixTime(WallSeconds()) + ", " + line.substr(1));
  if (!echo_) return;
  group_->Emit("faults", line, /*to_stderr=*/false);
}

void FaultRunner::Started(const std::string& name, pid_t pid) {
  job_end_.Started(name);
  Log("start", name, "\"pid\": " + std::to_string(pid));
}

void FaultRunner::Exited(const std::string& name, pid_t pid, int status, bool tolerated) {
  job_end_.Exited(name, status, tolerated);
  Log("exit", name,
      "\"pid\": " + std::to_string(pid) + ", \"status\": " + JsonQuote(StatusText(status)) +
          ", \"expected\": " + (tolerated ? "true" : "false"));
}

void FaultRunner::Finish(int code) {
  DropPending("the launcher ended first (exit code " + std::to_string(code) + ")");
  Log("end", "", "\"code\": " + std::to_string(code));
}

void FaultRunner::DropPending(const std::string& reason) {
  std::sort(pending_.begin(), pending_.end(),
            [](const Pending& a, const Pending& b) { return a.at < b.at; });
  const std::vector<Pending> pending = std::move(pending_);
  pending_.clear();
  for (const Pending& item : pending) {
    if (item.resume) {
      Resume(item);
      continue;
    }
    if (item.cut >= 0) {
      Heal(item);
      continue;
    }
    char at[32];
    snprintf(at, sizeof(at), "%.3f", item.at);
    Log("not_fired", "",
        "\"spec\": " + JsonQuote(item.item->text) + ", \"at\": " + at +
            ", \"reason\": " + JsonQuote(reason));
  }
  for (const FaultItem* item : awaiting_start_) {
    Log("not_fired", "",
        "\"spec\": " + JsonQuote(item->text) +
            ", \"reason\": " + JsonQuote(reason + "; the job had not started"));
  }
  awaiting_start_.clear();
}

std::vector<std::string> FaultRunner::Targets(const FaultItem& item) {
  const int count = item.role == "scheduler" ? 1 : (item.role == "server" ? servers_ : workers_);
  std::vector<std::string> names;
  if (item.rank >= 0) return {ChildName(item.role, item.rank)};
  // A random kill or stop picks among the running, a random restart among the down.
  const bool want_running = item.action != FaultAction::kRestart;
  for (int rank = 0; rank < count; ++rank) {
    const std::string name = ChildName(item.role, rank);
    if (item.rank == FaultItem::kEveryRank || group_->Running(name) == want_running) {
      names.push_back(name);
    }
  }
  if (item.rank == FaultItem::kRandomRank && !names.empty()) {
    std::uniform_int_distribution<size_t> pick(0, names.size() - 1);
    return {names[pick(random_)]};
  }
  return names;
}

void FaultRunner::LogSkipped(const FaultItem& item) {
  const std::string why = item.action == FaultAction::kRestart ? "no " + item.role + " is down"
                                                               : "no running " + item.role;
  Log("skipped", "", "\"spec\": " + JsonQuote(item.text) + ", \"reason\": " + JsonQuote(why));
}

// ["server 0", "worker 1"] as a JSON array.
std::string NameList(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + JsonQuote(name);
  return "[" + list + "]";
}

void FaultRunner::Partition(const FaultItem& item) {
  const std::string spec = "\"spec\": " + JsonQuote(item.text);
  std::vector<Partitioner::Process> sides[2];
  std::vector<std::string> names[2];
  for (int side = 0; side < 2; ++side) {
    for (const std::string& name : side == 0 ? item.side_a : item.side_b) {
      const pid_t pid = group_->Signal(name, 0);
      if (pid < 0) continue;  // not running: nothing to cut
      sides[side].push_back({name, pid});
      names[side].push_back(name);
    }
  }
  if (!partitioner_ || sides[0].empty() || sides[1].empty()) {
    Log("skipped", "",
        spec + ", \"reason\": \"" +
            (partitioner_ ? "a side has no running process" : "no partitioner") + "\"");
    return;
  }
  try {
    int rules = 0;
    const int cut = partitioner_->Cut(sides[0], sides[1], &rules);
    Log("partition", "",
        "\"a\": " + NameList(names[0]) + ", \"b\": " + NameList(names[1]) + ", \"rules\": " +
            std::to_string(rules) + ", \"duration\": " + Number(item.duration_s) + ", " + spec);
    pending_.push_back(Pending{Now() + item.duration_s, &item, false, "", -1, cut});
  } catch (const Error& e) {
    Log("partition_failed", "", spec + ", \"reason\": " + JsonQuote(e.what()));
  }
}

void FaultRunner::Heal(const Pending& pending) {
  partitioner_->Heal(pending.cut);
  Log("heal", "", "\"spec\": " + JsonQuote(pending.item->text));
}

void FaultRunner::Fire(const FaultItem& item) {
  if (item.action == FaultAction::kPartition) {
    Partition(item);
    return;
  }
  if (item.action == FaultAction::kJoin) {
    Join(item);
    return;
  }
  const std::string spec = "\"spec\": " + JsonQuote(item.text);
  const std::vector<std::string> targets = Targets(item);
  if (targets.empty()) LogSkipped(item);
  for (const std::string& name : targets) {
    if (item.action == FaultAction::kRestart) {
      try {
        const pid_t pid = group_->Respawn(name);
        Log("restart", name, "\"pid\": " + std::to_string(pid) + ", " + spec);
      } catch (const Error& e) {
        Log("restart_failed", name, spec + ", \"reason\": " + JsonQuote(e.what()));
      }
      continue;
    }
    if (!group_->Running(name)) {
      Log("skipped", name, spec + ", \"reason\": \"not running\"");
      continue;
    }
    if (item.action == FaultAction::kDrain) {
      Drain(item, name);
    } else if (item.action == FaultAction::kKill) {
      group_->Tolerate(name);
      const pid_t pid = group_->Signal(name, SIGKILL);
      Log("kill", name, "\"pid\": " + std::to_string(pid) + ", \"signal\": \"SIGKILL\", " + spec);
    } else if (item.action == FaultAction::kPreempt) {
      // The process asks the scheduler for the preemption checkpoint; every
      // process of the job then exits with kPreemptedExitStatus, no failure.
      const pid_t pid = group_->Signal(name, SIGTERM);
      Log("preempt", name,
          "\"pid\": " + std::to_string(pid) + ", \"signal\": \"SIGTERM\", " + spec);
    } else {
      const pid_t pid = group_->Signal(name, SIGSTOP);
      Log("stop", name,
          "\"pid\": " + std::to_string(pid) + ", \"duration\": " + Number(item.duration_s) + ", " +
              spec);
      pending_.push_back(Pending{Now() + item.duration_s, &item, true, name, pid});
    }
  }
}

void FaultRunner::Resume(const Pending& pending) {
  const std::string spec = "\"spec\": " + JsonQuote(pending.item->text);
  // Only the process that was stopped: it may have been killed or restarted since.
  if (!group_->Running(pending.name) || group_->Signal(pending.name, 0) != pending.pid) {
    Log("skipped", pending.name, spec + ", \"reason\": \"the stopped process is gone\"");
    return;
  }
  group_->Signal(pending.name, SIGCONT);
  Log("continue", pending.name, "\"pid\": " + std::to_string(pending.pid) + ", " + spec);
}

void FaultRunner::Round() {
  if (job_end_.over()) {
    if (!logged_over_) {
      logged_over_ = true;
      Log("job_over", "", "\"reason\": " + JsonQuote(job_end_.reason()));
      DropPending("the job was over");
    }
    return;
  }
  const double now = Now();
  // Due actions in time order; firing may add more (continues, next rates).
  while (true) {
    auto due = std::min_element(pending_.begin(), pending_.end(),
                                [](const Pending& a, const Pending& b) { return a.at < b.at; });
    if (due == pending_.end() || due->at > now) return;
    const Pending pending = *due;
    pending_.erase(due);
    if (pending.resume) {
      Resume(pending);
      continue;
    }
    if (pending.cut >= 0) {
      Heal(pending);
      continue;
    }
    Fire(*pending.item);
    if (pending.item->rate_per_s > 0) ScheduleNext(*pending.item, pending.at);
  }
}

}  // namespace keel
