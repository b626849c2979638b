// LaunchOutput: what `keel launch` does with every line its roles print.
//
// A progress record (scheduler/progress_record.h) goes to the
// ProgressDisplay. Every line of a role goes to that role's file under
// --log_dir, when given. The terminal shows, by default, the progress, the
// roles' warnings and errors (glog's W, E and F lines, and any other line on
// a role's standard error: a failure report, a crash), the launcher's own
// lines ("launch": its reports; "faults": the fault schedule's events) and,
// at the end, the summary (launch/job_summary.h); glog's INFO lines
// and the roles' other output only with --verbose (or --progress=none, which
// shows the roles' plain output as it comes).
//
// Not synchronized: the launcher calls it from the thread that forwards output.
#ifndef KEEL_LAUNCH_ROLE_OUTPUT_H_
#define KEEL_LAUNCH_ROLE_OUTPUT_H_

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "launch/launcher.h"
#include "launch/progress_display.h"

namespace keel {

// What a role's line is, by glog's prefix ("I20261125 12:34:56.789012 4242
// file.cc:12] ..."; older glogs leave the year out).
enum class LineKind { kInfo, kWarning, kError, kPlain };
LineKind KindOfLine(const std::string& line);

struct LaunchOutputOptions {
  ProgressMode mode = ProgressMode::kLines;
  bool verbose = false;
  std::string log_dir;  // "" keeps no files
  int width = 0;        // the terminal's columns (0: not a terminal)
};

// Whether standard output is a terminal that understands "\r" and erasing
// to the end of the line; its width (0 if not a terminal).
int TerminalWidth();

class LaunchOutput {
 public:
  // Creates `options.log_dir` if needed; throws Error naming it if that fails.
  // Each role's file there is written anew by this launch (a role started
  // again in it goes on in the same file).
  LaunchOutput(const LaunchOutputOptions& options, ConsoleWrite write);

  // Takes every line `group` forwards. The group must not outlive this.
  void Attach(ProcessGroup* group);
  // A line (without its newline) of the role `name` ("launch": the
  // launcher's own), read from its standard error or output, at `now`
  // (seconds, monotonic).
  void Line(const std::string& name, const std::string& line, bool to_stderr, double now);
  // After the job: ends the progress and prints the summary.
  void Finish(int exit_code, double wall_seconds);

 private:
  // Whether the terminal shows a role's line that is not a record.
  bool Shown(const std::string& name, const std::string& line, bool to_stderr) const;
  // `name`'s file under log_dir, opened on first use.
  std::ofstream& LogFile(const std::string& name);

  LaunchOutputOptions options_;
  ConsoleWrite write_;
  ProgressDisplay display_;
  std::map<std::string, std::unique_ptr<std::ofstream>> files_;
};

// Writes to this process's standard output or error, flushed.
ConsoleWrite StandardConsole();

// The file under --log_dir for the role `name`: "worker 1" -> worker-1.log.
std::string LogFileName(const std::string& name);

}  // namespace keel

#endif  // KEEL_LAUNCH_ROLE_OUTPUT_H_
