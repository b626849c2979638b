#include "launch/role_output.h"

#include <glog/logging.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "launch/job_summary.h"

namespace keel {
namespace {

// Whether the role `name` is the scheduler ("scheduler"; over ssh "HOST scheduler").
bool IsScheduler(const std::string& name) {
  const std::string role = "scheduler";
  return name.size() >= role.size() &&
         name.compare(name.size() - role.size(), role.size(), role) == 0;
}

std::string WorkingFolder() {
  char folder[4096];
  return getcwd(folder, sizeof(folder)) ? folder : "";
}

}  // namespace

LineKind KindOfLine(const std::string& line) {
  if (line.size() < 6 || !std::isdigit(static_cast<unsigned char>(line[1]))) {
    return LineKind::kPlain;
  }
  // glog: severity letter, date (MMDD or YYYYMMDD), a space, then the time.
  size_t digits = 1;
  while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
  if ((digits != 5 && digits != 9) || digits >= line.size() || line[digits] != ' ') {
    return LineKind::kPlain;
  }
  switch (line[0]) {
    case 'I':
      return LineKind::kInfo;
    case 'W':
      return LineKind::kWarning;
    case 'E':
    case 'F':
      return LineKind::kError;
    default:
      return LineKind::kPlain;
  }
}

std::string LogFileName(const std::string& name) {
  std::string file;
  for (char c : name) {
    file += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ? c : '-';
  }
  return file + ".log";
}

ConsoleWrite StandardConsole() {
  return [](const std::string& text, bool to_stderr) {
    FILE* stream = to_stderr ? stderr : stdout;
    fwrite(text.data(), 1, text.size(), stream);
    fflush(stream);
  };
}

int TerminalWidth() {
  if (!isatty(STDOUT_FILENO)) return 0;
  const char* term = getenv("TERM");
  if (term && std::string(term) == "dumb") return 0;
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

LaunchOutput::LaunchOutput(const LaunchOutputOptions& options, ConsoleWrite write)
    : options_(options),
      write_(write),
      display_(options.mode, write, options.mode == ProgressMode::kBar ? options.width : 0) {
  if (!options_.log_dir.empty()) MakeDirectories(options_.log_dir);
}

void LaunchOutput::Attach(ProcessGroup* group) {
  group->SetOutput([this](const std::string& name, const std::string& line, bool to_stderr) {
    Line(name, line, to_stderr, MonotonicSeconds());
  });
}

void LaunchOutput::Line(const std::string& name, const std::string& line, bool to_stderr,
                        double now) {
  if (!options_.log_dir.empty()) LogFile(name) << line << std::endl;
  ProgressRecord record;
  try {
    if (IsScheduler(name) && ParseProgressRecord(line, &record)) {
      display_.OnRecord(record, now);
      return;
    }
  } catch (const Error& e) {
    display_.PrintLine("[launch] a malformed progress line from " + name + ": " + e.what(), true);
  }
  if (Shown(name, line, to_stderr)) display_.PrintLine("[" + name + "] " + line, to_stderr);
}

bool LaunchOutput::Shown(const std::string& name, const std::string& line, bool to_stderr) const {
  if (options_.verbose || name == "launch" || name == "faults") return true;
  switch (KindOfLine(line)) {
    case LineKind::kInfo:
      return false;
    case LineKind::kWarning:
    case LineKind::kError:
      return true;
    case LineKind::kPlain:
      return to_stderr || options_.mode == ProgressMode::kNone;
  }
  return true;
}

std::ofstream& LaunchOutput::LogFile(const std::string& name) {
  std::unique_ptr<std::ofstream>& file = files_[name];
  if (!file) {
    const std::string path = options_.log_dir + "/" + LogFileName(name);
    file = std::make_unique<std::ofstream>(path);  // this launch's, from its start
    if (!*file) {
      display_.PrintLine("[launch] cannot write " + path + ": " + strerror(errno), true);
    }
  }
  return *file;
}

void LaunchOutput::Finish(int exit_code, double wall_seconds) {
  display_.EndBar();
  JobSummaryInput input;
  input.exit_code = exit_code;
  input.wall_seconds = wall_seconds;
  input.end = display_.end();
  input.log_dir = options_.log_dir;
  input.working_folder = WorkingFolder();
  write_(FormatJobSummary(input), false);
}

}  // namespace keel
