// The flags of a command line as they were given, each with its place: the
// command line itself, or a line of a --flagfile (nested flagfiles too).
//
// gflags reads a flagfile's lines itself, but skips without a word a line
// whose flag does not exist or has no value, and takes a line that is not a
// flag for a list of program names that turns the following lines off; so
// Keel reads the command line and its flagfiles first, the way gflags will,
// and refuses all of these, naming the file and the line.
#ifndef KEEL_FLAGS_FLAG_ARGUMENTS_H_
#define KEEL_FLAGS_FLAG_ARGUMENTS_H_

#include <string>
#include <vector>

namespace keel {

struct FlagArgument {
  std::string name;    // as defined: no dashes, no "no" of a negated boolean (--nouse_bias)
  std::string value;   // "true" or "false" for a boolean given without one
  std::string origin;  // "" for the command line, else "PATH:LINE" of a flagfile
};

// The flags of `args` (a command's arguments after its operands) in the
// order gflags applies them, a --flagfile's lines in its place (the
// --flagfile itself is in the list too). Arguments that are not flags are
// skipped, and so is everything after "--". Throws Error naming the place
// ("job.flags:3: ...", or no prefix for the command line) for:
// - a flag that no part of keel defines, with the nearest one that exists:
//   "unknown flag --epoch (did you mean --epochs?)";
// - a flag without the value it needs, or with one its type refuses;
// - a flagfile line that is neither a flag, a # comment nor blank;
// - a flagfile that cannot be read, or that includes itself.
std::vector<FlagArgument> ReadFlagArguments(const std::vector<std::string>& args);

// Every flag's name (gflags' registry: Keel's, glog's and gflags' own).
std::vector<std::string> AllFlagNames();

}  // namespace keel

#endif  // KEEL_FLAGS_FLAG_ARGUMENTS_H_
