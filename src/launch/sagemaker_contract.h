// SageMaker's training contract: what a training container finds under its
// root (/opt/ml on SageMaker), read and checked before anything runs.
//
//   ROOT/input/config/hyperparameters.json   {"name": "value", ...}, every value a string
//   ROOT/input/config/resourceconfig.json    current_host, hosts, network_interface_name
//                                            (or the hosts given as flags: indexed_hosts.h)
//   ROOT/input/config/inputdataconfig.json   {"train": {"ContentType": ...}, ...}
//   ROOT/input/data/CHANNEL/                 a File channel's files
//   ROOT/input/data/CHANNEL_N                a Pipe channel's FIFO for pass N
//   ROOT/model/                              the model artifact (the leader writes it)
//   ROOT/output/failure                      why the job failed
//   ROOT/checkpoints/                        checkpoints (SageMaker's default local path)
//
// Every reader throws Error naming the file and what is wrong in it.
#ifndef KEEL_LAUNCH_SAGEMAKER_CONTRACT_H_
#define KEEL_LAUNCH_SAGEMAKER_CONTRACT_H_

#include <string>
#include <utility>
#include <vector>

namespace keel {

// The root SageMaker mounts the contract under.
constexpr char kSageMakerRoot[] = "/opt/ml";

// One hyperparameter as hyperparameters.json gives it.
struct Hyperparameter {
  std::string name;
  std::string value;
};

// The names and values of `path`'s hyperparameters.json document `text`, in
// document order. Throws Error naming `path` if it is not a JSON object or a
// value is not a string (SageMaker passes every value as one).
std::vector<Hyperparameter> ParseHyperparameters(const std::string& text, const std::string& path);

// resourceconfig.json: the hosts of the job and which one this is.
struct SageMakerHosts {
  std::string current_host;
  // In index order: hosts[0] leads (runs the scheduler), a host's index
  // ranks its roles. resourceconfig.json's are sorted by name.
  std::vector<std::string> hosts;
  std::string network_interface_name;  // "" when not given

  // current_host's place in `hosts`.
  int CurrentIndex() const;
  const std::string& Leader() const { return hosts.front(); }
  bool Leads() const { return current_host == Leader(); }
};

// Parses resourceconfig.json. Throws Error naming `path` unless it holds
// current_host (a string), hosts (a non-empty array of distinct, non-empty
// strings, current_host among them) and, if given, network_interface_name
// (a string).
SageMakerHosts ParseResourceConfig(const std::string& text, const std::string& path);

// One data channel of inputdataconfig.json.
struct SageMakerChannel {
  enum class InputMode { kFile, kPipe };  // FastFile is read as File
  std::string name;                       // train, validation or test
  // libsvm, csv or recordio-protobuf (Keel's --data_format); "" when the
  // channel gives no ContentType (the format is then sniffed).
  std::string data_format;
  bool gzip = false;                  // CompressionType Gzip
  InputMode mode = InputMode::kFile;  // TrainingInputMode
  bool sharded_by_key = false;        // S3DistributionType ShardedByS3Key
};

// Keel's --data_format for a channel's ContentType: text/csv (a parameter
// `label_size=1` allowed, nothing else), application/x-recordio-protobuf,
// text/libsvm or text/x-libsvm. Throws Error naming `where` and the type.
std::string DataFormatOfContentType(const std::string& content_type, const std::string& where);

// Parses inputdataconfig.json: an object whose members are channels named
// train, validation or test, each an object whose ContentType,
// CompressionType (None, Gzip), TrainingInputMode (File, FastFile, Pipe) and
// S3DistributionType (FullyReplicated, ShardedByS3Key), when given, are
// strings of those values; other members are ignored. Requires a train
// channel. Throws Error naming `path`, the channel and the value.
std::vector<SageMakerChannel> ParseInputDataConfig(const std::string& text,
                                                   const std::string& path);

// The whole contract under a root.
struct SageMakerContract {
  std::string root;
  std::vector<Hyperparameter> hyperparameters;
  SageMakerHosts hosts;
  std::vector<SageMakerChannel> channels;

  // The channel called `name`, or nullptr.
  const SageMakerChannel* Channel(const std::string& name) const;
  std::string ConfigFile(const std::string& name) const;     // ROOT/input/config/NAME
  std::string ChannelFolder(const std::string& name) const;  // ROOT/input/data/NAME
  // ROOT/input/data/NAME_PASS: a Pipe channel's FIFO for pass PASS.
  std::string ChannelPipe(const std::string& name, int pass) const;
  // ROOT/input/data/NAME_{pass}: every pass's FIFO, as the path of a pipe
  // channel given once per pass (ResolveChannel).
  std::string ChannelPipes(const std::string& name) const;
  std::string ModelFolder() const;       // ROOT/model
  std::string FailureFile() const;       // ROOT/output/failure
  std::string CheckpointFolder() const;  // ROOT/checkpoints
};

// Reads the three config files under `root`; with `given_hosts` (the hosts
// as flags give them, indexed_hosts.h) the hosts are those, and a
// resourceconfig.json there too is refused (one source of the hosts, never
// two that may disagree). Throws Error naming the file that is missing,
// unreadable or wrong.
SageMakerContract ReadSageMakerContract(const std::string& root,
                                        const SageMakerHosts* given_hosts = nullptr);

// Writes `reason` to the contract's failure file (its folder made if
// missing), cut to SageMaker's limit on what it shows (1 KiB, whole UTF-8
// characters). Best effort: a failure file that cannot be written is logged,
// not thrown.
void WriteSageMakerFailure(const std::string& root, const std::string& reason);

}  // namespace keel

#endif  // KEEL_LAUNCH_SAGEMAKER_CONTRACT_H_
