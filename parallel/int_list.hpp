// Comma-separated whole numbers ("3, 4,4"), as command-line options and config values give
// them (stage layouts, prompt token ids). Callers word their own errors and check ranges.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace gridlm {

// The numbers, or nullopt with *bad set to the first item that is not one (spaces around an
// item are allowed; an empty item, trailing included, is not a number).
inline std::optional<std::vector<long>> parse_int_list(const std::string& text, std::string* bad) {
  std::vector<long> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long n = 0;
    try {
      n = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || item.find_first_not_of(" \t", used) != std::string::npos) {
      *bad = item;
      return std::nullopt;
    }
    out.push_back(n);
  }
  // getline drops an empty last item: "3,4," would read as "3,4" (a count or an id lost).
  const std::size_t last = text.find_last_not_of(" \t");
  if (last != std::string::npos && text[last] == ',') {
    *bad = "";
    return std::nullopt;
  }
  return out;
}

} // namespace gridlm
