// HttpServer: one small HTTP/1.1 server (over GNU libmicrohttpd) for
// whatever a Keel process serves over HTTP: /metrics, /healthz and /readyz on
// every role, the scheduler's status page, and `keel serve`'s predictions.
//
// Routes are exact (method, path) pairs registered before Start; a request
// for an unknown path is answered 404, one for a known path with another
// method 405. A handler that throws is answered 500 with its message.
//
// Event-driven: `threads` event loops share the connections, so a connection
// holds a thread only while its request is being answered (an idle or slow
// client holds none). What a client can make it hold is bounded: a request's
// head (431 beyond max_header_bytes), its body (413 beyond max_body_bytes,
// answered from the Content-Length before any of the body is read; a body
// without a Content-Length, chunked or compressed is refused 411 or 415),
// the connections open at once (max_connections; more wait in the listening
// socket's backlog until one closes),
// and the time a connection may send or take nothing (the timeouts).
//
// Thread-safe: handlers run concurrently on the event loops' threads.
#ifndef KEEL_IO_HTTP_SERVER_H_
#define KEEL_IO_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

struct MHD_Daemon;
struct MHD_Connection;

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

// A plain-text answer of `status`: `text` and a newline.
HttpResponse TextResponse(int status, const std::string& text);

struct HttpServerOptions {
  // The interface to listen on (an IPv4 or IPv6 address) and the port (0: any free port).
  std::string host = "127.0.0.1";
  int port = 0;
  // Event loops (threads) that serve the connections and run the handlers.
  int threads = 4;
  // Bodies longer than this are refused with 413.
  size_t max_body_bytes = size_t{1} << 20;
  // A request line and headers longer than about this are refused with 431
  // (414 for the request line alone).
  size_t max_header_bytes = size_t{32} << 10;
  // Connections open at once (fewer if the process has fewer descriptors);
  // more wait, unaccepted, until one closes.
  int max_connections = 4096;
  // A connection in the middle of a request (its body, its answer) that sends
  // or takes nothing for read_timeout_s is closed; one between requests (a
  // new connection too, until its request's head is in) after keep_alive_s
  // (whole seconds, rounded up). write_timeout_s bounds how long Stop waits
  // for the requests in flight, with read_timeout_s.
  double read_timeout_s = 5;
  double write_timeout_s = 5;
  double keep_alive_s = 2;
  // Requests one kept-alive connection may carry before it is closed.
  int keep_alive_max_requests = 5;
  // Called (on a serving thread) with the status of each request refused
  // before its body is read (413, 411, 415), which no handler sees; may be
  // empty. What the HTTP library refuses itself while reading a request's
  // head (400 malformed, 431 too long) is not reported.
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
  // promptly; a body still arriving has the timeouts), closes every
  // connection and joins the threads. Idempotent; does nothing before Start.
  void Stop();
  // Stop, gracefully: it stops listening at once, every answer says
  // "Connection: close" (kept-alive clients reconnect elsewhere), and the
  // requests in flight (their heads in), and connections already accepted,
  // are served until none has been for 0.2 s, or for at most `max_seconds`;
  // then Stop.
  void Drain(double max_seconds);

  // The port bound (the free one chosen for port 0); 0 before Start.
  int port() const { return port_; }
  // "host:port" as bound ("[host]:port" for IPv6).
  std::string address() const;

 private:
  struct Callbacks;  // libmicrohttpd's, in http_server.cc

  // Answers one request from the routes (404, 405 or the handler's answer).
  HttpResponse Dispatch(const HttpRequest& request) const;
  // Opens, binds and listens on listen_fd_; sets port_.
  void Bind();
  // Closes the listening socket (new connections are refused); the
  // connections already accepted go on.
  void StopListening();
  // libmicrohttpd's access handler: true to go on with the connection.
  bool OnAccess(MHD_Connection* connection, const char* url, const char* method,
                const char* upload_data, size_t* upload_data_size, void** request_context);
  // Queues `response` on `connection` (closing it after when `close`).
  bool Answer(MHD_Connection* connection, const HttpResponse& response, bool close);
  // Answers `status` before the request's body is read, and closes.
  bool Refuse(MHD_Connection* connection, int status, const std::string& text);

  HttpServerOptions options_;
  // method -> path -> handler
  std::map<std::string, std::map<std::string, Handler>> routes_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};  // requests being answered
};

}  // namespace keel

#endif  // KEEL_IO_HTTP_SERVER_H_
