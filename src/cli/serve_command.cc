// `keel serve`: a trained model behind SageMaker's inference contract
// (serve/inference_service.h), until SIGTERM or SIGINT; SIGHUP reloads the model.
#include <glog/logging.h>
#include <signal.h>

#include <iostream>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/serve_flags.h"
#include "serve/inference_service.h"

namespace keel {

int RunServe() {
  const InferenceServiceOptions options = ServeOptionsFromFlags();
  // The signals are taken by sigwait below, on this thread only: block them
  // before any thread starts, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal : {SIGHUP, SIGTERM, SIGINT}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  InferenceService service(options);
  service.Start();
  LOG(INFO) << "serving " << options.model_dir << " on http://" << service.address()
            << " (/ping, /invocations, /metrics) with " << options.http.threads << " threads";
  const std::string port_file = PortFileFromFlags();
  if (port_file == "-") {
    std::cout << "serve port " << service.port() << std::endl;
  } else if (!port_file.empty()) {
    WriteFileAtomically(port_file, std::to_string(service.port()) + "\n");
  }
  // The model loads while /ping already answers (503 until it is in).
  std::thread loading([&service, &options] {
    try {
      service.Reload();
      LOG(INFO) << "model loaded from " << options.model_dir << "; /ping answers 200";
    } catch (const std::exception& e) {
      LOG(ERROR) << "cannot load the model: " << e.what()
                 << " (/ping answers 503; SIGHUP tries again)";
    }
  });
  int signal = 0;
  for (;;) {
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal != SIGHUP) break;
    if (loading.joinable()) loading.join();
    try {
      service.Reload();
      LOG(INFO) << "SIGHUP: model reloaded from " << options.model_dir << " (load "
                << service.loads() << ")";
    } catch (const std::exception& e) {
      LOG(ERROR) << "SIGHUP: cannot reload the model, the previous one goes on serving: "
                 << e.what();
    }
  }
  LOG(INFO) << (signal == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": no new connections; finishing the requests in flight";
  service.Stop();
  if (loading.joinable()) loading.join();
  LOG(INFO) << "stopped";
  return 0;
}

}  // namespace keel
