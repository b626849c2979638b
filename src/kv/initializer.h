// Initializers: the weights a server gives a row on its first touch.
//
// Deterministic: the value of column c of key K depends only on (K, c, seed),
// never on the order rows are created in or on the server that creates them,
// so a job started twice, or resumed from a checkpoint on another server,
// gets identical rows.
#ifndef KEEL_KV_INITIALIZER_H_
#define KEEL_KV_INITIALIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kv/parameter_table.h"

namespace keel {

struct InitializerSpec {
  // "constant": every weight is `value`.
  // "uniform": uniform in [-scale, scale].
  // "normal": normal with mean 0 and standard deviation `scale`.
  std::string method = "constant";
  float value = 0;
  float scale = 0.01f;
};

// Columns [begin, end) of every row, initialized by `spec`. Columns past a
// row's width are ignored.
struct InitializerGroup {
  int begin = 0;
  int end = 0;
  InitializerSpec spec;
};

// An initializer for ParameterTable: columns inside a group follow that
// group's spec, the others `default_spec`. Throws Error for an unknown method,
// a negative or non-finite scale, a non-finite value, or groups that are empty,
// start at a negative column or overlap. The result may be copied and called
// from any thread.
ParameterTable::Initializer MakeInitializer(const InitializerSpec& default_spec,
                                            std::vector<InitializerGroup> groups, uint64_t seed);

}  // namespace keel

#endif  // KEEL_KV_INITIALIZER_H_
