#include "scrape.h"

#include <httplib.h>

#include <cstdlib>
#include <sstream>

#include "base/error.h"

namespace keel::testing {
namespace {

httplib::Client MakeClient(const std::string& host, int port, double timeout_s) {
  httplib::Client client(host, port);
  const auto seconds = static_cast<time_t>(timeout_s);
  const auto micros = static_cast<time_t>((timeout_s - seconds) * 1e6);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  return client;
}

HttpAnswer AnswerOf(const httplib::Result& result) {
  HttpAnswer answer;
  if (!result) return answer;
  answer.status = result->status;
  answer.body = result->body;
  answer.content_type = result->get_header_value("Content-Type");
  for (const auto& [name, value] : result->headers) answer.headers.emplace(name, value);
  return answer;
}

}  // namespace

std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) throw MakeError("exposition:", number, ": no value: ", line);
    const std::string value = line.substr(space + 1);
    char* end = nullptr;
    const double parsed = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') {
      throw MakeError("exposition:", number, ": '", value, "' is not a number");
    }
    samples[line.substr(0, space)] = parsed;
  }
  return samples;
}

double SumOfValues(const std::map<std::string, double>& samples) {
  double sum = 0;
  for (const auto& [name, value] : samples) sum += value;
  return sum;
}

HttpAnswer HttpGet(int port, const std::string& path, const std::string& host, double timeout_s) {
  httplib::Client client = MakeClient(host, port, timeout_s);
  return AnswerOf(client.Get(path.c_str()));
}

HttpAnswer HttpPost(int port, const std::string& path, const std::string& body, double timeout_s) {
  httplib::Client client = MakeClient("127.0.0.1", port, timeout_s);
  return AnswerOf(client.Post(path.c_str(), body, "application/octet-stream"));
}

HttpAnswer HttpPost(int port, const std::string& path, const std::string& body,
                    const std::string& content_type,
                    const std::multimap<std::string, std::string>& headers, double timeout_s) {
  httplib::Client client = MakeClient("127.0.0.1", port, timeout_s);
  httplib::Headers request_headers;
  for (const auto& [name, value] : headers) request_headers.emplace(name, value);
  return AnswerOf(client.Post(path, request_headers, body, content_type));
}

}  // namespace keel::testing
