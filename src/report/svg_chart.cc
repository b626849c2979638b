#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/xml.h"

namespace keel {
namespace {

// The frame: margins around the plot area, and the legend's column.
constexpr double kLeft = 64, kTop = 34, kBottom = 46, kLegendWidth = 170;
constexpr int kMaxTicks = 6;

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
const char* const kMarkerPalette[] = {"#d62728", "#9467bd", "#2ca02c", "#ff7f0e", "#8c564b"};

std::string Px(double value) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f", value);
  return text;
}

// The plot area inside a chart of `size`.
struct Area {
  double x0, x1, y0, y1;  // y0 is the bottom (larger pixel value)
};

Area PlotArea(ChartSize size) {
  return {kLeft, size.width - kLegendWidth, size.height - kBottom, kTop};
}

std::string Text(double x, double y, const std::string& text, const std::string& attributes) {
  return "<text x=\"" + Px(x) + "\" y=\"" + Px(y) + "\" " + attributes + ">" + XmlEscape(text) +
         "</text>";
}

std::string Line(double x0, double y0, double x1, double y1, const std::string& attributes) {
  return "<line x1=\"" + Px(x0) + "\" y1=\"" + Px(y0) + "\" x2=\"" + Px(x1) + "\" y2=\"" + Px(y1) +
         "\" " + attributes + "/>";
}

// The <svg> start, its title (also as a tooltip) and background.
std::string Open(ChartSize size, const std::string& title) {
  const std::string w = std::to_string(size.width), h = std::to_string(size.height);
  return "<svg class=\"chart\" width=\"" + w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " +
         h + "\" role=\"img\" font-family=\"sans-serif\" font-size=\"11\"><title>" +
         XmlEscape(title) + "</title><rect width=\"" + w + "\" height=\"" + h +
         "\" fill=\"#ffffff\"/>" +
         Text(kLeft, 20, title, "font-size=\"14\" font-weight=\"bold\" fill=\"#222\"");
}

// The axes' labels, the frame and the y axis's ticks with grid lines.
std::string Axes(const Area& area, const AxisScale& y, const std::string& x_label,
                 const std::string& y_label) {
  std::string svg;
  for (double tick : y.ticks) {
    const double py = y.Map(tick, area.y0, area.y1);
    svg += Line(area.x0, py, area.x1, py, "stroke=\"#e5e5e5\"");
    svg += Text(area.x0 - 6, py + 4, TickLabel(tick), "text-anchor=\"end\" fill=\"#444\"");
  }
  svg += Line(area.x0, area.y0, area.x1, area.y0, "stroke=\"#333\"");
  svg += Line(area.x0, area.y0, area.x0, area.y1, "stroke=\"#333\"");
  svg +=
      Text((area.x0 + area.x1) / 2, area.y0 + 36, x_label, "text-anchor=\"middle\" fill=\"#222\"");
  const double my = (area.y0 + area.y1) / 2;
  svg += "<text x=\"14\" y=\"" + Px(my) + "\" transform=\"rotate(-90 14 " + Px(my) +
         ")\" text-anchor=\"middle\" fill=\"#222\">" + XmlEscape(y_label) + "</text>";
  return svg;
}

std::string XTicks(const Area& area, const AxisScale& x) {
  std::string svg;
  for (double tick : x.ticks) {
    const double px = x.Map(tick, area.x0, area.x1);
    svg += Line(px, area.y0, px, area.y0 + 5, "stroke=\"#333\"");
    svg += Text(px, area.y0 + 17, TickLabel(tick), "text-anchor=\"middle\" fill=\"#444\"");
  }
  return svg;
}

// `text` cut to fit `width` pixels at the charts' 11 px font (about 6.5 px a
// character), ending in an ellipsis when cut. Counts bytes: a UTF-8 text is
// cut shorter than it needs to be, never in the middle of a character.
std::string FitText(const std::string& text, double width) {
  const size_t fits = static_cast<size_t>(std::max(1.0, width / 6.5));
  if (text.size() <= fits) return text;
  size_t cut = fits > 1 ? fits - 1 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "…";
}

// Legend entry `row` in the right-hand column: a swatch and a name.
std::string LegendEntry(ChartSize size, int row, const std::string& colour, const std::string& name,
                        bool dashed) {
  const double x = size.width - kLegendWidth + 14, y = kTop + 6 + 17 * row;
  return Line(x, y, x + 18, y,
              "stroke=\"" + colour + "\" stroke-width=\"3\"" +
                  (dashed ? " stroke-dasharray=\"4 3\"" : "")) +
         Text(x + 24, y + 4, FitText(name, kLegendWidth - 40), "fill=\"#222\"");
}

// A frame that says there is nothing to draw.
std::string Empty(ChartSize size, const std::string& title) {
  const Area area = PlotArea(size);
  return Open(size, title) + "<rect x=\"" + Px(area.x0) + "\" y=\"" + Px(area.y1) + "\" width=\"" +
         Px(area.x1 - area.x0) + "\" height=\"" + Px(area.y0 - area.y1) +
         "\" fill=\"none\" stroke=\"#ccc\"/>" +
         Text((area.x0 + area.x1) / 2, (area.y0 + area.y1) / 2, "no data to plot",
              "text-anchor=\"middle\" fill=\"#888\"") +
         "</svg>";
}

// 1, 2 or 5 times a power of ten, at least `raw`.
double NiceStep(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (factor * power >= raw * (1 - 1e-9)) return factor * power;
  }
  return 10 * power;
}

}  // namespace

