// HttpServer (io/http_server.h) on loopback: routes, the answers it gives
// itself (404, 405, 413, 500), binding, and stopping with a request in flight.
#include "io/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/time.h"
#include "scrape.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;
using testing::HttpGet;
using testing::HttpPost;

// Sends `bytes` to 127.0.0.1:`port` on a fresh connection and returns what
// comes back before the server closes it (at most 5 s).
std::string RawExchange(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      send(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size())) {
    char buffer[4096];
    for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  }
  close(fd);
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
