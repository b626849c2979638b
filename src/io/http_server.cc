// HttpServer over GNU libmicrohttpd: `threads` event loops (epoll) share one
// listening socket, each serving any number of connections; a request is
// answered by Dispatch on the loop that read it, once its body is in.
#include "io/http_server.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "base/error.h"
#include "base/time.h"

namespace keel {
namespace {

// Descriptors kept free of connections (the process's files, sockets).
constexpr rlim_t kSpareDescriptors = 64;

// What one request holds between the access handler's calls.
struct RequestState {
  HttpRequest request;
};

// A connection's requests so far, for keep_alive_max_requests.
struct ConnectionState {
  int requests = 0;
};

// Whole seconds for libmicrohttpd's timeouts (at least 1; 0 means none).
unsigned int WholeSeconds(double seconds) {
  return static_cast<unsigned int>(std::max(1.0, std::ceil(seconds)));
}

// The value of header `name` (case-insensitive), or nullptr.
const char* HeaderOf(MHD_Connection* connection, const char* name) {
  return MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
}

MHD_Result AddPair(void* pairs, MHD_ValueKind, const char* key, const char* value) {
  static_cast<std::multimap<std::string, std::string>*>(pairs)->emplace(key ? key : "",
                                                                        value ? value : "");
  return MHD_YES;
}

void LogFromLibrary(void*, const char* format, va_list arguments) {
  char line[512];
  std::vsnprintf(line, sizeof(line), format, arguments);
  VLOG(1) << "HTTP server: " << line;
}

}  // namespace

HttpResponse TextResponse(int status, const std::string& text) {
  HttpResponse response;
  response.status = status;
  response.body = text + "\n";
  return response;
}

// libmicrohttpd's callbacks, with the server they belong to.
struct HttpServer::Callbacks {
  static MHD_Result Access(void* server, MHD_Connection* connection, const char* url,
                           const char* method, const char* /*version*/, const char* upload_data,
                           size_t* upload_data_size, void** request_context) {
    return static_cast<HttpServer*>(server)->OnAccess(connection, url, method, upload_data,
                                                      upload_data_size, request_context)
               ? MHD_YES
               : MHD_NO;
  }
  static void Completed(void* server, MHD_Connection* connection, void** request_context,
                        MHD_RequestTerminationCode how) {
    auto* self = static_cast<HttpServer*>(server);
    delete static_cast<RequestState*>(*request_context);
    *request_context = nullptr;
    // Between requests a kept-alive connection may idle for keep_alive_s.
    if (how == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
      MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT,
                                WholeSeconds(self->options_.keep_alive_s));
    }
    --self->in_flight_;
  }
  static void Connection(void*, MHD_Connection*, void** socket_context,
                         MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      *socket_context = new ConnectionState();
    } else {
      delete static_cast<ConnectionState*>(*socket_context);
      *socket_context = nullptr;
    }
  }
};

