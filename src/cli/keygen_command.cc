// `keel keygen --out FILE`: a new cluster secret (kv/cluster_secret.h).
#include <iostream>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/job_flags.h"
#include "kv/cluster_secret.h"

namespace keel {

int RunKeygen() {
  if (FLAGS_out.empty())
    throw MakeError("keel keygen needs --out FILE (a file that does not exist)");
  WriteClusterSecretFile(FLAGS_out, GenerateClusterSecret());
  std::cout << "wrote a new cluster secret to " << FLAGS_out
            << " (mode 0600); give every role --secret_file=" << FLAGS_out << "\n";
  return 0;
}

}  // namespace keel
