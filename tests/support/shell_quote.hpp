// For tests that run a command line through the shell (std::system, popen): a word quoted so
// that the shell passes it on as one argument whatever it holds, as a path under a directory
// whose name has a space in it; and a command run for what it says on stderr. (Whether a path
// can go into LD_PRELOAD at all is decided when the tests are configured: tests/CMakeLists.txt.)
#pragma once

#include <stdio.h>

#include <cstddef>
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

// Runs `command` through the shell, its stdout discarded: its wait status (as std::system's,
// for WIFEXITED and WEXITSTATUS; -1 if it could not run) and what it wrote to stderr.
struct shell_result {
  int status = -1;
  std::string stderr_text;
};
inline shell_result run_for_stderr(const std::string& command) {
  shell_result result;
  FILE* const pipe = ::popen((command + " 2>&1 >/dev/null").c_str(), "r");
  if (pipe == nullptr) return result;
  char chunk[4096];
  std::size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) result.stderr_text.append(chunk, n);
  result.status = ::pclose(pipe);
  return result;
}

}  // namespace pmrkit::test
