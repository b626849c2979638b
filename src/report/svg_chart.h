// SVG charts for Keel's reports: line charts (numeric x, one line per series,
// optional event markers on the x axis) and bar charts (one bar per labelled
// category; a label too wide for its bar is cut, with an ellipsis), each drawn as one
// self-contained inline <svg> element with axes, ticks, a legend and a title. Every text that comes
// from outside (titles, series names, labels) is escaped. Non-finite points are left out; a chart
// with nothing to draw says so in its frame instead of drawing empty axes.
//
// No state is shared between charts: each object is independent, and safe
// to use from one thread at a time.
#ifndef KEEL_REPORT_SVG_CHART_H_
#define KEEL_REPORT_SVG_CHART_H_

#include <string>
#include <utility>
#include <vector>

namespace keel {

// An axis's range and its tick values, "nice" numbers (1, 2, 5 times a power
// of ten) covering [lo, hi].
struct AxisScale {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  // Where `value` falls on a pixel span [from, to] (to < from for a y axis).
  double Map(double value, double from, double to) const;
};

// A scale with at most about `max_ticks` ticks covering [lo, hi]; an empty
// or single-valued range is widened around its value. Requires finite lo, hi.
AxisScale NiceScale(double lo, double hi, int max_ticks);

// A tick's text: at most 4 significant digits, k/M/G for large values.
std::string TickLabel(double value);

// The colour of series `index` (a fixed palette, repeating).
const char* SeriesColour(int index);

struct ChartSize {
  int width = 600;
  int height = 300;
};

class LineChart {
 public:
  LineChart(std::string title, std::string x_label, std::string y_label);

  // A line through `points` (x, y), drawn in the order given.
  void AddSeries(std::string name, std::vector<std::pair<double, double>> points);
  // A vertical marker at `x`, labelled `label` in the legend as `kind`
  // (markers of one kind share a colour and a legend entry).
  void AddMarker(double x, std::string kind, std::string label);
  // A band from x0 to x1 (e.g. a checkpoint being written), of `kind`.
  void AddSpan(double x0, double x1, std::string kind, std::string label);
  // The x axis starts at 0 (times since the job started).
  void set_x_from_zero(bool from_zero) { x_from_zero_ = from_zero; }
  // Points drawn as dots too (few points per series, e.g. epochs).
  void set_dots(bool dots) { dots_ = dots; }
  // The x axis counts whole things (epochs): its ticks are integers.
  void set_integer_x(bool integer_x) { integer_x_ = integer_x; }

  // The number of drawable (finite) points over all series.
  size_t points() const;
  // The <svg> element.
  std::string Svg(ChartSize size = {}) const;

 private:
  struct Series {
    std::string name;
    std::vector<std::pair<double, double>> points;
  };
  struct Marker {
    double x0, x1;
    std::string kind, label;
  };
  std::string title_, x_label_, y_label_;
  std::vector<Series> series_;
  std::vector<Marker> markers_;
  bool x_from_zero_ = false;
  bool dots_ = false;
  bool integer_x_ = false;
};

class BarChart {
 public:
  BarChart(std::string title, std::string x_label, std::string y_label);

  // A bar of height `value` (>= 0; negative and non-finite values count as 0).
  void AddBar(std::string label, double value);
  size_t bars() const { return bars_.size(); }
  // The <svg> element.
  std::string Svg(ChartSize size = {}) const;

 private:
  std::string title_, x_label_, y_label_;
  std::vector<std::pair<std::string, double>> bars_;
};

}  // namespace keel

#endif  // KEEL_REPORT_SVG_CHART_H_
