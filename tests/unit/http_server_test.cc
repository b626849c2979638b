// HttpServer (io/http_server.h) on loopback: routes, the answers it gives
// itself (404, 405, 413, 431, 500), its limits (a body refused before it is
// read, idle connections that hold nothing), binding, and stopping with a
// request in flight.
#include "io/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/time.h"
#include "scrape.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;
using testing::HttpGet;
using testing::HttpPost;

// A connected socket to 127.0.0.1:`port` (-1 if it cannot connect) whose
// receives time out after `timeout_s`.
int Connect(int port, int timeout_s = 5) {
  const int fd = testing::ConnectToLoopback(port);
  timeval timeout{timeout_s, 0};
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// Sends `bytes` to 127.0.0.1:`port` on a fresh connection and returns what
// comes back before the server closes it (at most `timeout_s`), or the first
// answer's head when `until_head` (the server may keep the connection).
std::string RawExchange(int port, const std::string& bytes, int timeout_s = 5,
                        bool until_head = false) {
  const int fd = Connect(port, timeout_s);
  std::string answer;
  if (fd >= 0) {
    // A server may answer and close before it has read all of it: what it
    // answered is read all the same.
    send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    char buffer[4096];
    for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
      answer.append(buffer, n);
      if (until_head && answer.find("\r\n\r\n") != std::string::npos) break;
    }
  }
  if (fd >= 0) close(fd);
  return answer;
}

HttpResponse Text(const std::string& body) {
  HttpResponse response;
  response.body = body;
  return response;
}

TEST(HttpServer, ARouteAnswersWithItsHandlersStatusBodyTypeAndHeaders) {
  HttpServer server({});
  server.Route("GET", "/thing", [](const HttpRequest& request) {
    HttpResponse response;
    response.status = 201;
    response.body = "thing for " + request.query.find("who")->second;
    response.content_type = "application/json";
    response.headers.emplace("X-Keel", "yes");
    return response;
  });
  server.Start();
  const auto answer = HttpGet(server.port(), "/thing?who=me");
  EXPECT_EQ(answer.status, 201);
  EXPECT_EQ(answer.body, "thing for me");
  EXPECT_EQ(answer.content_type, "application/json");
  ASSERT_EQ(answer.headers.count("X-Keel"), 1u);
  EXPECT_EQ(answer.headers.find("X-Keel")->second, "yes");
}

TEST(HttpServer, APostHandlerReceivesTheBody) {
  HttpServer server({});
  server.Route("POST", "/invocations",
               [](const HttpRequest& request) { return Text("got " + request.body); });
  server.Start();
  const auto answer = HttpPost(server.port(), "/invocations", "1,2,3");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.body, "got 1,2,3");
}

TEST(HttpServer, AnUnknownPathIsNotFound) {
  HttpServer server({});
  server.Route("GET", "/metrics", [](const HttpRequest&) { return Text("m"); });
  server.Start();
  const auto answer = HttpGet(server.port(), "/nothing");
  EXPECT_EQ(answer.status, 404);
  EXPECT_EQ(answer.body, "no such path: /nothing\n");
}

TEST(HttpServer, AKnownPathWithAnotherMethodIsNotAllowed) {
  HttpServer server({});
  server.Route("GET", "/metrics", [](const HttpRequest&) { return Text("m"); });
  server.Start();
  const auto answer = HttpPost(server.port(), "/metrics", "x");
  EXPECT_EQ(answer.status, 405);
  EXPECT_EQ(answer.body, "POST is not allowed on /metrics\n");
}

TEST(HttpServer, ABodyOverTheLimitIsRefusedWith413) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  HttpServer server(options);
  std::atomic<int> handled{0};
  server.Route("POST", "/invocations", [&](const HttpRequest&) {
    ++handled;
    return Text("ok");
  });
  server.Start();
  EXPECT_EQ(HttpPost(server.port(), "/invocations", std::string(1000, 'x')).status, 200);
  EXPECT_EQ(HttpPost(server.port(), "/invocations", std::string(5000, 'x')).status, 413);
  EXPECT_EQ(handled.load(), 1);
}

// Only the head of the request is sent: the 413 must not wait for a body
// the server will not take (a server that reads it to discard it answers at
// its read timeout, or never).
TEST(HttpServer, ABodyDeclaredOverTheLimitIsRefused413BeforeItIsSent) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  options.read_timeout_s = 5;
  HttpServer server(options);
  server.Route("POST", "/invocations", [](const HttpRequest&) { return Text("ok"); });
  server.Start();
  const double start = MonotonicSeconds();
  const std::string answer =
      RawExchange(server.port(),
                  "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", 5,
                  /*until_head=*/true);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  EXPECT_LT(MonotonicSeconds() - start, 2.0);
}

