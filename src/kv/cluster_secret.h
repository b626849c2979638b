// ClusterSecret: the one CURVE keypair every node of a cluster holds, and the
// secret file it is kept in.
//
// Every node's receiving socket is a CURVE server with the cluster's secret
// key, and every send socket a CURVE client that presents the cluster's own
// keypair; a ZAP handler (peer_authenticator.h) admits only clients whose
// public key is the cluster's. So holding the file is what makes a process a
// member: both halves of the keypair are secret.
//
// The secret file is text, one `name=value` a line, `#` starting a comment:
//
//   # keel cluster secret (CURVE keypair, Z85): keep it private, mode 0600
//   public_key=<40 Z85 characters>
//   secret_key=<40 Z85 characters>
//
// Both keys are required and must belong together; nothing else is allowed.
#ifndef KEEL_KV_CLUSTER_SECRET_H_
#define KEEL_KV_CLUSTER_SECRET_H_

#include <string>

namespace keel {

struct ClusterSecret {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// Throws Error unless this process's libzmq supports CURVE (it needs
// libsodium or its own tweetnacl).
void RequireCurve();

// A fresh keypair from libzmq's random source. Throws Error if CURVE is
// missing.
ClusterSecret GenerateClusterSecret();

// The secret file's text for `secret` (the format above).
std::string FormatClusterSecret(const ClusterSecret& secret);

// Parses a secret file's text. `where` (a path) starts every error, with the
// line: "key.secret:3: 'foo' is not public_key or secret_key". Checks that
// both keys are valid Z85 of 32 bytes and that the public key is the secret
// key's.
ClusterSecret ParseClusterSecret(const std::string& text, const std::string& where);

// Writes `secret` to a new file at `path`, mode 0600 from its creation on
// (never readable by others in between). Throws Error naming `path` if it
// exists already or cannot be written.
void WriteClusterSecretFile(const std::string& path, const ClusterSecret& secret);

// Reads the secret file at `path`. Throws Error naming the file if it cannot
// be read, does not parse, or its mode lets the group or others read or
// write it ("secret file 'k' has mode 0644: ... chmod 600 k").
ClusterSecret ReadClusterSecretFile(const std::string& path);

}  // namespace keel

#endif  // KEEL_KV_CLUSTER_SECRET_H_
