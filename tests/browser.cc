#include "browser.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/json_reader.h"

namespace keel::testing {

std::string Browser() {
  const std::string browser = "/usr/lib/chromium/chromium-headless-shell";
  return access(browser.c_str(), X_OK) == 0 ? browser : "";
}

Exit RunBrowser(const std::string& profile, const std::vector<std::string>& extra,
                const std::string& url) {
  std::vector<std::string> argv = {Browser(),
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--hide-scrollbars",
                                   "--enable-logging=stderr",
                                   "--v=0",
                                   "--user-data-dir=" + profile};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(url);
  return Run(argv, 90);
}

std::vector<std::string> ConsoleMessages(const std::string& log) {
  std::vector<std::string> messages;
  size_t begin = 0;
  while (begin < log.size()) {
    size_t end = log.find('\n', begin);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(begin, end - begin);
    if (Contains(line, ":CONSOLE") || Contains(line, "Uncaught")) messages.push_back(line);
    begin = end + 1;
  }
  return messages;
}

std::map<std::string, double> PngSummary(const std::string& png) {
  const auto exit = Run({SystemTool("python3"), SourceDir() + "/tests/png_summary.py", png}, 120);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  std::map<std::string, double> summary;
  const JsonValue parsed = ParseJson(exit.output, "png_summary.py");
  for (const auto& [name, value] : parsed.AsObject()) {
    summary[name] = value.AsNumber();
  }
  return summary;
}

}  // namespace keel::testing
