// Checks of command-line numbers, worded for users: CLI11's own range checks print their bounds
// as numbers hundreds of digits long and let nan through; and of output paths, before the long
// work whose result goes there.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

namespace gridlm::app {

// Why `output` + ".partial" (the file a command writes before renaming it into place) cannot be
// made, or "" when it can: made and removed again. An empty path or a directory cannot take the
// rename at the end.
inline std::string cannot_create_partial(const std::string& output) {
  if (output.empty()) return "the output path is empty";
  std::error_code ec;
  if (std::filesystem::is_directory(output, ec)) return "'" + output + "' is a directory";
  const std::string probe = output + ".partial";
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr || std::fclose(f) != 0) return std::strerror(errno);
  std::remove(probe.c_str());
  return "";
}

// A number that must be finite and above (or, with zero_ok, at or above) zero.
inline CLI::Validator number_check(bool zero_ok, const char* fix) {
  return CLI::Validator(
      [zero_ok, fix](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        // strtod reports a number too small for a normal double (1e-320) as a range error
        // too: it is still a number, not a typo.
        const bool in_range = errno == 0 || (errno == ERANGE && std::fabs(v) < 1.0);
        const bool number = !text.empty() && *end == '\0' && in_range && std::isfinite(v);
        if (number && (v > 0 || (zero_ok && v == 0))) return "";
        return "'" + text + "': " + fix;
      },
      zero_ok ? "NUMBER>=0" : "NUMBER>0");
}

// Whole or not, the type of the option decides; these only word the range.
inline CLI::Validator positive_number() { return number_check(false, "give a number above 0"); }
inline CLI::Validator non_negative_number() {
  return number_check(true, "give a number of 0 or more");
}

// A whole number from 0 to 2^64 - 1 (a seed): CLI11 would clamp a larger one to the largest,
// silently giving several seeds one stream.
inline CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        if (digits) std::strtoull(text.c_str(), nullptr, 10);
        if (digits && errno == 0) return "";
        return "'" + text + "': give a whole number from 0 to 18446744073709551615";
      },
      "0..2^64-1");
}

} // namespace gridlm::app
