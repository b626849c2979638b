// TableSpec: how the rows of one parameter table are made and updated. The
// job that declares its tables (worker side) and the server that holds them
// both read it.
#ifndef KEEL_KV_TABLE_SPEC_H_
#define KEEL_KV_TABLE_SPEC_H_

#include "kv/optimizer.h"
#include "kv/parameter_table.h"

namespace keel {

struct TableSpec {
  int width = 0;  // weights per key; 0: taken from the first request
  OptimizerOptions optimizer;
  ParameterTable::Initializer initializer;  // nullptr: zeros
  // Key admission: a key gets a row once it has been pushed this many times
  // (counted in an AdmissionSketch of `admit_sketch_bytes`); its pushes
  // before are dropped. 0 or 1: at its first push.
  uint32_t admit_after = 0;
  uint64_t admit_sketch_bytes = uint64_t{8} << 20;
  // Eviction: rows not pushed in the table's last this many clocks are
  // removed (0: never).
  uint32_t evict_after = 0;
};

}  // namespace keel

#endif  // KEEL_KV_TABLE_SPEC_H_
