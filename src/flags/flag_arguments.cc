#include "flags/flag_arguments.h"

#include <gflags/gflags.h>
#include <stdlib.h>

#include <algorithm>
#include <climits>
#include <sstream>

#include "base/edit_distance.h"
#include "base/error.h"
#include "base/files.h"

namespace keel {
namespace {

// A flag as written, before it is looked up: "--name=value", "-name".
struct FlagText {
  std::string name;
  std::string value;
  bool has_value = false;
};

// `arg` (which starts with '-') as a name and, after '=', a value.
FlagText SplitFlag(const std::string& arg) {
  const size_t dashes = arg.rfind("--", 0) == 0 ? 2 : 1;
  const size_t equals = arg.find('=', dashes);
  FlagText text;
  text.name = arg.substr(dashes, equals == std::string::npos ? std::string::npos : equals - dashes);
  if (equals != std::string::npos) {
    text.value = arg.substr(equals + 1);
    text.has_value = true;
  }
  return text;
}

// "PATH:LINE: " before a message about a flagfile's line; nothing for the
// command line.
std::string Place(const std::string& origin) { return origin.empty() ? "" : origin + ": "; }

// The flags gflags reads as more flags when they are set.
bool IsRecursiveFlag(const std::string& name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv";
}

// `path` resolved (symbolic links, "..") to tell whether a flagfile includes
// itself; `path` itself if it cannot be resolved (reading it then fails).
std::string CanonicalPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

class FlagReader {
 public:
  std::vector<FlagArgument> ReadCommandLine(const std::vector<std::string>& args);

 private:
  // Looks the flag up; a boolean without a value becomes "true" ("false" for
  // --noNAME). Throws Error naming the place for a flag that does not exist.
  // Sets *needs_value if the flag needs a value it was not given.
  FlagArgument Resolve(const FlagText& text, const std::string& origin, bool* needs_value) const;
  // Checks the value against the flag's type and records the flag; reads a
  // --flagfile's files in its place.
  void Add(const FlagArgument& argument);
  void ReadFlagfile(const std::string& path, const std::string& origin);
  void ReadFlagfileLine(const std::string& line, const std::string& origin);
  std::string Suggestion(const std::string& name) const;

  std::vector<FlagArgument> arguments_;
  std::vector<std::string> open_files_;  // the flagfiles being read (canonical), outermost first
  std::vector<std::string> names_ = AllFlagNames();
  gflags::FlagSaver saver_;  // undoes the values Add sets to check them
};

std::string FlagReader::Suggestion(const std::string& name) const {
  const std::string nearest = NearestName(name, names_);
  return nearest.empty() ? "" : " (did you mean --" + nearest + "?)";
}

FlagArgument FlagReader::Resolve(const FlagText& text, const std::string& origin,
                                 bool* needs_value) const {
  FlagArgument argument{text.name, text.value, origin};
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(text.name.c_str(), &info)) {
    const bool negated = text.name.rfind("no", 0) == 0 && !text.has_value &&
                         gflags::GetCommandLineFlagInfo(text.name.substr(2).c_str(), &info) &&
                         info.type == "bool";
    if (!negated)
      throw MakeError(Place(origin), "unknown flag --", text.name, Suggestion(text.name));
    argument.name = text.name.substr(2);
    argument.value = "false";
  } else if (!text.has_value && info.type == "bool") {
    argument.value = "true";
  }
  *needs_value = !text.has_value && info.type != "bool";
  return argument;
}

void FlagReader::Add(const FlagArgument& argument) {
  if (!IsRecursiveFlag(argument.name) &&
      gflags::SetCommandLineOption(argument.name.c_str(), argument.value.c_str()).empty()) {
    gflags::CommandLineFlagInfo info;
    gflags::GetCommandLineFlagInfo(argument.name.c_str(), &info);
    throw MakeError(Place(argument.origin), "--", argument.name, " '", argument.value,
                    "' is not a valid ", info.type, " value");
  }
  arguments_.push_back(argument);
  if (argument.name != "flagfile") return;
  std::istringstream files(argument.value);  // gflags takes a comma-separated list
  for (std::string path; std::getline(files, path, ',');) {
    if (!path.empty()) ReadFlagfile(path, argument.origin);
  }
}

void FlagReader::ReadFlagfile(const std::string& path, const std::string& origin) {
  const std::string canonical = CanonicalPath(path);
  if (std::find(open_files_.begin(), open_files_.end(), canonical) != open_files_.end()) {
    throw MakeError(Place(origin), "--flagfile=", path, " includes itself");
  }
  std::string text;
  try {
    text = ReadFile(path);
  } catch (const Error& e) {
    throw MakeError(Place(origin), "--flagfile=", path, ": ", e.what());
  }
  open_files_.push_back(canonical);
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ReadFlagfileLine(line, path + ":" + std::to_string(++number));
  }
  open_files_.pop_back();
}

void FlagReader::ReadFlagfileLine(const std::string& line, const std::string& origin) {
  const size_t start = line.find_first_not_of(" \t\r\v\f");
  if (start == std::string::npos || line[start] == '#') return;
  std::string flag = line.substr(start);
  if (!flag.empty() && flag.back() == '\r') flag.pop_back();
  if (flag[0] != '-') {
    throw MakeError(origin, ": '", flag,
                    "' is not a flag: a flagfile holds --name=value lines, # comments and blank "
                    "lines");
  }
  const FlagText text = SplitFlag(flag);
  const size_t space = text.name.find_first_of(" \t");
  if (!text.has_value && space != std::string::npos) {
    throw MakeError(origin, ": '", flag, "': in a flagfile, write --", text.name.substr(0, space),
                    "=VALUE");
  }
  bool needs_value = false;
  const FlagArgument argument = Resolve(text, origin, &needs_value);
  if (needs_value)
    throw MakeError(origin, ": --", text.name, " has no value (--", text.name, "=VALUE)");
  Add(argument);
}

std::vector<FlagArgument> FlagReader::ReadCommandLine(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // an operand: the command says
    bool needs_value = false;
    FlagArgument argument = Resolve(SplitFlag(arg), "", &needs_value);
    if (needs_value) {
      if (i + 1 == args.size()) throw MakeError(arg, " needs a value (", arg, "=VALUE)");
      argument.value = args[++i];
    }
    Add(argument);
  }
  return arguments_;
}

}  // namespace

std::vector<std::string> AllFlagNames() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::vector<std::string> names;
  for (const auto& flag : flags) names.push_back(flag.name);
  return names;
}

std::vector<FlagArgument> ReadFlagArguments(const std::vector<std::string>& args) {
  return FlagReader().ReadCommandLine(args);
}

}  // namespace keel
