#include "worker/exact_sum_ledger.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <tuple>

#include "base/error.h"
#include "base/files.h"

namespace keel {
namespace {

constexpr char kLedgerSuffix[] = ".ledger";

bool IsLedgerName(const std::string& name) {
  const std::string suffix = kLedgerSuffix;
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The ledger files' names in `folder`, sorted; none if it does not exist.
std::vector<std::string> LedgerNames(const std::string& folder) {
  std::vector<std::string> names;
  DIR* dir = opendir(folder.c_str());
  if (!dir) {
    if (errno == ENOENT) return names;
    throw MakeError("cannot read folder ", folder, ": ", strerror(errno));
  }
  while (const dirent* entry = readdir(dir)) {
    if (IsLedgerName(entry->d_name)) names.push_back(entry->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

// One line "EVENT R E B"; throws Error naming `where` unless well formed.
std::pair<std::string, PushId> ParseLine(const std::string& line, const std::string& where) {
  std::istringstream fields(line);
  std::string event, rest;
  PushId push;
  if (!(fields >> event >> push.rank >> push.epoch >> push.minibatch) || (fields >> rest) ||
      (event != "sent" && event != "acked")) {
    throw MakeError(where, ": '", line, "' is not 'sent|acked RANK EPOCH MINIBATCH'");
  }
  if (push.rank < 0 || push.epoch < 1 || push.minibatch < 0) {
    throw MakeError(where, ": '", line, "' has a negative rank or minibatch, or an epoch below 1");
  }
  return {event, push};
}

}  // namespace

bool PushId::operator<(const PushId& other) const {
  return std::tie(rank, epoch, minibatch) < std::tie(other.rank, other.epoch, other.minibatch);
}

bool PushId::operator==(const PushId& other) const {
  return rank == other.rank && epoch == other.epoch && minibatch == other.minibatch;
}

LedgerWriter::LedgerWriter(const std::string& path) : path_(path) {
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw MakeError("cannot open ledger ", path, ": ", strerror(errno));
}

LedgerWriter::~LedgerWriter() { close(fd_); }

void LedgerWriter::Sent(const PushId& push) { Append("sent", push); }

void LedgerWriter::Acknowledged(const PushId& push) { Append("acked", push); }

void LedgerWriter::Append(const char* event, const PushId& push) {
  char line[96];
  const int length =
      snprintf(line, sizeof(line), "%s %d %d %d\n", event, push.rank, push.epoch, push.minibatch);
  if (write(fd_, line, static_cast<size_t>(length)) != length) {
    throw MakeError("cannot write ledger ", path_, ": ", strerror(errno));
  }
}

std::string LedgerPath(const std::string& folder, int node_id) {
  return folder + "/node-" + std::to_string(node_id) + kLedgerSuffix;
}

ProcessLedger ParseLedger(const std::string& text, const std::string& source) {
  ProcessLedger ledger;
  ledger.source = source;
  std::set<PushId> sent;
  size_t begin = 0;
  for (int number = 1;; ++number) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // a last line without its newline was never written
    const std::string where = source + ":" + std::to_string(number);
    const auto [event, push] = ParseLine(text.substr(begin, end - begin), where);
    if (event == "sent") {
      sent.insert(push);
      ledger.sent.push_back(push);
    } else {
      if (!sent.count(push)) {
        throw MakeError(where, ": acknowledges rank ", push.rank, " epoch ", push.epoch,
                        " minibatch ", push.minibatch, ", which this ledger never sent");
      }
      ledger.acknowledged.push_back(push);
    }
    begin = end + 1;
  }
  return ledger;
}

std::vector<ProcessLedger> ReadLedgers(const std::string& folder) {
  std::vector<ProcessLedger> ledgers;
  for (const std::string& name : LedgerNames(folder)) {
    const std::string path = folder + "/" + name;
    ledgers.push_back(ParseLedger(ReadFile(path), path));
  }
  return ledgers;
}

void RemoveLedgers(const std::string& folder) {
  for (const std::string& name : LedgerNames(folder)) {
    const std::string path = folder + "/" + name;
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      throw MakeError("cannot delete ", path, ": ", strerror(errno));
    }
  }
}

}  // namespace keel
