// The hosts of a `keel train` job given as a Kubernetes Indexed Job gives
// them, in place of SageMaker's resourceconfig.json: every host's name in
// index order (the pods' stable names through a headless Service,
// keel-train-0.keel-train, keel-train-1.keel-train, ...) and which one this
// host is, by name or by its index (JOB_COMPLETION_INDEX, which Kubernetes
// sets in every pod of an Indexed Job).
//
// In both forms the host of index 0 leads (runs the scheduler), and a host's
// index ranks its servers and workers. resourceconfig.json's hosts are put in
// index order by sorting their names, as before (SageMaker's algo-1 leads,
// also with ten hosts or more, where algo-10 sorts before algo-2); hosts given
// here keep the order given, never sorted, so that keel-train-10 is index 10
// and keel-train-0 leads however many there are.
#ifndef KEEL_LAUNCH_INDEXED_HOSTS_H_
#define KEEL_LAUNCH_INDEXED_HOSTS_H_

#include <string>
#include <vector>

#include "launch/sagemaker_contract.h"

namespace keel {

// The environment variable a Kubernetes Indexed Job's pod finds its index in.
constexpr char kJobCompletionIndexVariable[] = "JOB_COMPLETION_INDEX";

// At most this many hosts in a list (a range is expanded in memory).
constexpr int kMaxListedHosts = 10000;

// The host names of `list`, NAME,NAME,... in order, where a NAME may hold one
// range {FIRST..LAST} of decimal numbers (FIRST <= LAST), expanded in
// increasing order without padding: "keel-train-{0..2}.keel-train" is
// keel-train-0.keel-train, keel-train-1.keel-train, keel-train-2.keel-train.
// Throws Error naming `flag` and the item for an empty name, a malformed or
// reversed range, or more than kMaxListedHosts names.
std::vector<std::string> ExpandHostNames(const std::string& list, const std::string& flag);

// The job's hosts `names`, in index order (names[0] leads), this host being
// `current_host` or, when that is "", names[`index`], `index` being the
// decimal text of JOB_COMPLETION_INDEX ("" when it is not set). Throws Error
// when `names` is empty or names a host twice, `current_host` is not among
// them, `index` is not an integer from 0 to names.size() - 1, or neither
// `current_host` nor `index` is given.
SageMakerHosts IndexedHosts(const std::vector<std::string>& names, const std::string& current_host,
                            const std::string& index);

}  // namespace keel

#endif  // KEEL_LAUNCH_INDEXED_HOSTS_H_
