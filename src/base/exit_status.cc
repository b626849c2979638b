#include "base/exit_status.h"

#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>

#include "base/error.h"

namespace keel {
namespace {

// What `exception` says: a keel::Error's message, "out of memory" for
// std::bad_alloc, "unexpected error: WHAT" for another std::exception (a bug:
// Keel's own failures are keel::Error).
std::string ExceptionText(const std::exception_ptr& exception) {
  try {
    std::rethrow_exception(exception);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception& e) {
    return std::string("unexpected error: ") + e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

int ExitCodeOf(const std::string& name, const std::function<int()>& body) {
  try {
    return body();
  } catch (...) {
    std::cerr << name << ": error: " << ExceptionText(std::current_exception()) << std::endl;
    return 1;
  }
}

void ReportUncaughtExceptionsAs(const std::string& name) {
  static std::string* command = new std::string();  // outlives every thread
  *command = name;
  std::set_terminate([] {
    const std::exception_ptr exception = std::current_exception();
    const std::string what =
        exception ? ExceptionText(exception) : "terminated without an exception";
    std::cerr << *command << ": fatal error in a thread: " << what << std::endl;
    std::_Exit(1);
  });
}

}  // namespace keel