HttpServer::HttpServer(HttpServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Route(const std::string& method, const std::string& path, Handler handler) {
  routes_[method][path] = std::move(handler);
}

std::string HttpServer::address() const {
  const bool v6 = options_.host.find(':') != std::string::npos;
  return (v6 ? "[" + options_.host + "]" : options_.host) + ":" +
         std::to_string(port_ != 0 ? port_ : options_.port);
}

HttpResponse HttpServer::Dispatch(const HttpRequest& request) const {
  const std::string method = request.method == "HEAD" ? "GET" : request.method;
  const auto by_method = routes_.find(method);
  if (by_method != routes_.end()) {
    const auto route = by_method->second.find(request.path);
    if (route != by_method->second.end()) {
      try {
        return route->second(request);
      } catch (const std::exception& e) {
        return TextResponse(500, std::string("error: ") + e.what());
      }
    }
  }
  for (const auto& [other, paths] : routes_) {
    if (paths.count(request.path)) {
      return TextResponse(405, request.method + " is not allowed on " + request.path);
    }
  }
  return TextResponse(404, "no such path: " + request.path);
}

// Queues `response` on `connection`; "Connection: close" when the server
// drains, the connection has carried its last request, or `close`.
bool HttpServer::Answer(MHD_Connection* connection, const HttpResponse& response, bool close) {
  MHD_Response* out = MHD_create_response_from_buffer(
      response.body.size(), const_cast<char*>(response.body.data()), MHD_RESPMEM_MUST_COPY);
  if (out == nullptr) return false;
  MHD_add_response_header(out, MHD_HTTP_HEADER_CONTENT_TYPE, response.content_type.c_str());
  for (const auto& [name, value] : response.headers) {
    MHD_add_response_header(out, name.c_str(), value.c_str());
  }
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  auto* state = info ? static_cast<ConnectionState*>(info->socket_context) : nullptr;
  if (state != nullptr) ++state->requests;
  if (close || draining_.load() ||
      (state != nullptr && state->requests >= std::max(1, options_.keep_alive_max_requests))) {
    MHD_add_response_header(out, MHD_HTTP_HEADER_CONNECTION, "close");
  }
  const MHD_Result queued =
      MHD_queue_response(connection, static_cast<unsigned int>(response.status), out);
  MHD_destroy_response(out);
  return queued == MHD_YES;
}

// The refusal of a request whose body is not read: its connection closes.
bool HttpServer::Refuse(MHD_Connection* connection, int status, const std::string& text) {
  if (options_.on_refused) options_.on_refused(status);
  return Answer(connection, TextResponse(status, text), /*close=*/true);
}

// Called once a request's head is in (no request context yet), then with
// each piece of its body, then once more (no data) to answer it.
bool HttpServer::OnAccess(MHD_Connection* connection, const char* url, const char* method,
                          const char* upload_data, size_t* upload_data_size,
                          void** request_context) {
  auto* state = static_cast<RequestState*>(*request_context);
  if (state == nullptr) {
    ++in_flight_;  // until Callbacks::Completed
    state = new RequestState();
    *request_context = state;
    // Its body may take up to read_timeout_s between pieces.
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT,
                              WholeSeconds(options_.read_timeout_s));
    HttpRequest& request = state->request;
    request.method = method;
    request.path = url;
    MHD_get_connection_values(connection, MHD_HEADER_KIND, AddPair, &request.headers);
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, AddPair, &request.query);
    // Before a body is read: refuse what the body limit cannot bound, or
    // what it already exceeds.
    if (const char* encoding = HeaderOf(connection, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
      return Refuse(connection, 411,
                    std::string("a request body must come with a Content-Length (not "
                                "Transfer-Encoding: ") +
                        encoding + ")");
    }
    const char* length = HeaderOf(connection, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if ((request.method == "POST" || request.method == "PUT" || request.method == "PATCH") &&
        length == nullptr) {
      return Refuse(connection, 411, "a request body must come with a Content-Length");
    }
    if (const char* encoding = HeaderOf(connection, MHD_HTTP_HEADER_CONTENT_ENCODING)) {
      if (std::strcmp(encoding, "identity") != 0) {
        return Refuse(connection, 415,
                      std::string("Content-Encoding ") + encoding +
                          " is not accepted: send the body uncompressed");
      }
    }
    if (length != nullptr) {
      // libmicrohttpd has checked that it is a number.
      const unsigned long long declared = std::strtoull(length, nullptr, 10);
      if (declared > options_.max_body_bytes) {
        return Refuse(connection, 413,
                      "the request body is longer than this server's limit of " +
                          std::to_string(options_.max_body_bytes) + " bytes");
      }
      // Nothing is reserved for it: a client that declares a long body and
      // sends none must not make every connection hold max_body_bytes.
    }
    return true;
  }
  if (*upload_data_size > 0) {
    // Within the Content-Length checked above; should the library pass more,
    // the connection is closed rather than the limit passed.
    if (state->request.body.size() + *upload_data_size > options_.max_body_bytes) return false;
    state->request.body.append(upload_data, *upload_data_size);
    *upload_data_size = 0;
    return true;
  }
  return Answer(connection, Dispatch(state->request), /*close=*/false);
}

void HttpServer::Bind() {
  if (options_.port < 0 || options_.port > 65535) {
    throw MakeError("HTTP server: port ", options_.port, " is not in 0..65535");
  }
  const auto cannot_listen = [&] {
    return MakeError("HTTP server: cannot listen on ", address(),
                     " (in use, or not an address of this machine)");
  };
  const bool v6 = options_.host.find(':') != std::string::npos;
  sockaddr_storage address{};
  socklen_t length = 0;
  if (v6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(options_.port));
    if (inet_pton(AF_INET6, options_.host.c_str(), &in6->sin6_addr) != 1) throw cannot_listen();
    length = sizeof(sockaddr_in6);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&address);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(static_cast<uint16_t>(options_.port));
    if (inet_pton(AF_INET, options_.host.c_str(), &in4->sin_addr) != 1) throw cannot_listen();
    length = sizeof(sockaddr_in);
  }
  listen_fd_ = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw MakeError("HTTP server: cannot open a socket: ", std::strerror(errno));
  // SO_REUSEADDR alone (a restarted role binds its port again at once), not
  // SO_REUSEPORT, which would let a second process share a port in use.
  // TCP_NODELAY is inherited by each accepted connection.
  int yes = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  setsockopt(listen_fd_, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listen_fd_, SOMAXCONN) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    throw cannot_listen();
  }
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void HttpServer::Start() {
  if (daemon_ != nullptr) throw MakeError("HTTP server on ", address(), " started twice");
  Bind();
  // Never more connections than descriptors to hold them.
  unsigned int connections = static_cast<unsigned int>(std::max(1, options_.max_connections));
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
      files.rlim_cur > kSpareDescriptors) {
    connections = static_cast<unsigned int>(
        std::min<rlim_t>(connections, files.rlim_cur - kSpareDescriptors));
  }
  const unsigned int threads = static_cast<unsigned int>(std::max(1, options_.threads));
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC;
  if (options_.host.find(':') != std::string::npos) flags |= MHD_USE_IPv6;
  // The per-connection memory holds the request's head (and the answer's);
  // a head that does not fit is refused with 431.
  const size_t memory = std::max<size_t>(options_.max_header_bytes, 4096);
  daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Callbacks::Access, this, MHD_OPTION_EXTERNAL_LOGGER,
      &LogFromLibrary, nullptr, MHD_OPTION_LISTEN_SOCKET, listen_fd_, MHD_OPTION_THREAD_POOL_SIZE,
      threads, MHD_OPTION_CONNECTION_LIMIT, connections, MHD_OPTION_CONNECTION_TIMEOUT,
      WholeSeconds(options_.keep_alive_s), MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
      MHD_OPTION_NOTIFY_COMPLETED, &Callbacks::Completed, this, MHD_OPTION_NOTIFY_CONNECTION,
      &Callbacks::Connection, nullptr, MHD_OPTION_END);
  if (daemon_ == nullptr) {
    close(listen_fd_);
    listen_fd_ = -1;
    port_ = 0;
    throw MakeError("HTTP server on ", address(), " did not start");
  }
}

void HttpServer::StopListening() {
  if (daemon_ == nullptr || listen_fd_ < 0) return;
  // The loops stop watching the socket; closing it refuses new connections.
  const MHD_socket listening = MHD_quiesce_daemon(daemon_);
  if (listening != MHD_INVALID_SOCKET) close(listening);
  listen_fd_ = -1;
}

void HttpServer::Drain(double max_seconds) {
  if (daemon_ == nullptr) return;
  draining_ = true;
  StopListening();
  constexpr double kQuietSeconds = 0.2;
  const double deadline = MonotonicSeconds() + max_seconds;
  double quiet_since = MonotonicSeconds();
  while (MonotonicSeconds() < deadline) {
    const double now = MonotonicSeconds();
    if (in_flight_.load() > 0) quiet_since = now;
    if (now - quiet_since >= kQuietSeconds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Stop();
}

void HttpServer::Stop() {
  if (daemon_ == nullptr) return;
  // No new connection; the requests in flight are answered (their bodies
  // read within the timeouts), then every connection is closed.
  StopListening();
  const double deadline =
      MonotonicSeconds() + std::max(options_.read_timeout_s, options_.write_timeout_s) + 1;
  while (in_flight_.load() > 0 && MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

}  // namespace keel
