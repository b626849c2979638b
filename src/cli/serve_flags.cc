#include "cli/serve_flags.h"

#include <arpa/inet.h>

#include <thread>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/job_flags.h"

DEFINE_int32(serve_port, 8080,
             "serve: the HTTP port for /ping and /invocations (SageMaker's 8080; 0: any free "
             "port, written to --port_file)");
DEFINE_string(serve_bind, "127.0.0.1",
              "serve: the address to listen on (0.0.0.0 in a container, to be reachable from "
              "outside it)");
DEFINE_int32(serve_threads, 0,
             "serve: event loops answering requests; each serves any number of connections "
             "(0: 4 per hardware thread, at least 16)");
DEFINE_uint64(max_request_bytes, 6 << 20,
              "serve: longest request body accepted (SageMaker's 6 MB); longer ones get 413");

namespace keel {

std::vector<FlagGroup> ServeFlagGroups() {
  return {{"serve", {"serve_port", "serve_bind", "serve_threads", "max_request_bytes"}}};
}

InferenceServiceOptions ServeOptionsFromFlags() {
  if (FLAGS_model_dir.empty()) throw MakeError("keel serve needs --model_dir");
  if (FLAGS_serve_port < 0 || FLAGS_serve_port > 65535) {
    throw MakeError("--serve_port ", FLAGS_serve_port, " is not in 0..65535");
  }
  unsigned char address[16];
  if (inet_pton(AF_INET, FLAGS_serve_bind.c_str(), address) != 1 &&
      inet_pton(AF_INET6, FLAGS_serve_bind.c_str(), address) != 1) {
    throw MakeError("--serve_bind '", FLAGS_serve_bind,
                    "' is not an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::1, ...)");
  }
  if (FLAGS_serve_threads < 0 || FLAGS_serve_threads > 1024) {
    throw MakeError("--serve_threads ", FLAGS_serve_threads, " is not in 0..1024");
  }
  if (FLAGS_max_request_bytes < 1 || FLAGS_max_request_bytes > (uint64_t{1} << 30)) {
    throw MakeError("--max_request_bytes ", FLAGS_max_request_bytes,
                    " is not in 1..1073741824 (1 GiB)");
  }
  InferenceServiceOptions options;
  options.model_dir = FLAGS_model_dir;
  options.device = FLAGS_device;
  options.http.host = FLAGS_serve_bind;
  options.http.port = FLAGS_serve_port;
  options.http.threads =
      FLAGS_serve_threads > 0
          ? FLAGS_serve_threads
          : std::max(16, 4 * static_cast<int>(std::thread::hardware_concurrency()));
  options.http.max_body_bytes = FLAGS_max_request_bytes;
  options.http.read_timeout_s = 10;
  options.http.write_timeout_s = 10;
  options.http.keep_alive_s = 2;
  options.http.keep_alive_max_requests = 1000;
  return options;
}

}  // namespace keel
