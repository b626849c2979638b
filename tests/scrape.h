// Reading a metrics endpoint in the tests: plain HTTP GETs on loopback, and
// Prometheus's text exposition parsed back into samples.
#ifndef KEEL_TESTS_SCRAPE_H_
#define KEEL_TESTS_SCRAPE_H_

#include <map>
#include <string>

namespace keel::testing {

// The samples of a text exposition, by series as written ("name" or
// name{label="value",...}); comments and blank lines skipped. Throws
// keel::Error naming the line if a sample's value is not a number.
std::map<std::string, double> ParseExposition(const std::string& text);

// The sum of the values of `samples` (series, or instances, to values).
double SumOfValues(const std::map<std::string, double>& samples);

struct HttpAnswer {
  int status = 0;  // 0: no answer (refused, timed out)
  std::string body;
  std::string content_type;
  std::multimap<std::string, std::string> headers;
};

// GET http://`host`:`port``path`, bounded by `timeout_s`.
HttpAnswer HttpGet(int port, const std::string& path, const std::string& host = "127.0.0.1",
                   double timeout_s = 5);

// POST `body` to http://127.0.0.1:`port``path`, bounded by `timeout_s`.
HttpAnswer HttpPost(int port, const std::string& path, const std::string& body,
                    double timeout_s = 5);

// POST `body` to http://127.0.0.1:`port``path` as `content_type` with
// `headers` besides (Accept, ...), bounded by `timeout_s`. (httplib sends
// "text/plain" for an empty `content_type`: curl can send none.)
HttpAnswer HttpPost(int port, const std::string& path, const std::string& body,
                    const std::string& content_type,
                    const std::multimap<std::string, std::string>& headers = {},
                    double timeout_s = 5);

}  // namespace keel::testing

#endif  // KEEL_TESTS_SCRAPE_H_
