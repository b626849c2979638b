// HttpServer: one small HTTP/1.1 server (over cpp-httplib) for whatever a
// Keel process serves over HTTP: /metrics, /healthz and /readyz on every
// role, and later status pages and predictions.
//
// Routes are exact (method, path) pairs registered before Start; a request
// for an unknown path is answered 404, one for a known path with another
// method 405. Requests are served by a fixed pool of threads; a body larger
// than max_body_bytes is refused (413) and a client slower than the timeouts
// is disconnected. A handler that throws is answered 500 with its message.
//
// Thread-safe: handlers run concurrently on the pool's threads.
#ifndef KEEL_IO_HTTP_SERVER_H_
#define KEEL_IO_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

namespace httplib {
class Server;
}

namespace keel {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string body;
  std::multimap<std::string, std::string> headers;
  std::multimap<std::string, std::string> query;  // the query string's parameters
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  std::multimap<std::string, std::string> headers;  // besides Content-Type and Content-Length
};

struct HttpServerOptions {
  // The interface to listen on (an IPv4 or IPv6 address) and the port (0: any free port).
  std::string host = "127.0.0.1";
  int port = 0;
  // Threads that serve requests.
  int threads = 4;
  // Bodies longer than this are refused with 413.
  size_t max_body_bytes = size_t{1} << 20;
  // A connection that sends or takes nothing for this long is closed; an idle
  // kept-alive one after keep_alive_s.
  double read_timeout_s = 5;
  double write_timeout_s = 5;
  double keep_alive_s = 2;
  // Requests one kept-alive connection may carry before it is closed.
  int keep_alive_max_requests = 5;
  // Called (on a serving thread) with the status of each request the HTTP
  // library refuses itself (413 for a body too long, 400 for a malformed
  // request), which no handler sees; may be empty.
  std::function<void(int status)> on_refused;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  explicit HttpServer(HttpServerOptions options);
  // Stops the server (see Stop).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves `method` requests for exactly `path` with `handler`. Call before
  // Start; a second handler for the same method and path replaces the first.
  void Route(const std::string& method, const std::string& path, Handler handler);

  // Binds and starts serving in the background. Throws Error naming the
  // address if it cannot be bound (in use, not a local interface).
  void Start();
  // Stops listening, lets the requests in flight finish (handlers must return
  // promptly) and joins the threads. Idempotent; does nothing before Start.
  void Stop();
  // Stop, gracefully: first every answer says "Connection: close" (kept-alive
  // clients reconnect elsewhere) and the requests in flight, and connections
  // already accepted, are served until none has been for 0.2 s, or for at
  // most `max_seconds`; then Stop.
  void Drain(double max_seconds);

  // The port bound (the free one chosen for port 0); 0 before Start.
  int port() const { return port_; }
  // "host:port" as bound ("[host]:port" for IPv6).
  std::string address() const;

 private:
  // Answers one request from the routes (404, 405 or the handler's answer).
  HttpResponse Dispatch(const HttpRequest& request) const;
  void Bind();

  HttpServerOptions options_;
  // method -> path -> handler
  std::map<std::string, std::map<std::string, Handler>> routes_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};  // requests being answered
};

}  // namespace keel

#endif  // KEEL_IO_HTTP_SERVER_H_
