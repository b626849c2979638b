// The job report: one self-contained HTML page (inline CSS and SVG, no
// script, nothing loaded from elsewhere) drawn from a JobRecord: the job and
// its hyperparameters, the selected model's final metrics, loss and the
// validation metric per epoch for every model, examples/s and training loss
// over time per worker with membership changes, faults and checkpoints
// marked on the time axis, the staleness histogram, gate waits per epoch,
// checkpoint times, and the per-table health figures when the job recorded
// them. A section without data says so in a short note instead of a plot.
#ifndef KEEL_REPORT_REPORT_PAGE_H_
#define KEEL_REPORT_REPORT_PAGE_H_

#include <string>

#include "report/job_record.h"

namespace keel {

// The HTML page; `generated` is the time it was made, as shown in its header.
std::string ReportHtml(const JobRecord& record, const std::string& generated);

}  // namespace keel

#endif  // KEEL_REPORT_REPORT_PAGE_H_
