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

extern char** environ;

namespace pmrkit::test::net {

inline constexpr std::chrono::seconds deadline{20};  // generous: the machine is shared

inline std::span<const std::byte> as_bytes(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}
inline std::string as_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  }
  ~fd_guard() { close(); }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Sends datagrams to 127.0.0.1:port from a socket of its own (bound, so its port is known).
class udp_sender {
 public:
  explicit udp_sender(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_DGRAM, 0)), to_(loopback(port)) {
    sockaddr_in any = loopback(0);
    ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&any), sizeof any);
    socklen_t length = sizeof any;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&any), &length);
    port_ = ntohs(any.sin_port);
    const int big = 4 << 20;
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  }
  bool send(std::span<const std::byte> bytes) {
    return ::sendto(fd_.get(), bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to_),
                    sizeof to_) == static_cast<ssize_t>(bytes.size());
  }
  bool send(std::string_view text) { return send(as_bytes(text)); }
  std::uint16_t port() const { return port_; }

 private:
  fd_guard fd_;
  sockaddr_in to_;
  std::uint16_t port_ = 0;
};

// A blocking TCP client connected to 127.0.0.1:port, Nagle off so small writes go out alone.
class tcp_client {
 public:
  explicit tcp_client(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    const sockaddr_in to = loopback(port);
    if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0)
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
    const int on = 1;
    ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    timeval timeout{5, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  }
  bool send(std::string_view text) {
    std::size_t sent = 0;
    while (sent < text.size()) {
      const ssize_t n = ::send(fd_.get(), text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  // True once the server has closed the connection (read returns 0 or an error), within 5 s.
  bool closed_by_peer() {
    char byte;
    const ssize_t n = ::recv(fd_.get(), &byte, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  void close() { fd_.close(); }

 private:
  fd_guard fd_;
};

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
    posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int error = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
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
