// pmrkit-listen as a child process for the tests that run it: scratch file names, starting it
// and reading the ports it bound from its banner, and splitting its output into lines. The
// including test target defines PMRKIT_LISTEN_PATH (the built program).
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "net_test_support.hpp"

namespace pmrkit::test::net {

inline std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("pmrkit-datagram-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

// Starts pmrkit-listen and reads the ports it bound from its first stderr line.
struct listen_process {
  explicit listen_process(std::vector<std::string> arguments, const std::string& name)
      : child([&] {
          arguments.insert(arguments.begin(), PMRKIT_LISTEN_PATH);
          return arguments;
        }(), scratch(name)) {
    poll_until([&] { return child.err().find('\n') != std::string::npos; },
               [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
    const std::string banner = child.err();
    std::smatch m;
    if (std::regex_search(banner, m, std::regex("udp [^ ,]*:([0-9]+)"))) udp_port = m[1];
    if (std::regex_search(banner, m, std::regex("tcp [^ ,]*:([0-9]+)"))) tcp_port = m[1];
  }
  child_process child;
  std::string udp_port;
  std::string tcp_port;
};

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    out.push_back(text.substr(start, end - start));
  return out;
}

}  // namespace pmrkit::test::net
