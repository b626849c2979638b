// ps-lite's side of scripts/bench/peers.sh: the workload of ps-lite's own
// tests (tests/test_kv_app.cc), timed the way `keel bench kv --workload=pslite`
// times Keel. Compiled by peers.sh against a ps-lite build outside the project.
//
// One float a key; KEYS keys evenly spaced over the key space (key i is
// kMaxKey / KEYS * i), the same keys every request; the server is ps-lite's
// KVServerDefaultHandle (a plain sum into a hash map). Each case warms up with
// 3 requests, then keeps INFLIGHT requests outstanding for SECONDS (and at
// least 5 requests), recording every request's latency. Requests use ZPush /
// ZPull, ps-lite's zero-copy calls, on arrays built once.
//
//   DMLC_ROLE=... (scheduler, server, worker) pslite_kv KEYS SECONDS CASE...
//   CASE: push:INFLIGHT or pull:INFLIGHT
//
// The worker prints one line a case:
//   pslite <push|pull> keys=K inflight=N requests=R seconds=S mkeys_per_s=M p50_us=P
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "ps/ps.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void RunCase(ps::KVWorker<float>* kv, const ps::SArray<ps::Key>& keys,
             const ps::SArray<float>& values, bool push, int inflight, double seconds) {
  std::vector<ps::SArray<float>> outputs(static_cast<size_t>(inflight));
  auto issue = [&](size_t n) {
    if (push) return kv->ZPush(keys, values);
    return kv->ZPull(keys, &outputs[n % outputs.size()]);
  };
  for (size_t i = 0; i < 3; ++i) kv->Wait(issue(i));

  struct Pending {
    int timestamp;
    double start;
  };
  std::deque<Pending> window;
  std::vector<double> latencies_us;
  const double begin = Now();
  size_t issued = 0;
  while (true) {
    const bool more = Now() - begin < seconds || issued < 5;
    if (window.size() == static_cast<size_t>(inflight) || (!more && !window.empty())) {
      kv->Wait(window.front().timestamp);
      latencies_us.push_back((Now() - window.front().start) * 1e6);
      window.pop_front();
      continue;
    }
    if (!more) break;
    window.push_back({issue(issued), Now()});
    ++issued;
  }
  const double elapsed = Now() - begin;
  std::sort(latencies_us.begin(), latencies_us.end());
  std::printf(
      "pslite %s keys=%zu inflight=%d requests=%zu seconds=%.6f mkeys_per_s=%.4f "
      "p50_us=%.1f\n",
      push ? "push" : "pull", keys.size(), inflight, latencies_us.size(), elapsed,
      static_cast<double>(keys.size()) * latencies_us.size() / elapsed / 1e6,
      latencies_us[latencies_us.size() / 2]);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s KEYS SECONDS push:INFLIGHT|pull:INFLIGHT...\n", argv[0]);
    return 2;
  }
  const size_t num = std::strtoull(argv[1], nullptr, 10);
  const double seconds = std::strtod(argv[2], nullptr);
  if (num == 0 || !(seconds > 0)) {
    std::fprintf(stderr, "KEYS and SECONDS must be positive\n");
    return 2;
  }
  std::vector<std::pair<bool, int>> cases;  // push?, in flight
  for (int a = 3; a < argc; ++a) {
    const std::string spec = argv[a];
    const size_t colon = spec.find(':');
    const std::string direction = spec.substr(0, colon);
    const int inflight = colon == std::string::npos ? 0 : std::atoi(spec.c_str() + colon + 1);
    if ((direction != "push" && direction != "pull") || inflight < 1) {
      std::fprintf(stderr, "bad case '%s': expected push:N or pull:N\n", spec.c_str());
      return 2;
    }
    cases.emplace_back(direction == "push", inflight);
  }
  ps::Start(0);
  if (ps::IsServer()) {
    auto server = new ps::KVServer<float>(0);
    server->set_request_handle(ps::KVServerDefaultHandle<float>());
    ps::RegisterExitCallback([server]() { delete server; });
  }
  if (ps::IsWorker()) {
    ps::KVWorker<float> kv(0, 0);
    ps::SArray<ps::Key> keys(num);
    ps::SArray<float> values(num);
    srand(7);
    for (size_t i = 0; i < num; ++i) {
      keys[i] = ps::kMaxKey / num * i;
      values[i] = static_cast<float>(rand() % 1000);
    }
    for (const auto& c : cases) RunCase(&kv, keys, values, c.first, c.second, seconds);
  }
  ps::Finalize(0, true);
  return 0;
}
