// HttpServer over cpp-httplib: every request goes through one catch-all
// handler to Dispatch, which looks the exact (method, path) up in the routes.
#include "io/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <exception>

#include "base/error.h"
#include "base/time.h"

namespace keel {
namespace {

// How long Start waits for the listening thread to be up.
constexpr double kStartTimeoutS = 10;

HttpRequest FromHttplib(const httplib::Request& in) {
  HttpRequest request;
  request.method = in.method;
  request.path = in.path;
  request.body = in.body;
  for (const auto& [name, value] : in.headers) request.headers.emplace(name, value);
  for (const auto& [name, value] : in.params) request.query.emplace(name, value);
  return request;
}

void ToHttplib(const HttpResponse& response, httplib::Response* out) {
  out->status = response.status;
  for (const auto& [name, value] : response.headers) out->set_header(name, value);
  out->set_content(response.body, response.content_type);
}

HttpResponse TextResponse(int status, const std::string& text) {
  HttpResponse response;
  response.status = status;
  response.body = text + "\n";
  return response;
}

// seconds and microseconds, as httplib's timeouts take them.
std::pair<time_t, time_t> SplitSeconds(double seconds) {
  const double whole = std::floor(seconds);
  return {static_cast<time_t>(whole), static_cast<time_t>((seconds - whole) * 1e6)};
}

}  // namespace

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

void HttpServer::Bind() {
  server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *server_;
  const int threads = std::max(1, options_.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(options_.max_body_bytes);
  const auto read = SplitSeconds(options_.read_timeout_s);
  const auto write = SplitSeconds(options_.write_timeout_s);
  server.set_read_timeout(read.first, read.second);
  server.set_write_timeout(write.first, write.second);
  // SO_REUSEADDR alone (a restarted role binds its port again at once), not
  // httplib's default SO_REUSEPORT, which would let a second process share
  // a port in use instead of failing.
  // TCP_NODELAY (inherited by each accepted connection): httplib writes a
  // response's headers and body apart, and Nagle's algorithm would hold the
  // body until the client's delayed ACK, 40 ms a request on Linux.
  server.set_socket_options([](int socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  });
  server.set_keep_alive_timeout(std::max<time_t>(1, std::lround(options_.keep_alive_s)));
  server.set_keep_alive_max_count(
      static_cast<size_t>(std::max(1, options_.keep_alive_max_requests)));
  // Before a body is read: refuse what the body limit cannot bound. httplib
  // checks max_body_bytes against Content-Length only, so a chunked body, or
  // one compressed (inflated after the check), would be read whole first.
  server.set_pre_routing_handler([this](const httplib::Request& in, httplib::Response& out) {
    const auto refuse = [&](int status, const std::string& text) {
      out.status = status;
      out.set_header("Connection", "close");  // its body is not read
      out.set_content(text + "\n", "text/plain; charset=utf-8");
      if (options_.on_refused) options_.on_refused(status);
      return httplib::Server::HandlerResponse::Handled;
    };
    if (in.has_header("Transfer-Encoding")) {
      return refuse(411, "a request body must come with a Content-Length (not Transfer-Encoding: " +
                             in.get_header_value("Transfer-Encoding") + ")");
    }
    if ((in.method == "POST" || in.method == "PUT" || in.method == "PATCH") &&
        !in.has_header("Content-Length")) {
      // httplib would read a body without a length until the client stops.
      return refuse(411, "a request body must come with a Content-Length");
    }
    if (in.has_header("Content-Encoding") &&
        in.get_header_value("Content-Encoding") != "identity") {
      return refuse(415, "Content-Encoding " + in.get_header_value("Content-Encoding") +
                             " is not accepted: send the body uncompressed");
    }
    if (draining_.load()) out.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  const auto serve = [this](const httplib::Request& in, httplib::Response& out) {
    struct InFlight {
      std::atomic<int>& count;
      explicit InFlight(std::atomic<int>& c) : count(c) { ++count; }
      ~InFlight() { --count; }
    } in_flight(in_flight_);
    ToHttplib(Dispatch(FromHttplib(in)), &out);
  };
  const std::string any = ".*";
  server.Get(any, serve).Post(any, serve).Put(any, serve).Delete(any, serve);
  server.Patch(any, serve).Options(any, serve);
  // What httplib answers itself (413 for a body too long, 400 for a malformed
  // request) gets a line saying so; the handlers' answers (>= 400 pass here
  // too) already have a body.
  server.set_error_handler([this](const httplib::Request&, httplib::Response& out) {
    if (out.body.empty()) {
      const std::string text = out.status == 413
                                   ? "the request body is longer than this server's limit of " +
                                         std::to_string(options_.max_body_bytes) + " bytes"
                                   : "HTTP " + std::to_string(out.status);
      out.set_content(text + "\n", "text/plain; charset=utf-8");
      if (options_.on_refused) options_.on_refused(out.status);
    }
  });
  if (options_.port < 0 || options_.port > 65535) {
    throw MakeError("HTTP server: port ", options_.port, " is not in 0..65535");
  }
  if (options_.port == 0) {
    port_ = server.bind_to_any_port(options_.host);
    if (port_ < 0) port_ = 0;
  } else if (server.bind_to_port(options_.host, options_.port)) {
    port_ = options_.port;
  }
  if (port_ == 0) {
    server_.reset();
    throw MakeError("HTTP server: cannot listen on ", address(),
                    " (in use, or not an address of this machine)");
  }
}

void HttpServer::Start() {
  if (server_) throw MakeError("HTTP server on ", address(), " started twice");
  Bind();
  httplib::Server* server = server_.get();
  listener_ = std::thread([server] { server->listen_after_bind(); });
  // Stop must not come before the listening loop runs (httplib's stop would
  // miss it), so Start returns once it does.
  const double deadline = MonotonicSeconds() + kStartTimeoutS;
  while (!server->is_running() && MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server->is_running()) {
    Stop();
    throw MakeError("HTTP server on ", address(), " did not start within ", kStartTimeoutS, " s");
  }
}

void HttpServer::Drain(double max_seconds) {
  if (!server_) return;
  draining_ = true;
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
  if (!server_) return;
  server_->stop();
  if (listener_.joinable()) listener_.join();
  server_.reset();
}

}  // namespace keel
