// Renders a simulated pipeline timeline as an SVG picture: one row per stage, one box per op
// (forward blue, backward green, weight-gradient orange), micro-batch numbers inside.
#pragma once

#include <string>

#include "parallel/schedule.hpp"

namespace gridlm::app {

std::string timeline_svg(const parallel::Schedule& schedule, const parallel::Timeline& timeline);

} // namespace gridlm::app
