// The exact_sum job's ledgers: what each worker process pushed, and which of
// its pushes the servers acknowledged, kept in a file per process in the
// job's model folder so that the record outlives a worker killed mid-job.
//
// A push is named by its PushId (the rank whose share it belongs to, the
// epoch and the minibatch); the gradient it carries is a function of that
// name alone (exact_sum_check.h), so a ledger is enough to say what the
// servers must hold.
#ifndef KEEL_WORKER_EXACT_SUM_LEDGER_H_
#define KEEL_WORKER_EXACT_SUM_LEDGER_H_

#include <string>
#include <vector>

namespace keel {

struct PushId {
  int rank = 0;       // the share's rank (a departed worker's, for an orphaned share)
  int epoch = 0;      // 1-based
  int minibatch = 0;  // 0-based, within the share's epoch
  bool operator<(const PushId& other) const;
  bool operator==(const PushId& other) const;
};

// One process's ledger: every push it sent, and those acknowledged.
struct ProcessLedger {
  std::string source;                // the file it was read from
  std::vector<PushId> sent;          // in the order sent
  std::vector<PushId> acknowledged;  // in the order acknowledged; each also in `sent`
};

// Appends one line per event to a ledger file: "sent R E B" before a push
// leaves, "acked R E B" once Wait returned for it. Each line is one write(2)
// on a file opened for appending, so a process killed at any point leaves
// every line it wrote whole (the kernel has it) and none half written.
// Not thread-safe.
class LedgerWriter {
 public:
  // Creates (or appends to) `path`. Throws Error naming it if it cannot.
  explicit LedgerWriter(const std::string& path);
  ~LedgerWriter();
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;

  // Throw Error naming the file if the line cannot be written.
  void Sent(const PushId& push);
  void Acknowledged(const PushId& push);

 private:
  void Append(const char* event, const PushId& push);

  std::string path_;
  int fd_ = -1;
};

// The ledger file of the worker process registered as node `node_id` (node
// ids are never reused, so a replacement or a restarted process gets its own).
std::string LedgerPath(const std::string& folder, int node_id);

// A ledger's text. Throws Error naming `source` and the line for a malformed
// line, or an acknowledgement of a push the ledger never sent. A last line
// without its newline is not there (no write made it whole).
ProcessLedger ParseLedger(const std::string& text, const std::string& source);

// Every *.ledger file in `folder` (none if it does not exist), by file name.
// Throws Error as ParseLedger does, or naming the folder if it cannot be read.
std::vector<ProcessLedger> ReadLedgers(const std::string& folder);

// Deletes every *.ledger file in `folder` (a previous run's). Throws Error
// naming a file that cannot be deleted.
void RemoveLedgers(const std::string& folder);

}  // namespace keel

#endif  // KEEL_WORKER_EXACT_SUM_LEDGER_H_
