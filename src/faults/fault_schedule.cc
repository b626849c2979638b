#include "faults/fault_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/error.h"

namespace keel {
namespace {

// A number, or nothing if `text` is not entirely one.
bool ParseNumber(const std::string& text, double* value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return *end == '\0' && std::isfinite(*value);
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class ItemParser {
 public:
  ItemParser(const std::string& text, size_t index, int servers, int workers)
      : text_(text), index_(index), servers_(servers), workers_(workers) {}

  FaultItem Parse() {
    FaultItem item;
    item.text = text_;
    // ACTION:ROLE:WHO then '@WHEN' or '=VALUE'.
    const size_t first = text_.find(':');
    if (first == std::string::npos) Fail("expected ACTION:ROLE:WHO@WHEN or ACTION:ROLE:WHO=VALUE");
    const std::string action = text_.substr(0, first);
    if (action == "kill") {
      item.action = FaultAction::kKill;
    } else if (action == "stop") {
      item.action = FaultAction::kStop;
    } else if (action == "restart") {
      item.action = FaultAction::kRestart;
    } else if (action == "drop") {
      item.action = FaultAction::kDrop;
    } else if (action == "delay") {
      item.action = FaultAction::kDelay;
    } else if (action == "preempt") {
      item.action = FaultAction::kPreempt;
    } else if (action == "partition") {
      item.action = FaultAction::kPartition;
      ParsePartition(text_.substr(first + 1), &item);
      return item;
    } else if (action == "join") {
      item.action = FaultAction::kJoin;
    } else if (action == "drain") {
      item.action = FaultAction::kDrain;
    } else {
      Fail("unknown action '" + action +
           "' (kill, stop, restart, drop, delay, preempt, partition, join, drain)");
    }
    if (item.action == FaultAction::kJoin) {
      const size_t at = text_.find('@', first + 1);
      if (at == std::string::npos || text_.substr(first + 1, at - first - 1) != "server") {
        Fail("expected join:server@WHEN (a new server joins the running job)");
      }
      item.role = "server";
      item.rank = FaultItem::kNewRank;
      ParseWhen(text_.substr(at + 1), &item);
      if (item.rate_per_s > 0) Fail("a join happens once: join:server@TIME");
      return item;
    }
    const char separator = item.transport() ? '=' : '@';
    const size_t split = text_.find(separator, first + 1);
    if (split == std::string::npos) Fail(Expected(action, item.transport()));
    ParseTarget(text_.substr(first + 1, split - first - 1), action, &item);
    if (item.action == FaultAction::kDrain && (item.role != "server" || item.rank < 0)) {
      Fail("expected drain:server:R@TIME (name the server's rank)");
    }
    const std::string rest = text_.substr(split + 1);
    if (item.transport()) {
      ParseValue(rest, &item);
    } else {
      ParseWhen(rest, &item);
    }
    return item;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) const {
    throw MakeError("--faults item ", index_ + 1, " '", text_, "': ", why);
  }

  // "GROUP|GROUP@TIME+DURATION", TIME with "start+" before it counted from
  // the job's start.
  void ParsePartition(const std::string& rest, FaultItem* item) const {
    const size_t bar = rest.find('|');
    const size_t at = rest.find('@');
    if (bar == std::string::npos || at == std::string::npos || at < bar) {
      Fail(
          "expected partition:GROUP|GROUP@TIME+DURATION (like partition:server:0|worker:0,"
          "worker:1@5s+3s)");
    }
    item->side_a = ParseGroup(rest.substr(0, bar));
    item->side_b = ParseGroup(rest.substr(bar + 1, at - bar - 1));
    for (const std::string& name : item->side_a) {
      if (std::find(item->side_b.begin(), item->side_b.end(), name) != item->side_b.end()) {
        Fail(name + " is on both sides");
      }
    }
    std::string when = rest.substr(at + 1);
    if (when.rfind("start+", 0) == 0) {
      item->after_start = true;
      when = when.substr(6);
    }
    const size_t plus = when.find('+');
    if (plus == std::string::npos)
      Fail("a partition needs a duration: @TIME+DURATION (like @5s+3s or @start+2s+3s)");
    item->at_s = Seconds(when.substr(0, plus), "time");
    item->duration_s = Seconds(when.substr(plus + 1), "duration");
    if (item->duration_s <= 0) Fail("a partition needs a positive duration");
  }

  // "server:0,worker:1,scheduler" -> {"server 0", "worker 1", "scheduler"}.
  std::vector<std::string> ParseGroup(const std::string& group) const {
    if (group.empty()) Fail("a partition's group is empty (name processes like server:0)");
    std::vector<std::string> names;
    size_t start = 0;
    while (start <= group.size()) {
      size_t end = group.find(',', start);
      if (end == std::string::npos) end = group.size();
      const std::string member = group.substr(start, end - start);
      FaultItem process;
      process.action = FaultAction::kKill;  // a process, not a transport item
      if (member == "scheduler") {
        names.push_back("scheduler");
      } else {
        const size_t colon = member.find(':');
        process.role = member.substr(0, colon);
        if (colon == std::string::npos || (process.role != "server" && process.role != "worker")) {
          Fail("'" + member + "' is not a process (server:R, worker:R or scheduler)");
        }
        const std::string who = member.substr(colon + 1);
        if (who == "*" || who == "random") Fail("name each process of a group: '" + member + "'");
        ParseWho(who, &process);
        names.push_back(process.role + " " + std::to_string(process.rank));
      }
      if (std::count(names.begin(), names.end(), names.back()) > 1) {
        Fail("'" + member + "' is named twice");
      }
      start = end + 1;
    }
    return names;
  }

  static std::string Expected(const std::string& action, bool transport) {
    return "expected " + action + ":ROLE:WHO" + (transport ? "=VALUE" : "@WHEN") +
           (transport ? "" : " or " + action + ":scheduler@WHEN");
  }

  // "ROLE:WHO", or "scheduler" (one process, no rank; kill, stop and restart only).
  void ParseTarget(const std::string& target, const std::string& action, FaultItem* item) const {
    const size_t colon = target.find(':');
    item->role = target.substr(0, colon);
    if (item->role == "scheduler") {
      if (item->transport()) {
        Fail("the scheduler sends no data messages: drop and delay apply to servers and workers");
      }
      if (colon != std::string::npos) {
        Fail("the scheduler has no rank: " + action + ":scheduler@WHEN");
      }
      item->rank = 0;
      return;
    }
    if (colon == std::string::npos) Fail(Expected(action, item->transport()));
    if (item->role != "server" && item->role != "worker") {
      Fail("unknown role '" + item->role + "' (server, worker, scheduler)");
    }
    ParseWho(target.substr(colon + 1), item);
  }

  void ParseWho(const std::string& who, FaultItem* item) const {
    const int count =
        item->role == "scheduler" ? 1 : (item->role == "server" ? servers_ : workers_);
    if (who == "*") {
      item->rank = FaultItem::kEveryRank;
    } else if (who == "random") {
      if (item->transport()) {
        Fail("'random' picks a process for kill, preempt, stop or restart only; name a rank or *");
      }
      item->rank = FaultItem::kRandomRank;
    } else {
      double rank = 0;
      if (!ParseNumber(who, &rank) || rank != std::floor(rank) || rank < 0) {
        Fail("'" + who + "' is not a rank, * or random");
      }
      if (rank >= count) {
        Fail("there is no " + item->role + " " + who + " (the job has " + std::to_string(count) +
             " " + item->role + (count == 1 ? "" : "s") + ")");
      }
      item->rank = static_cast<int>(rank);
    }
  }

  // "5s", "1.5s", "300ms" -> seconds.
  double Seconds(const std::string& text, const std::string& what) const {
    double value = 0;
    bool ok = false;
    if (EndsWith(text, "ms")) {
      ok = ParseNumber(text.substr(0, text.size() - 2), &value);
      value *= 1e-3;
    } else if (EndsWith(text, "s")) {
      ok = ParseNumber(text.substr(0, text.size() - 1), &value);
    }
    if (!ok) Fail(what + " '" + text + "' is not a duration like 5s, 1.5s or 300ms");
    if (value < 0) Fail(what + " '" + text + "' is negative");
    return value;
  }

  void ParseWhen(const std::string& spec, FaultItem* item) const {
    std::string when = spec;
    if (when.rfind("start+", 0) == 0) {
      item->after_start = true;
      when = when.substr(6);
      if (when.rfind("rate=", 0) == 0) Fail("start+ takes a TIME (like @start+2s), not a rate");
    }
    std::string time = when;
    const size_t plus = when.find('+');
    if (plus != std::string::npos) {
      if (item->action != FaultAction::kStop) {
        Fail("only stop takes a duration (+DURATION)");
      }
      time = when.substr(0, plus);
      item->duration_s = Seconds(when.substr(plus + 1), "duration");
      if (item->duration_s <= 0) Fail("a stop needs a positive duration");
    } else if (item->action == FaultAction::kStop) {
      Fail("a stop needs a duration: stop:ROLE:WHO@TIME+DURATION (like @3s+2s)");
    }
    if (time.rfind("rate=", 0) == 0) {
      if (item->action == FaultAction::kDrain) Fail("a drain happens once: drain:server:R@TIME");
      const std::string rate = time.substr(5);
      if (!EndsWith(rate, "/s") ||
          !ParseNumber(rate.substr(0, rate.size() - 2), &item->rate_per_s) ||
          item->rate_per_s <= 0) {
        Fail("rate '" + rate + "' is not a positive number per second like 0.1/s");
      }
      return;
    }
    if (time.empty()) Fail("no time after '@' (like @5s)");
    item->at_s = Seconds(time, "time");
  }

  void ParseValue(const std::string& value, FaultItem* item) const {
    if (item->action == FaultAction::kDrop) {
      double share = 0;
      bool ok = false;
      if (EndsWith(value, "%")) {
        ok = ParseNumber(value.substr(0, value.size() - 1), &share);
        share /= 100;
      } else {
        ok = ParseNumber(value, &share);
      }
      if (!ok || share < 0 || share > 1) {
        Fail("drop share '" + value + "' is not a number in [0, 1] or a percentage like 1%");
      }
      item->drop_rate = share;
      return;
    }
    const size_t tilde = value.find('~');
    item->delay_ms = Seconds(value.substr(0, tilde), "delay") * 1e3;
    if (tilde != std::string::npos) {
      item->jitter_ms = Seconds(value.substr(tilde + 1), "jitter") * 1e3;
    }
  }

  const std::string& text_;
  size_t index_;
  int servers_, workers_;
};

// True if `text` begins with one of the actions and a colon.
bool StartsAnItem(const std::string& text) {
  for (const char* action :
       {"kill:", "stop:", "restart:", "drop:", "delay:", "partition:", "join:", "drain:"}) {
    if (text.rfind(action, 0) == 0) return true;
  }
  return false;
}

std::string Number(double value) {
  std::ostringstream text;
  text.precision(17);
  text << value;
  return text.str();
}

}  // namespace

const char* FaultActionName(FaultAction action) {
  switch (action) {
    case FaultAction::kKill:
      return "kill";
    case FaultAction::kStop:
      return "stop";
    case FaultAction::kRestart:
      return "restart";
    case FaultAction::kDrop:
      return "drop";
    case FaultAction::kDelay:
      return "delay";
    case FaultAction::kPreempt:
      return "preempt";
    case FaultAction::kPartition:
      return "partition";
    case FaultAction::kJoin:
      return "join";
    case FaultAction::kDrain:
      return "drain";
  }
  return "unknown";
}

bool FaultItem::Targets(const std::string& of_role, int of_rank) const {
  return role == of_role && (rank == kEveryRank || rank == of_rank);
}

const FaultItem* FaultSchedule::FirstPartition() const {
  for (const FaultItem& item : items) {
    if (item.action == FaultAction::kPartition) return &item;
  }
  return nullptr;
}

std::vector<std::string> FaultSchedule::TransportFlags(const std::string& role, int rank) const {
  const FaultItem* drop = nullptr;
  const FaultItem* delay = nullptr;
  for (const FaultItem& item : items) {
    if (!item.Targets(role, rank)) continue;
    if (item.action == FaultAction::kDrop) drop = &item;
    if (item.action == FaultAction::kDelay) delay = &item;
  }
  std::vector<std::string> flags;
  if (drop) flags.push_back("--drop_rate=" + Number(drop->drop_rate));
  if (delay) {
    flags.push_back("--delay_ms=" + Number(delay->delay_ms));
    flags.push_back("--delay_jitter_ms=" + Number(delay->jitter_ms));
  }
  return flags;
}

FaultSchedule ParseFaultSchedule(const std::string& spec, int servers, int workers) {
  FaultSchedule schedule;
  // Servers that join count as ranks the items may name (server N, N from
  // `servers` on).
  for (size_t at = spec.find("join:server@"); at != std::string::npos;
       at = spec.find("join:server@", at + 1)) {
    if (at == 0 || spec[at - 1] == ',') ++servers;
  }
  size_t start = 0;
  for (size_t index = 0; start <= spec.size(); ++index) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    // A partition's group holds commas: a piece that starts no item continues it.
    while (spec.compare(start, 10, "partition:") == 0 && end < spec.size() &&
           !StartsAnItem(spec.substr(end + 1))) {
      end = spec.find(',', end + 1);
      if (end == std::string::npos) end = spec.size();
    }
    const std::string text = spec.substr(start, end - start);
    if (text.empty()) {
      if (spec.empty()) break;
      throw MakeError("--faults item ", index + 1, " is empty (items are separated by one comma)");
    }
    schedule.items.push_back(ItemParser(text, index, servers, workers).Parse());
    start = end + 1;
  }
  return schedule;
}

}  // namespace keel
