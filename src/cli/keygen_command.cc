// `keel keygen --out FILE`: a new cluster secret (kv/cluster_secret.h).
#include <iostream>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "kv/cluster_secret.h"

namespace keel {

int RunKeygen() {
  const std::string out = OutFromFlags();
  if (out.empty()) throw MakeError("keel keygen needs --out FILE (a file that does not exist)");
  WriteClusterSecretFile(out, GenerateClusterSecret());
  std::cout << "wrote a new cluster secret to " << out
            << " (mode 0600); give every role --secret_file=" << out << "\n";
  return 0;
}

}  // namespace keel
