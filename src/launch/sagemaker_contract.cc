#include "launch/sagemaker_contract.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "base/error.h"
#include "base/files.h"
#include "base/json_reader.h"

namespace keel {
namespace {

// SageMaker shows at most this many bytes of output/failure.
constexpr size_t kFailureBytes = 1024;

// `text` without spaces and tabs at either end.
std::string Trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

// The string member `name` of `object`, or "" when absent. Throws Error
// naming `where` when it is there but not a string.
std::string OptionalString(const JsonValue& object, const std::string& name,
                           const std::string& where) {
  const JsonValue* member = object.Find(name);
  if (!member) return "";
  if (member->type() != JsonValue::Type::kString) {
    throw MakeError(where, ": ", name, " is ", JsonValue::TypeName(member->type()),
                    ", not a string");
  }
  return member->AsString();
}

// Requires `value` to be one of `allowed` (or "" for absent, which is
// allowed[0]); returns it. Throws Error naming `where`, the member and the value.
std::string OneOf(const std::string& value, const std::vector<std::string>& allowed,
                  const std::string& where, const std::string& member) {
  if (value.empty()) return allowed.front();
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string listing;
  for (const std::string& one : allowed) listing += (listing.empty() ? "" : ", ") + one;
  throw MakeError(where, ": ", member, " '", value, "' is not one Keel reads (", listing, ")");
}

void RequireObject(const JsonValue& value, const std::string& where) {
  if (value.type() != JsonValue::Type::kObject) {
    throw MakeError(where, " is ", JsonValue::TypeName(value.type()), ", not a JSON object");
  }
}

// The file's text. Throws Error naming it when it is missing or unreadable.
std::string ReadConfigFile(const std::string& path) {
  try {
    return ReadFile(path);
  } catch (const Error& e) {
    throw MakeError("SageMaker's contract: ", e.what());
  }
}

}  // namespace

std::vector<Hyperparameter> ParseHyperparameters(const std::string& text, const std::string& path) {
  const JsonValue document = ParseJson(text, path);
  RequireObject(document, path);
  std::vector<Hyperparameter> result;
  for (const auto& [name, value] : document.AsObject()) {
    if (value.type() != JsonValue::Type::kString) {
      throw MakeError(path, ": hyperparameter '", name, "' is ", JsonValue::TypeName(value.type()),
                      ": SageMaker passes every value as a string");
    }
    result.push_back({name, value.AsString()});
  }
  return result;
}

int SageMakerHosts::CurrentIndex() const {
  return static_cast<int>(std::find(hosts.begin(), hosts.end(), current_host) - hosts.begin());
}

SageMakerHosts ParseResourceConfig(const std::string& text, const std::string& path) {
  const JsonValue document = ParseJson(text, path);
  RequireObject(document, path);
  SageMakerHosts result;
  result.current_host = OptionalString(document, "current_host", path);
  if (result.current_host.empty()) throw MakeError(path, ": no current_host");
  const JsonValue* hosts = document.Find("hosts");
  if (!hosts || hosts->type() != JsonValue::Type::kArray || hosts->AsArray().empty()) {
    throw MakeError(path, ": hosts must be a non-empty array of host names");
  }
  for (const JsonValue& host : hosts->AsArray()) {
    if (host.type() != JsonValue::Type::kString || host.AsString().empty()) {
      throw MakeError(path, ": hosts holds ", JsonValue::TypeName(host.type()), " at byte ",
                      host.offset(), ", not a host name");
    }
    result.hosts.push_back(host.AsString());
  }
  std::sort(result.hosts.begin(), result.hosts.end());
  const auto twice = std::adjacent_find(result.hosts.begin(), result.hosts.end());
  if (twice != result.hosts.end()) throw MakeError(path, ": hosts names ", *twice, " twice");
  if (result.CurrentIndex() == static_cast<int>(result.hosts.size())) {
    throw MakeError(path, ": current_host ", result.current_host, " is not among the hosts");
  }
  result.network_interface_name = OptionalString(document, "network_interface_name", path);
  return result;
}

std::string DataFormatOfContentType(const std::string& content_type, const std::string& where) {
  std::string type = content_type;
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const size_t semicolon = type.find(';');
  const std::string media = Trimmed(type.substr(0, semicolon));
  const std::string parameter =
      semicolon == std::string::npos ? "" : Trimmed(type.substr(semicolon + 1));
  std::string format;
  if (media == "text/csv") format = "csv";
  if (media == "application/x-recordio-protobuf") format = "recordio-protobuf";
  if (media == "text/libsvm" || media == "text/x-libsvm") format = "libsvm";
  if (format.empty()) {
    throw MakeError(where, ": ContentType '", content_type,
                    "' is not one Keel reads (text/csv, application/x-recordio-protobuf, "
                    "text/libsvm)");
  }
  std::string compact = parameter;
  compact.erase(std::remove(compact.begin(), compact.end(), ' '), compact.end());
  if (!parameter.empty() && !(format == "csv" && compact == "label_size=1")) {
    throw MakeError(where, ": ContentType '", content_type, "': Keel reads ",
                    format == "csv" ? "text/csv with label_size=1 (the label first)" : media,
                    " without parameters");
  }
  return format;
}

std::vector<SageMakerChannel> ParseInputDataConfig(const std::string& text,
                                                   const std::string& path) {
  const JsonValue document = ParseJson(text, path);
  RequireObject(document, path);
  std::vector<SageMakerChannel> channels;
  for (const auto& [name, value] : document.AsObject()) {
    const std::string where = path + ": channel " + name;
    if (name != "train" && name != "validation" && name != "test") {
      throw MakeError(where, ": Keel reads the channels train, validation and test");
    }
    RequireObject(value, where);
    SageMakerChannel channel;
    channel.name = name;
    const std::string content_type = OptionalString(value, "ContentType", where);
    if (!content_type.empty()) channel.data_format = DataFormatOfContentType(content_type, where);
    channel.gzip = OneOf(OptionalString(value, "CompressionType", where), {"None", "Gzip"}, where,
                         "CompressionType") == "Gzip";
    channel.mode = OneOf(OptionalString(value, "TrainingInputMode", where),
                         {"File", "FastFile", "Pipe"}, where, "TrainingInputMode") == "Pipe"
                       ? SageMakerChannel::InputMode::kPipe
                       : SageMakerChannel::InputMode::kFile;
    channel.sharded_by_key = OneOf(OptionalString(value, "S3DistributionType", where),
                                   {"FullyReplicated", "ShardedByS3Key"}, where,
                                   "S3DistributionType") == "ShardedByS3Key";
    channels.push_back(channel);
  }
  const bool has_train = std::any_of(channels.begin(), channels.end(),
                                     [](const SageMakerChannel& c) { return c.name == "train"; });
  if (!has_train) throw MakeError(path, ": no train channel");
  return channels;
}

const SageMakerChannel* SageMakerContract::Channel(const std::string& name) const {
  for (const SageMakerChannel& channel : channels) {
    if (channel.name == name) return &channel;
  }
  return nullptr;
}

std::string SageMakerContract::ConfigFile(const std::string& name) const {
  return root + "/input/config/" + name;
}
std::string SageMakerContract::ChannelFolder(const std::string& name) const {
  return root + "/input/data/" + name;
}
std::string SageMakerContract::ChannelPipe(const std::string& name, int pass) const {
  return ChannelFolder(name) + "_" + std::to_string(pass);
}
std::string SageMakerContract::ChannelPipes(const std::string& name) const {
  return ChannelFolder(name) + "_{pass}";
}
std::string SageMakerContract::ModelFolder() const { return root + "/model"; }
std::string SageMakerContract::FailureFile() const { return root + "/output/failure"; }
std::string SageMakerContract::CheckpointFolder() const { return root + "/checkpoints"; }

SageMakerContract ReadSageMakerContract(const std::string& root,
                                        const SageMakerHosts* given_hosts) {
  SageMakerContract contract;
  contract.root = root;
  const std::string hyperparameters = contract.ConfigFile("hyperparameters.json");
  contract.hyperparameters = ParseHyperparameters(ReadConfigFile(hyperparameters), hyperparameters);
  const std::string resources = contract.ConfigFile("resourceconfig.json");
  const bool has_resources = access(resources.c_str(), F_OK) == 0;
  if (given_hosts && has_resources) {
    throw MakeError("SageMaker's contract: both ", resources,
                    " and --hosts give the hosts: give one (remove the file, or the flag and its "
                    "--current_host)");
  }
  if (given_hosts) {
    contract.hosts = *given_hosts;
  } else if (!has_resources) {
    throw MakeError("SageMaker's contract: no ", resources,
                    " (SageMaker writes it; elsewhere give the hosts with --hosts and "
                    "--current_host or JOB_COMPLETION_INDEX)");
  } else {
    contract.hosts = ParseResourceConfig(ReadConfigFile(resources), resources);
  }
  const std::string data = contract.ConfigFile("inputdataconfig.json");
  contract.channels = ParseInputDataConfig(ReadConfigFile(data), data);
  return contract;
}

void WriteSageMakerFailure(const std::string& root, const std::string& reason) {
  std::string text = reason;
  if (text.size() > kFailureBytes) {
    size_t cut = kFailureBytes;
    // Back to the start of a UTF-8 character (not a continuation byte).
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text.resize(cut);
  }
  const std::string path = root + "/output/failure";
  try {
    MakeDirectories(root + "/output");
    WriteFileAtomically(path, text + "\n");
  } catch (const Error& e) {
    LOG(ERROR) << "cannot write the failure file " << path << ": " << e.what();
  }
}

}  // namespace keel
