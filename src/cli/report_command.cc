// `keel report MODEL_DIR [--out FILE]`: a job's HTML report, drawn from what
// it recorded in its model folder (report/job_record.h, report/report_page.h).
#include <fstream>
#include <iostream>
#include <memory>

#include "base/error.h"
#include "base/time.h"
#include "cli/commands.h"
#include "io/storage.h"
#include "report/job_record.h"
#include "report/report_page.h"

namespace keel {

std::string WriteReport(const std::string& model_dir, const std::string& out) {
  const std::string html = ReportHtml(ReadJobRecord(model_dir), UtcTimestamp());
  if (out.empty() && model_dir.rfind("s3://", 0) != 0) {
    const std::unique_ptr<Storage> storage = OpenStorage(model_dir);
    storage->Put("report.html", html);
    return IsStorageUri(model_dir) ? storage->UriOf("report.html") : model_dir + "/report.html";
  }
  const std::string path = out.empty() ? "report.html" : out;
  std::ofstream file(path, std::ios::trunc);
  file << html;
  file.flush();
  if (!file) throw MakeError("--out ", path, ": cannot write the report");
  return path;
}

int RunReport(const std::string& model_dir, const std::string& out) {
  const std::string path = WriteReport(model_dir, out);
  std::cout << "report: " << path << std::endl;
  return 0;
}

}  // namespace keel