double AxisScale::Map(double value, double from, double to) const {
  return from + (value - lo) / (hi - lo) * (to - from);
}

AxisScale NiceScale(double lo, double hi, int max_ticks) {
  if (hi < lo) std::swap(lo, hi);
  // A span that overflows a double: clamped (such values have no useful ticks anyway).
  lo = std::max(lo, -1e307);
  hi = std::min(hi, 1e307);
  if (hi - lo <= std::max(std::fabs(lo), std::fabs(hi)) * 1e-12) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  const double step = NiceStep((hi - lo) / std::max(1, max_ticks));
  AxisScale scale;
  scale.lo = std::floor(lo / step + 1e-9) * step;
  scale.hi = std::ceil(hi / step - 1e-9) * step;
  for (int i = 0; i <= max_ticks + 2; ++i) {
    const double tick = scale.lo + i * step;
    if (tick > scale.hi + step * 1e-6) break;
    scale.ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0 : tick);
  }
  return scale;
}

std::string TickLabel(double value) {
  const double magnitude = std::fabs(value);
  const char* suffix = "";
  if (magnitude >= 1e9) {
    value /= 1e9, suffix = "G";
  } else if (magnitude >= 1e6) {
    value /= 1e6, suffix = "M";
  } else if (magnitude >= 1e4) {
    value /= 1e3, suffix = "k";
  }
  char text[32];
  snprintf(text, sizeof(text), "%.4g%s", value, suffix);
  return text;
}

const char* SeriesColour(int index) {
  const int count = static_cast<int>(sizeof(kPalette) / sizeof(kPalette[0]));
  return kPalette[((index % count) + count) % count];
}

LineChart::LineChart(std::string title, std::string x_label, std::string y_label)
    : title_(std::move(title)), x_label_(std::move(x_label)), y_label_(std::move(y_label)) {}

void LineChart::AddSeries(std::string name, std::vector<std::pair<double, double>> points) {
  std::vector<std::pair<double, double>> finite;
  for (const auto& point : points) {
    if (std::isfinite(point.first) && std::isfinite(point.second)) finite.push_back(point);
  }
  series_.push_back({std::move(name), std::move(finite)});
}

void LineChart::AddMarker(double x, std::string kind, std::string label) {
  AddSpan(x, x, std::move(kind), std::move(label));
}

void LineChart::AddSpan(double x0, double x1, std::string kind, std::string label) {
  if (!std::isfinite(x0) || !std::isfinite(x1)) return;
  markers_.push_back({std::min(x0, x1), std::max(x0, x1), std::move(kind), std::move(label)});
}

size_t LineChart::points() const {
  size_t count = 0;
  for (const Series& series : series_) count += series.points.size();
  return count;
}

