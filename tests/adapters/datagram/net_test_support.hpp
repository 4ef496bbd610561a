// Loopback helpers for the datagram adapter's tests: a UDP sender, a TCP client, bounded
// waits, and child processes (logger, pmrkit-listen) with their output in files. Every wait
// has a deadline, so a broken receiver fails a test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "loopback_sockets.hpp"

extern char** environ;

namespace pmrkit::test::net {

inline constexpr std::chrono::seconds deadline{20};  // generous: the machine is shared

// Calls step() until done() or the deadline; returns done().
inline bool poll_until(const std::function<bool()>& done, const std::function<void()>& step,
                       std::chrono::milliseconds limit = deadline) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end) step();
  return done();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline bool program_exists(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// A child process whose stdout and stderr go to files; killed if still running when destroyed.
class child_process {
 public:
  child_process(const std::vector<std::string>& argv, const std::string& output_prefix)
      : out_path_(output_prefix + ".out"), err_path_(output_prefix + ".err") {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int error = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0)
      throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  }
  ~child_process() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int status;
      ::waitpid(pid_, &status, 0);
    }
    std::remove(out_path_.c_str());
    std::remove(err_path_.c_str());
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // The exit status, or nothing if it had not exited within `limit` (it is then killed).
  std::optional<int> wait(std::chrono::milliseconds limit = deadline) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!status_) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() >= end) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        status_ = -1;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (*status_ == -1) return std::nullopt;
    return status_;
  }
  void signal(int number) { ::kill(pid_, number); }
  std::string out() const { return read_file(out_path_); }
  std::string err() const { return read_file(err_path_); }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_path_;
  std::string err_path_;
};

// Runs a program to completion (bounded); returns its exit status, or -1 if it hung.
inline int run_program(const std::vector<std::string>& argv, const std::string& output_prefix) {
  child_process child(argv, output_prefix);
  return child.wait().value_or(-1);
}

}  // namespace pmrkit::test::net
