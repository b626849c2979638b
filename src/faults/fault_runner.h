// FaultRunner: runs a FaultSchedule against the processes of `keel launch`
// and keeps the job's event log.
//
// Kill sends SIGKILL (and the group no longer counts that process's exit as
// a failure); stop sends SIGSTOP and SIGCONT after the item's duration;
// restart starts the role again with the same arguments, so the same --rank.
// Transport faults (drop, delay) are not run here: they are flags of the
// processes they target (FaultSchedule::TransportFlags). A partition cuts its
// groups (those of their processes that run then) through the Partitioner
// and heals them after its duration, logging "partition" and "heal".
//
// An item timed from the job's start (start+TIME) waits for the scheduler's
// first progress record among the group's output (a line from the child
// "scheduler" starting with kProgressRecordPrefix: its workers are training);
// the runner then logs "job_started" and schedules the item TIME after that.
//
// No fault fires once the job is over (LaunchedJobEnd, launch/launched_job_end.h):
// the runner logs "job_over" with the reason, continues at once the processes
// it had stopped (so they can see the scheduler's SHUTDOWN), logs each fault
// still due as "not_fired", and tells the group (JobOver), which stops
// whatever still runs shortly after. Faults still due when the launcher ends
// for another reason (a failure, Ctrl-C, --timeout) are logged "not_fired" too.
//
// Every fault, every process start and exit, and the job's end are written to
// the event log as JSON lines, {"t": seconds since launch, "event": "kill",
// "role": "server", "rank": 1, "pid": 4242, ...}, and echoed to the terminal
// with a "[faults] " prefix (when there is a schedule or an event log). With a
// timeline (io/timeline_writer.h) each line goes there too, with "time" (Unix
// seconds) added. Not thread-safe: it runs on the launcher's thread.
#ifndef KEEL_FAULTS_FAULT_RUNNER_H_
#define KEEL_FAULTS_FAULT_RUNNER_H_

#include <cstdint>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "faults/fault_schedule.h"
#include "faults/partition.h"
#include "io/timeline_writer.h"
#include "kv/cluster_secret.h"
#include "launch/launched_job_end.h"
#include "launch/launcher.h"

namespace keel {

class FaultRunner : public ProcessGroup::Observer {
 public:
  // Times count from now. Children are named "server R" and "worker R" (and
  // "scheduler"). `event_log` may be empty (terminal only). Registers itself
  // as `group`'s observer. `timeline` may be null; it must outlive the
  // runner. `partitioner` (null when the schedule has no partition) must
  // outlive the runner too. Throws Error if the log cannot be created.
  FaultRunner(ProcessGroup* group, FaultSchedule schedule, int servers, int workers,
              const std::string& event_log, uint64_t seed, TimelineWriter* timeline = nullptr,
              Partitioner* partitioner = nullptr);
  ~FaultRunner() override;

  // What join and drain items need: the arguments a joining server starts
  // with after `self server --join` (the scheduler's address among them), the
  // scheduler's address, and the cluster secret (if any) a drain request
  // goes with.
  void SetCluster(const std::string& self, std::vector<std::string> server_args,
                  const std::string& scheduler, std::optional<ClusterSecret> secret);

  void Started(const std::string& name, pid_t pid) override;
  void Exited(const std::string& name, pid_t pid, int status, bool tolerated) override;
  // Fires the faults that are due, or none once the job is over.
  void Round() override;
  bool JobOver() const override { return job_end_.over(); }

  // Logs the faults never fired and the end of the job with the launcher's
  // exit code.
  void Finish(int code);

 private:
  struct Pending {
    double at;  // seconds since launch
    const FaultItem* item;
    bool resume = false;  // SIGCONT of an earlier stop
    std::string name;     // resume: the process
    pid_t pid = -1;       // resume: the process that was stopped
    int cut = -1;         // the heal of this Partitioner cut
  };

  double Now() const;
  // The group's output line `line` of child `name`: the first progress
  // record of the scheduler starts the clock of the items timed from the
  // job's start.
  void OnLine(const std::string& name, const std::string& line);
  // The processes `item` targets now (random: one running process, or for
  // restart one that is down).
  std::vector<std::string> Targets(const FaultItem& item);
  // Logs that `item` found no process to act on.
  void LogSkipped(const FaultItem& item);
  void Fire(const FaultItem& item);
  // join: starts a server with --join; drain: asks the scheduler.
  void Join(const FaultItem& item);
  void Drain(const FaultItem& item, const std::string& name);
  void Resume(const Pending& pending);
  // A partition item: cuts its groups, schedules the heal.
  void Partition(const FaultItem& item);
  void Heal(const Pending& pending);
  // Empties the schedule: resumes run now, faults are logged "not_fired"
  // with `reason`.
  void DropPending(const std::string& reason);
  // Schedules the next firing of a rate item after `after`.
  void ScheduleNext(const FaultItem& item, double after);
  // Writes one event; `fields` are JSON members without braces ("\"pid\": 4").
  void Log(const std::string& event, const std::string& name, const std::string& fields);

  ProcessGroup* group_;
  FaultSchedule schedule_;
  int servers_, workers_;
  int joined_ = 0;  // servers started by join items
  std::string self_, scheduler_;
  std::vector<std::string> server_args_;
  std::optional<ClusterSecret> secret_;
  double start_;
  std::ofstream log_;
  bool echo_;  // to the terminal
  TimelineWriter* timeline_;
  Partitioner* partitioner_;
  std::mt19937_64 random_;
  std::vector<Pending> pending_;
  // Items timed from the job's start, until it started.
  std::vector<const FaultItem*> awaiting_start_;
  bool handles_lines_ = false;  // OnLine is the group's line handler
  LaunchedJobEnd job_end_;
  bool logged_over_ = false;
};

}  // namespace keel

#endif  // KEEL_FAULTS_FAULT_RUNNER_H_
