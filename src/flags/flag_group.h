// FlagGroup: a heading of `keel COMMAND --help` and the flags under it. Each
// flag family (cli/*_flags.h) has a table of these for the flags it defines;
// cli/command_flags.h merges them by heading and says which command takes
// which groups.
#ifndef KEEL_FLAGS_FLAG_GROUP_H_
#define KEEL_FLAGS_FLAG_GROUP_H_

#include <string>
#include <vector>

namespace keel {

struct FlagGroup {
  std::string heading;             // "job", "data", "checkpoints", ...
  std::vector<std::string> flags;  // in the order --help lists them
};

}  // namespace keel

#endif  // KEEL_FLAGS_FLAG_GROUP_H_
