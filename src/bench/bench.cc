#include "bench/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "base/time.h"
#include "bench/bench_memory.h"
#include "bench/zmq_bench.h"
#include "io/input_split.h"
#include "io/readers.h"
#include "kv/cluster_secret.h"
#include "kv/node.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/compute_backend_factory.h"

namespace keel {
namespace {

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = static_cast<size_t>(std::ceil(fraction * values.size())) - 1;
  return values[std::min(index, values.size() - 1)];
}

struct Row {
  std::string name;
  size_t requests = 0;
  double gigabytes_per_s = 0;
  double million_keys_per_s = 0;
  double p50_us = 0, p99_us = 0;
  double zmq_gigabytes_per_s = -1;  // no baseline when negative
  double zmq_p50_us = -1;
};

// Sums the workers' throughput per case (over the slowest worker's time) and
// pools their latencies.
std::vector<Row> Aggregate(const std::vector<std::vector<BenchCase>>& per_worker) {
  std::vector<Row> rows;
  if (per_worker.empty()) return rows;
  for (size_t c = 0; c < per_worker[0].size(); ++c) {
    Row row;
    row.name = per_worker[0][c].name;
    double bytes = 0, keys = 0, seconds = 0;
    std::vector<double> latencies;
    for (const auto& cases : per_worker) {
      if (c >= cases.size() || cases[c].name != row.name) {
        throw MakeError("bench kv: workers measured different cases");
      }
      const BenchCase& one = cases[c];
      const double requests = static_cast<double>(one.latencies_us.size());
      bytes += requests * static_cast<double>(one.bytes);
      keys += requests * static_cast<double>(one.keys);
      seconds = std::max(seconds, one.seconds);
      latencies.insert(latencies.end(), one.latencies_us.begin(), one.latencies_us.end());
    }
    row.requests = latencies.size();
    row.gigabytes_per_s = bytes / seconds / 1e9;
    row.million_keys_per_s = keys / seconds / 1e6;
    row.p50_us = Percentile(latencies, 0.5);
    row.p99_us = Percentile(latencies, 0.99);
    rows.push_back(row);
  }
  return rows;
}

std::vector<Row> ZmqRows(const std::vector<BenchCase>& cases) {
  std::vector<Row> rows;
  for (const BenchCase& one : cases) {
    Row row;
    row.name = one.name;
    row.requests = one.latencies_us.size();
    row.gigabytes_per_s =
        static_cast<double>(row.requests) * static_cast<double>(one.bytes) / one.seconds / 1e9;
    row.p50_us = Percentile(one.latencies_us, 0.5);
    row.p99_us = Percentile(one.latencies_us, 0.99);
    rows.push_back(row);
  }
  return rows;
}

void PrintTable(const std::string& title, const std::vector<Row>& rows, bool with_baseline) {
  std::printf("%s\n", title.c_str());
  std::printf("%-24s %9s %9s %10s %10s %10s", "case", "requests", "GB/s", "Mkeys/s", "p50 us",
              "p99 us");
  if (with_baseline) std::printf(" %9s %9s %10s", "zmq GB/s", "GB/s x", "p50 x");
  std::printf("\n");
  for (const Row& row : rows) {
    std::printf("%-24s %9zu %9.3f %10.2f %10.1f %10.1f", row.name.c_str(), row.requests,
                row.gigabytes_per_s, row.million_keys_per_s, row.p50_us, row.p99_us);
    if (with_baseline && row.zmq_gigabytes_per_s > 0) {
      std::printf(" %9.3f %9.2f %10.2f", row.zmq_gigabytes_per_s,
                  row.gigabytes_per_s / row.zmq_gigabytes_per_s, row.p50_us / row.zmq_p50_us);
    }
    std::printf("\n");
  }
}

// `servers` ... `seconds_per_case`: the run's settings, as the flags gave them.
std::string Json(const std::string& bench, int servers, int workers, int inflight,
                 double seconds_per_case, const std::vector<Row>& rows) {
  constexpr auto kCompact = JsonObject::Style::kCompact;
  std::vector<std::string> cases;
  for (const Row& row : rows) {
    JsonObject object(kCompact);
    object.String("name", row.name)
        .Count("requests", row.requests)
        .Number("gb_per_s", row.gigabytes_per_s, kFigureDigits)
        .Number("mkeys_per_s", row.million_keys_per_s, kFigureDigits)
        .Number("p50_us", row.p50_us, kFigureDigits)
        .Number("p99_us", row.p99_us, kFigureDigits);
    if (row.zmq_gigabytes_per_s > 0) {
      object.Number("zmq_gb_per_s", row.zmq_gigabytes_per_s, kFigureDigits)
          .Number("ratio_to_zmq", row.gigabytes_per_s / row.zmq_gigabytes_per_s, kFigureDigits)
          .Number("zmq_p50_us", row.zmq_p50_us, kFigureDigits)
          .Number("latency_ratio_to_zmq", row.p50_us / row.zmq_p50_us, kFigureDigits);
    }
    cases.push_back(object.Close());
  }
  return JsonObject(kCompact)
      .String("bench", bench)
      .Integer("servers", servers)
      .Integer("workers", workers)
      .Integer("inflight", inflight)
      .Number("seconds_per_case", seconds_per_case, kFigureDigits)
      .Add("cases", JsonArray(cases, kCompact))
      .Close();
}

// The secret file the benchmark cluster uses: secret_file, a new one in
// `folder` with curve, or none ("").
std::string BenchSecret(const BenchKVOptions& options, const std::string& folder) {
  if (!options.secret_file.empty()) return options.secret_file;
  if (!options.curve) return "";
  const std::string path = folder + "/cluster.secret";
  WriteClusterSecretFile(path, GenerateClusterSecret());
  return path;
}

// Bytes on the wire of one sparse request: its keys and values.
uint64_t SparseRequestBytes(const KVBenchOptions& options, int width) {
  return options.sparse_keys * (sizeof(Key) + sizeof(float) * static_cast<uint64_t>(width));
}

// Raw ZeroMQ at the sizes of `options`' cases (the sparse ones: their
// requests' bytes), rows named as the cases they compare with.
std::vector<Row> ZmqBaseline(const KVBenchOptions& options) {
  std::vector<Row> rows;
  if (options.small || !options.dense_bytes.empty()) rows = ZmqRows(RunZmqBench(options));
  if (!options.pslite_keys) return rows;
  for (int width : options.sparse_widths) {
    KVBenchOptions sparse = options;
    sparse.small = false;
    const uint64_t wire = SparseRequestBytes(options, width);
    if (wire > (uint64_t{1} << 30)) continue;  // as the dense sizes' bound
    sparse.dense_bytes = {wire};
    for (Row row : ZmqRows(RunZmqBench(sparse))) {
      // As value bytes per second, the unit of the sparse cases' GB/s.
      row.gigabytes_per_s *= static_cast<double>(options.sparse_keys * width * sizeof(float)) /
                             static_cast<double>(wire);
      const std::string direction = row.name.substr(row.name.rfind(' '));
      row.name =
          "sparse " + std::to_string(options.sparse_keys) + "x" + std::to_string(width) + direction;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace

int BenchZmq(const BenchZmqOptions& zmq) {
  KVBenchOptions options = zmq.cases;
  if (options.dense_bytes.empty()) options.dense_bytes = {64 << 10, 1 << 20, 16 << 20};
  const std::vector<Row> rows = ZmqRows(RunZmqBench(options));
  PrintTable("raw ZeroMQ over loopback TCP (inflight " + std::to_string(zmq.inflight) + ")", rows,
             false);
  std::printf("%s\n",
              Json("zmq", zmq.servers, zmq.workers, zmq.inflight, zmq.bench_seconds, rows).c_str());
  return 0;
}

int BenchKV(const BenchKVOptions& kv) {
  if (kv.mode == "memory") return BenchTableMemory(kv.memory);
  const KVBenchOptions& options = kv.cases;
  std::vector<Row> baseline;
  if (kv.zmq_baseline && (options.small || !options.dense_bytes.empty() || options.pslite_keys)) {
    std::fprintf(stderr, "measuring raw ZeroMQ at the same sizes...\n");
    baseline = ZmqBaseline(options);
  }
  char folder[] = "/tmp/keel-bench-XXXXXX";
  if (!mkdtemp(folder)) throw MakeError("cannot create a folder under /tmp");
  BenchCluster cluster;
  cluster.servers = kv.servers;
  cluster.workers = kv.workers;
  cluster.timeout_s = kv.timeout;
  cluster.role_flags = {
      "--job=kv_bench", "--bench_out=" + std::string(folder), "--mode=" + kv.mode,
      "--dense_sizes=" + kv.dense_sizes, "--sparse_widths=" + kv.sparse_widths,
      "--sparse_keys=" + std::to_string(kv.sparse_keys),
      "--key_space=" + std::to_string(kv.key_space),
      "--bench_seconds=" + std::to_string(kv.bench_seconds),
      "--inflight=" + std::to_string(kv.inflight),
      std::string("--small=") + (kv.small ? "true" : "false"), "--workload=" + kv.workload,
      // Tiny steps keep the pushed rows finite however long it runs;
      // ps-lite's workload sums (its values are small).
      "--optimizer=sgd", options.pslite_keys ? "--learning_rate=1" : "--learning_rate=1e-9",
      "--minloglevel=1", "--replication=" + std::to_string(kv.replication),
      std::string("--key_cache=") + (kv.key_cache ? "true" : "false"),
      "--key_ranges=" + std::to_string(kv.key_ranges),
      "--server_apply_threads=" + std::to_string(kv.server_apply_threads)};
  const std::string secret = BenchSecret(kv, folder);
  if (!secret.empty()) cluster.role_flags.push_back("--secret_file=" + secret);
  const int status = kv.run_cluster(cluster);
  if (kv.secret_file.empty() && !secret.empty()) unlink(secret.c_str());
  std::vector<std::vector<BenchCase>> per_worker;
  if (status == 0) {
    for (int rank = 0; rank < kv.workers; ++rank) {
      const std::string path = std::string(folder) + "/worker-" + std::to_string(rank) + ".tsv";
      per_worker.push_back(ParseBenchCases(ReadFile(path), path));
      unlink(path.c_str());
    }
  }
  rmdir(folder);
  if (status != 0) throw MakeError("the benchmark cluster failed (status ", status, ")");

  std::vector<Row> rows = Aggregate(per_worker);
  for (Row& row : rows) {
    for (const Row& zmq : baseline) {
      if (zmq.name == row.name) {
        row.zmq_gigabytes_per_s = zmq.gigabytes_per_s;
        row.zmq_p50_us = zmq.p50_us;
      }
    }
  }
  PrintTable("keel push/pull (" + kv.workload + " workload): " + std::to_string(kv.servers) +
                 " server(s), " + std::to_string(kv.workers) + " worker(s), inflight " +
                 std::to_string(kv.inflight) + " (small: 1), replication " +
                 std::to_string(kv.replication) + ", " + std::to_string(kv.server_apply_threads) +
                 " apply thread(s) a server" + (kv.key_cache ? ", key cache" : ", no key cache") +
                 (kv.key_ranges > 0 ? ", " + std::to_string(kv.key_ranges) + " key ranges"
                                    : std::string()) +
                 (secret.empty() ? "" : ", CURVE"),
             rows, !baseline.empty());
  std::printf("%s\n",
              Json("kv", kv.servers, kv.workers, kv.inflight, kv.bench_seconds, rows).c_str());
  return 0;
}

int BenchParse(const BenchParseOptions& parse) {
  const ReaderOptions& options = parse.reader;
  const char* format = DataFormatName(options.format);
  std::vector<double> seconds;
  uint64_t bytes = 0, rows = 0, nonzeros = 0;
  for (int repeat = 0; repeat < 3; ++repeat) {
    bytes = rows = nonzeros = 0;
    const double begin = MonotonicSeconds();
    for (const InputSplit& split : ResolveChannel(parse.data, 0, 1)) {
      auto reader = OpenReader(split, options);
      Batch batch;
      while (reader->Read(4096, &batch) > 0) {
        rows += batch.rows();
        nonzeros += batch.nnz();
        batch.Clear();
      }
      bytes += reader->bytes_read();
    }
    seconds.push_back(MonotonicSeconds() - begin);
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[1];
  std::printf(
      "parsed %llu rows, %llu non-zeros, %.1f MB of %s in %.3f s (median of 3): "
      "%.1f MB/s, %.2f M rows/s\n",
      static_cast<unsigned long long>(rows), static_cast<unsigned long long>(nonzeros), bytes / 1e6,
      format, median, bytes / 1e6 / median, rows / 1e6 / median);
  const std::string json = JsonObject(JsonObject::Style::kCompact)
                               .String("bench", "parse")
                               .String("format", format)
                               .Fixed("mb_per_s", bytes / 1e6 / median, 2)
                               .Fixed("rows_per_s", rows / median, 0)
                               .Close();
  std::printf("%s\n", json.c_str());
  return 0;
}

int BenchBackend(const BenchBackendOptions& bench) {
  const Hyperparameters& hyperparameters = bench.hyperparameters;
  const auto backend = MakeComputeBackend(bench.device, bench.threads, hyperparameters);
  const ReaderOptions options = bench.reader();
  BatchStream stream(ResolveChannel(bench.data, 0, 1), options,
                     static_cast<size_t>(hyperparameters.mini_batch_size));
  std::vector<PreparedBatch> batches;
  std::vector<std::vector<float>> weights;
  uint64_t examples = 0, nonzeros = 0;
  uint64_t state = 88172645463325252ull;  // xorshift: weights in [-0.05, 0.05)
  PreparedBatch batch;
  while (stream.Next(&batch)) {
    examples += batch.batch.rows();
    nonzeros += batch.batch.nnz();
    std::vector<float> w(batch.keys.size() * backend->weight_width());
    for (float& x : w) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      x = static_cast<float>(state % 100000) / 1e6f - 0.05f;
    }
    weights.push_back(std::move(w));
    batches.push_back(std::move(batch));
  }
  if (batches.empty()) throw MakeError(bench.data, " holds no examples");
  const std::vector<float> bias(backend->bias_width(), 0.0f);
  std::vector<float> weight_gradients, bias_gradient;
  const int passes = std::max(1, bench.epochs);
  std::vector<double> seconds;
  double loss = 0;
  for (int pass = 0; pass <= passes; ++pass) {  // pass 0 warms up
    const double begin = MonotonicSeconds();
    loss = 0;
    for (size_t i = 0; i < batches.size(); ++i) {
      if (i + 1 < batches.size()) backend->Prefetch(batches[i + 1]);
      loss += backend->Gradients(batches[i], weights[i].data(), bias.data(), &weight_gradients,
                                 &bias_gradient);
    }
    if (pass > 0) seconds.push_back(MonotonicSeconds() - begin);
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf(
      "%s, %s: %llu examples (%llu non-zeros) in %zu minibatches of %d: %.4f s a pass (median "
      "of %d), %.0f examples/s, mean loss %.6f\n",
      backend->name().c_str(), bench.job.c_str(), static_cast<unsigned long long>(examples),
      static_cast<unsigned long long>(nonzeros), batches.size(), hyperparameters.mini_batch_size,
      median, passes, examples / median, loss / examples);
  const std::string json = JsonObject(JsonObject::Style::kCompact)
                               .String("bench", "backend")
                               .String("device", bench.device)
                               .Integer("threads", bench.threads)
                               .String("job", bench.job)
                               .Fixed("examples_per_s", examples / median, 0)
                               .Fixed("seconds", median, 6)
                               .Close();
  std::printf("%s\n", json.c_str());
  return 0;
}

}  // namespace keel
