// Small statistics the engine's reports and measurements share.
#pragma once

#include <algorithm>
#include <vector>

namespace gridlm::engine {

// The upper median (the middle element, or the upper of the two middle ones); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace gridlm::engine
