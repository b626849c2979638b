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
};

}  // namespace keel

#endif  // KEEL_KV_TABLE_SPEC_H_