TEST(HttpServer, AHeaderLineOverTheLimitIsRefusedAndTheServerGoesOn) {
  HttpServerOptions options;
  options.max_header_bytes = 16 << 10;
  HttpServer server(options);
  std::atomic<int> handled{0};
  server.Route("GET", "/metrics", [&](const HttpRequest&) {
    ++handled;
    return Text("m");
  });
  server.Start();
  const std::string answer = RawExchange(
      server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(1 << 20, 'a') +
                         "\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(answer.rfind("HTTP/1.1 431", 0) == 0 || answer.rfind("HTTP/1.1 400", 0) == 0)
      << answer.substr(0, 200);
  EXPECT_EQ(handled.load(), 0);
  EXPECT_EQ(HttpGet(server.port(), "/metrics").body, "m");
}

// Connections that send nothing (idle, or slow clients) hold no serving
// thread: a new request is answered while far more of them than threads
// are open.
TEST(HttpServer, ManyIdleConnectionsDoNotStopANewRequestBeingAnswered) {
  HttpServerOptions options;
  options.threads = 2;
  options.read_timeout_s = 30;
  options.keep_alive_s = 30;
  HttpServer server(options);
  server.Route("GET", "/metrics", [](const HttpRequest&) { return Text("m"); });
  server.Start();
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
    const int fd = Connect(server.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // Half of them have sent part of a request's head.
  for (size_t i = 0; i < idle.size(); i += 2) {
    ASSERT_GT(send(idle[i], "GET /metr", 9, MSG_NOSIGNAL), 0);
  }
  const double start = MonotonicSeconds();
  const auto answer = HttpGet(server.port(), "/metrics", "127.0.0.1", 3);
  EXPECT_EQ(answer.status, 200);
  EXPECT_LT(MonotonicSeconds() - start, 2.0);
  for (const int fd : idle) close(fd);
}

TEST(HttpServer, AConnectionBeyondTheLimitWaitsUntilAnotherCloses) {
  HttpServerOptions options;
  options.max_connections = 8;
  options.threads = 1;  // the limit is one loop's, not shared out among several
  options.keep_alive_s = 30;
  options.read_timeout_s = 30;
  HttpServer server(options);
  server.Route("GET", "/metrics", [](const HttpRequest&) { return Text("m"); });
  server.Start();
  std::vector<int> open;
  for (int i = 0; i < 8; ++i) {
    open.push_back(Connect(server.port()));
    ASSERT_GE(open.back(), 0);
  }
  EXPECT_EQ(HttpGet(server.port(), "/metrics", "127.0.0.1", 1).status, 0);
  for (const int fd : open) close(fd);
  EXPECT_TRUE(testing::WaitFor(
      [&] { return HttpGet(server.port(), "/metrics", "127.0.0.1", 1).status == 200; }, 5));
}

TEST(HttpServer, AHandlerThatThrowsIsAnsweredWith500AndItsMessage) {
  HttpServer server({});
  server.Route("GET", "/boom", [](const HttpRequest&) -> HttpResponse {
    throw std::runtime_error("the model is not loaded");
  });
  server.Start();
  const auto answer = HttpGet(server.port(), "/boom");
  EXPECT_EQ(answer.status, 500);
  EXPECT_EQ(answer.body, "error: the model is not loaded\n");
}

TEST(HttpServer, AMalformedRequestIsAnswered400AndTheServerGoesOn) {
  HttpServer server({});
  server.Route("GET", "/metrics", [](const HttpRequest&) { return Text("m"); });
  server.Start();
  const std::string answer = RawExchange(server.port(), "NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
  EXPECT_EQ(HttpGet(server.port(), "/metrics").body, "m");
}

TEST(HttpServer, PortZeroTakesAFreePortThatPortTells) {
  HttpServer server({});
  EXPECT_EQ(server.port(), 0);
  server.Start();
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(HttpGet(server.port(), "/").status, 404);
}

TEST(HttpServer, APortInUseIsAnErrorNamingTheAddress) {
  HttpServer first({});
  first.Start();
  HttpServerOptions options;
  options.port = first.port();
  HttpServer second(options);
  const std::string error = ErrorOf([&] { second.Start(); });
  EXPECT_EQ(error, "HTTP server: cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                       " (in use, or not an address of this machine)");
}

TEST(HttpServer, AnAddressNotOfThisMachineIsAnErrorNamingIt) {
  HttpServerOptions options;
  options.host = "192.0.2.1";  // TEST-NET-1: never local
  options.port = 9;
  HttpServer server(options);
  EXPECT_TRUE(Contains(ErrorOf([&] { server.Start(); }), "cannot listen on 192.0.2.1:9"));
}

TEST(HttpServer, StopLetsARequestInFlightFinishAndThenRefusesConnections) {
  HttpServer server({});
  std::atomic<bool> entered{false};
  server.Route("GET", "/slow", [&](const HttpRequest&) {
    entered = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return Text("finished");
  });
  server.Start();
  const int port = server.port();
  testing::HttpAnswer answer;
  std::thread client([&] { answer = HttpGet(port, "/slow"); });
  ASSERT_TRUE(testing::WaitFor([&] { return entered.load(); }, 10));
  server.Stop();
  client.join();
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.body, "finished");
  EXPECT_EQ(HttpGet(port, "/slow", "127.0.0.1", 1).status, 0);
}

TEST(HttpServer, StopBeforeStartAndStopTwiceAreHarmless) {
  HttpServer server({});
  server.Stop();
  server.Start();
  server.Stop();
  server.Stop();
}

}  // namespace
}  // namespace keel
