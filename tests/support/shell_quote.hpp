// For tests that run a command line through the shell (std::system, popen): a word quoted so
// that the shell passes it on as one argument whatever it holds, as a path under a directory
// whose name has a space in it. And whether a path can go into LD_PRELOAD at all: the dynamic
// loader splits that list at spaces and colons, with no way to escape either.
#pragma once

#include <string>
#include <string_view>

namespace pmrkit::test {

inline std::string shell_quoted(std::string_view word) {
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'')
      quoted += "'\\''";  // end the quote, an escaped quote, quote again
    else
      quoted += c;
  }
  return quoted + "'";
}

inline bool preloadable(std::string_view path) {
  return path.find_first_of(" :") == std::string_view::npos;
}

}  // namespace pmrkit::test
