// Pages in a real browser for the tests: headless Chromium (Debian's
// chromium-headless-shell, installed by scripts/setup.sh), run bounded, with
// what it logged and what a screenshot of a page shows.
#ifndef KEEL_TESTS_BROWSER_H_
#define KEEL_TESTS_BROWSER_H_

#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace keel::testing {

// The browser itself, or "" if it is not installed. /usr/bin/chromium-headless-shell
// is a shell script that starts it as a child (no exec), so its PID would not
// be the browser's, and a timeout would leave the browser running.
std::string Browser();

// Runs the browser on `url` with `extra` flags (--screenshot=..., --dump-dom,
// --virtual-time-budget=...), in the profile folder `profile`, bounded by 90 s;
// its output is its log (stderr, console messages included) and whatever it
// prints.
Exit RunBrowser(const std::string& profile, const std::vector<std::string>& extra,
                const std::string& url);

// The page's console messages (any at all) and uncaught errors, from the
// browser's log.
std::vector<std::string> ConsoleMessages(const std::string& log);

// png_summary.py's figures of a PNG file: width, height, colours, non_white_share.
std::map<std::string, double> PngSummary(const std::string& png);

}  // namespace keel::testing

#endif  // KEEL_TESTS_BROWSER_H_
