// Fuzzes ParseFaultSchedule (faults/fault_schedule.h), the --faults grammar of
// `keel launch`, for a job of 3 servers and 4 workers; an accepted schedule
// must then answer TransportFlags and Targets for every process.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "faults/fault_schedule.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  keel::FaultSchedule schedule;
  try {
    schedule = keel::ParseFaultSchedule(spec, 3, 4);
  } catch (const keel::Error&) {
    return 0;
  }
  for (const char* role : {"server", "worker"}) {
    for (int rank = 0; rank < 4; ++rank) {
      (void)schedule.TransportFlags(role, rank);
      for (const keel::FaultItem& item : schedule.items) (void)item.Targets(role, rank);
    }
  }
  return 0;
}
