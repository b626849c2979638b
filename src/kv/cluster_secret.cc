#include "kv/cluster_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "base/error.h"

namespace keel {
namespace {

constexpr size_t kZ85KeyLength = 40;
constexpr size_t kBinaryKeyLength = 32;

// Throws Error unless `key` is 40 Z85 characters that decode to 32 bytes.
void CheckZ85Key(const std::string& key, const std::string& where, const char* name) {
  uint8_t decoded[kBinaryKeyLength];
  if (key.size() != kZ85KeyLength || !zmq_z85_decode(decoded, key.c_str())) {
    throw MakeError(where, name, " is not ", kZ85KeyLength, " Z85 characters (got ", key.size(),
                    " characters)");
  }
}

// The public key that belongs to the Z85 `secret_key`.
std::string PublicKeyOf(const std::string& secret_key) {
  char public_key[kZ85KeyLength + 1];
  if (zmq_curve_public(public_key, secret_key.c_str()) != 0) {
    throw MakeError("cannot derive a CURVE public key: ", zmq_strerror(zmq_errno()));
  }
  return public_key;
}

// Throws Error naming `path` and its mode if the group or others may read or
// write it.
void CheckPrivateMode(const std::string& path, mode_t mode) {
  if ((mode & 077) == 0) return;
  char octal[8];
  snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode & 07777));
  throw MakeError("secret file '", path, "' has mode ", octal,
                  ": the group or others may read or change it; make it private with "
                  "`chmod 600 ",
                  path, "`");
}

std::string ReadAll(int fd, const std::string& path) {
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw MakeError("cannot read secret file '", path, "': ", strerror(errno));
    if (got == 0) return text;
    text.append(buffer, static_cast<size_t>(got));
    if (text.size() > 64 * 1024) {
      throw MakeError("secret file '", path, "' is over 64 KiB: not a keel secret file");
    }
  }
}

}  // namespace

void RequireCurve() {
  if (!zmq_has("curve")) {
    int major = 0, minor = 0, patch = 0;
    zmq_version(&major, &minor, &patch);
    throw MakeError("this libzmq (", major, ".", minor, ".", patch,
                    ") was built without CURVE security: install a libzmq built with libsodium "
                    "(Debian's libzmq5 is) to use --secret_file");
  }
}

ClusterSecret GenerateClusterSecret() {
  RequireCurve();
  char public_key[kZ85KeyLength + 1];
  char secret_key[kZ85KeyLength + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    throw MakeError("cannot make a CURVE keypair: ", zmq_strerror(zmq_errno()));
  }
  return ClusterSecret{public_key, secret_key};
}

std::string FormatClusterSecret(const ClusterSecret& secret) {
  return "# keel cluster secret (CURVE keypair, Z85): keep it private, mode 0600\n"
         "public_key=" +
         secret.public_key + "\nsecret_key=" + secret.secret_key + "\n";
}

ClusterSecret ParseClusterSecret(const std::string& text, const std::string& where) {
  ClusterSecret secret;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::string place = where + ":" + std::to_string(number) + ": ";
    const size_t equals = line.find('=');
    const std::string name = line.substr(0, equals);
    std::string* value = name == "public_key"   ? &secret.public_key
                         : name == "secret_key" ? &secret.secret_key
                                                : nullptr;
    if (equals == std::string::npos || value == nullptr) {
      throw MakeError(place, "'", name, "' is not public_key=KEY or secret_key=KEY");
    }
    if (!value->empty()) throw MakeError(place, name, " is given twice");
    *value = line.substr(equals + 1);
    CheckZ85Key(*value, place, name.c_str());
  }
  if (secret.public_key.empty()) throw MakeError(where, ": public_key is missing");
  if (secret.secret_key.empty()) throw MakeError(where, ": secret_key is missing");
  if (PublicKeyOf(secret.secret_key) != secret.public_key) {
    throw MakeError(where, ": public_key is not the public half of secret_key");
  }
  return secret;
}

void WriteClusterSecretFile(const std::string& path, const ClusterSecret& secret) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw MakeError("cannot create secret file '", path, "': ", strerror(errno));
  // fchmod: the umask may have taken bits away, never added; 0600 exactly.
  const std::string text = FormatClusterSecret(secret);
  const bool written = fchmod(fd, 0600) == 0 &&
                       write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  if (close(fd) != 0 || !written) {
    unlink(path.c_str());
    throw MakeError("cannot write secret file '", path, "': ", strerror(written ? errno : error));
  }
}

ClusterSecret ReadClusterSecretFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw MakeError("cannot open secret file '", path, "': ", strerror(errno));
  struct stat status {};
  std::string text;
  try {
    if (fstat(fd, &status) != 0) {
      throw MakeError("cannot stat secret file '", path, "': ", strerror(errno));
    }
    if (!S_ISREG(status.st_mode)) throw MakeError("secret file '", path, "' is not a file");
    CheckPrivateMode(path, status.st_mode);
    text = ReadAll(fd, path);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return ParseClusterSecret(text, path);
}

}  // namespace keel
