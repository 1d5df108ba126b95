// SVG drawing of a pipeline timeline.
#include "app/svg_timeline.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gridlm::app {

std::string timeline_svg(const parallel::Schedule& s, const parallel::Timeline& tl) {
  const double row = 28.0, left = 70.0, top = 34.0;
  const double width = 1100.0, scale = tl.makespan > 0 ? (width - left - 10.0) / tl.makespan : 1.0;
  const double height = top + row * s.stages + 10.0;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"4\" y=\"16\" font-size=\"13\">{} schedule: {} stages, {} micro-batches, {} "
      "chunk(s); bubble {:.1f}%</text>\n",
      width, height, parallel::schedule_name(s.kind), s.stages, s.micro_batches, s.chunks,
      100.0 * tl.bubble);
  for (int st = 0; st < s.stages; ++st) {
    const double y = top + row * st;
    svg += fmt::format("<text x=\"4\" y=\"{:.1f}\">stage {}</text>\n", y + row * 0.6, st);
    for (const auto& slot : tl.stages[st]) {
      const char* fill = slot.op.kind == parallel::OpKind::F   ? "#6fa8dc"
                         : slot.op.kind == parallel::OpKind::B ? "#93c47d"
                                                               : "#f6b26b";
      const double x = left + slot.start * scale,
                   w = std::max(1.0, (slot.end - slot.start) * scale);
      svg +=
          fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                      "fill=\"{}\" stroke=\"#333\" stroke-width=\"0.5\"><title>{}</title></rect>\n",
                      x, y, w, row - 6.0, fill, parallel::op_text(slot.op, s.chunks));
      if (w >= 14.0) {
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                           x + w / 2, y + row * 0.55,
                           s.chunks > 1 ? fmt::format("{}.{}", slot.op.micro, slot.op.chunk)
                                        : std::to_string(slot.op.micro));
      }
    }
  }
  return svg + "</svg>\n";
}

} // namespace gridlm::app