std::string LineChart::Svg(ChartSize size) const {
  if (points() == 0) return Empty(size, title_);
  double x_lo = x_from_zero_ ? 0 : INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& series : series_) {
    for (const auto& [x, y] : series.points) {
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  }
  for (const Marker& marker : markers_) x_hi = std::max(x_hi, marker.x1);
  AxisScale x = NiceScale(x_lo, x_hi, kMaxTicks);
  if (integer_x_) {
    x.ticks.erase(std::remove_if(x.ticks.begin(), x.ticks.end(),
                                 [](double tick) { return tick != std::floor(tick); }),
                  x.ticks.end());
  }
  const AxisScale y = NiceScale(y_lo, y_hi, kMaxTicks - 1);
  const Area area = PlotArea(size);
  std::string svg = Open(size, title_) + Axes(area, y, x_label_, y_label_) + XTicks(area, x);
  // Markers under the lines; one legend entry and colour per kind.
  std::map<std::string, int> kinds;
  for (const Marker& marker : markers_) kinds.emplace(marker.kind, static_cast<int>(kinds.size()));
  for (const Marker& marker : markers_) {
    const std::string colour = kMarkerPalette[kinds[marker.kind] % 5];
    const double px0 = x.Map(marker.x0, area.x0, area.x1), px1 = x.Map(marker.x1, area.x0, area.x1);
    const std::string tip = "<title>" + XmlEscape(marker.label) + "</title>";
    if (px1 - px0 >= 1) {
      svg += "<rect class=\"span\" x=\"" + Px(px0) + "\" y=\"" + Px(area.y1) + "\" width=\"" +
             Px(px1 - px0) + "\" height=\"" + Px(area.y0 - area.y1) + "\" fill=\"" + colour +
             "\" fill-opacity=\"0.18\">" + tip + "</rect>";
    } else {
      svg += "<line class=\"marker\" x1=\"" + Px(px0) + "\" y1=\"" + Px(area.y0) + "\" x2=\"" +
             Px(px0) + "\" y2=\"" + Px(area.y1) + "\" stroke=\"" + colour +
             "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\">" + tip + "</line>";
    }
  }
  int row = 0;
  for (size_t s = 0; s < series_.size(); ++s) {
    const std::string colour = SeriesColour(static_cast<int>(s));
    std::string points;
    for (const auto& [px, py] : series_[s].points) {
      points += (points.empty() ? "" : " ") + Px(x.Map(px, area.x0, area.x1)) + "," +
                Px(y.Map(py, area.y0, area.y1));
    }
    svg += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.8\" points=\"" +
           points + "\"><title>" + XmlEscape(series_[s].name) + "</title></polyline>";
    for (size_t p = 0; dots_ && p < series_[s].points.size(); ++p) {
      const auto& [px, py] = series_[s].points[p];
      svg += "<circle cx=\"" + Px(x.Map(px, area.x0, area.x1)) + "\" cy=\"" +
             Px(y.Map(py, area.y0, area.y1)) + "\" r=\"2.5\" fill=\"" + colour + "\"/>";
    }
    svg += LegendEntry(size, row++, colour, series_[s].name, false);
  }
  for (const auto& [kind, index] : kinds) {
    svg += LegendEntry(size, row++, kMarkerPalette[index % 5], kind, true);
  }
  return svg + "</svg>";
}

BarChart::BarChart(std::string title, std::string x_label, std::string y_label)
    : title_(std::move(title)), x_label_(std::move(x_label)), y_label_(std::move(y_label)) {}

void BarChart::AddBar(std::string label, double value) {
  bars_.emplace_back(std::move(label), std::isfinite(value) && value > 0 ? value : 0);
}

std::string BarChart::Svg(ChartSize size) const {
  if (bars_.empty()) return Empty(size, title_);
  double top = 0;
  for (const auto& bar : bars_) top = std::max(top, bar.second);
  const AxisScale y = NiceScale(0, top, kMaxTicks - 1);
  const Area area = PlotArea(size);
  std::string svg = Open(size, title_) + Axes(area, y, x_label_, y_label_);
  const double slot = (area.x1 - area.x0) / static_cast<double>(bars_.size());
  for (size_t i = 0; i < bars_.size(); ++i) {
    const double left = area.x0 + slot * static_cast<double>(i);
    const double py = y.Map(bars_[i].second, area.y0, area.y1);
    svg += "<rect class=\"bar\" x=\"" + Px(left + slot * 0.15) + "\" y=\"" + Px(py) +
           "\" width=\"" + Px(slot * 0.7) + "\" height=\"" + Px(area.y0 - py) + "\" fill=\"" +
           SeriesColour(0) + "\"><title>" + XmlEscape(bars_[i].first) + ": " +
           XmlEscape(TickLabel(bars_[i].second)) + "</title></rect>";
    svg += Text(left + slot / 2, area.y0 + 17, FitText(bars_[i].first, slot),
                "text-anchor=\"middle\" fill=\"#444\"");
  }
  return svg + "</svg>";
}

}  // namespace keel
