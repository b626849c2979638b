#include "launch/indexed_hosts.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "base/error.h"

namespace keel {
namespace {

bool AllDigits(const std::string& text) {
  return !text.empty() && text.size() <= 9 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Appends the names `item` stands for to `names`.
void ExpandItem(const std::string& item, const std::string& flag, std::vector<std::string>* names) {
  const std::string where = flag + ": '" + item + "'";
  if (item.empty()) throw MakeError(flag, ": an empty host name");
  const size_t open = item.find('{');
  if (open == std::string::npos) {
    if (item.find('}') != std::string::npos) throw MakeError(where, ": a '}' without its '{'");
    names->push_back(item);
    return;
  }
  const size_t close = item.find('}', open);
  const size_t dots = item.find("..", open);
  if (close == std::string::npos || dots == std::string::npos || dots > close ||
      item.find_first_of("{}", close + 1) != std::string::npos) {
    throw MakeError(where, ": a range is one {FIRST..LAST} of decimal numbers");
  }
  const std::string first_text = item.substr(open + 1, dots - open - 1);
  const std::string last_text = item.substr(dots + 2, close - dots - 2);
  if (!AllDigits(first_text) || !AllDigits(last_text)) {
    throw MakeError(where, ": a range is one {FIRST..LAST} of decimal numbers");
  }
  const long first = std::stol(first_text), last = std::stol(last_text);
  if (first > last) throw MakeError(where, ": the range runs backwards");
  if (last - first + 1 + static_cast<long>(names->size()) > kMaxListedHosts) {
    throw MakeError(flag, ": more than ", kMaxListedHosts, " hosts");
  }
  const std::string before = item.substr(0, open), after = item.substr(close + 1);
  for (long number = first; number <= last; ++number) {
    names->push_back(before + std::to_string(number) + after);
  }
}

}  // namespace

std::vector<std::string> ExpandHostNames(const std::string& list, const std::string& flag) {
  std::vector<std::string> names;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) ExpandItem(item, flag, &names);
  if (!list.empty() && list.back() == ',') throw MakeError(flag, ": an empty host name");
  if (names.size() > static_cast<size_t>(kMaxListedHosts)) {
    throw MakeError(flag, ": more than ", kMaxListedHosts, " hosts");
  }
  return names;
}

SageMakerHosts IndexedHosts(const std::vector<std::string>& names, const std::string& current_host,
                            const std::string& index) {
  if (names.empty()) throw MakeError("--hosts names no host");
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) throw MakeError("--hosts names ", name, " twice");
  }
  SageMakerHosts hosts;
  hosts.hosts = names;
  const int count = static_cast<int>(names.size());
  if (!current_host.empty()) {
    hosts.current_host = current_host;
    if (hosts.CurrentIndex() == count) {
      throw MakeError("--current_host ", current_host, " is not among --hosts");
    }
    return hosts;
  }
  if (index.empty()) {
    throw MakeError("--hosts needs --current_host or ", kJobCompletionIndexVariable,
                    " (a Kubernetes Indexed Job's pod has it) to say which host this is");
  }
  if (!AllDigits(index) || std::stol(index) >= count) {
    throw MakeError(kJobCompletionIndexVariable, " '", index, "' is not an index of --hosts' ",
                    count, " host(s) (0 to ", count - 1, ")");
  }
  hosts.current_host = names[static_cast<size_t>(std::stol(index))];
  return hosts;
}

}  // namespace keel
