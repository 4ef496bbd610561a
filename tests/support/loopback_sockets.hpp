// Sockets on 127.0.0.1 for tests of the receivers: a bound UDP sender and a blocking TCP client
// (Nagle off, 5 s timeouts), plus byte/string views. Nothing here leaves the machine. Sends
// report failure with false, so a test can assert on it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pmrkit::test::net {

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
  explicit udp_sender(std::uint16_t port)
      : fd_(::socket(AF_INET, SOCK_DGRAM, 0)), to_(loopback(port)) {
    sockaddr_in any = loopback(0);
    ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&any), sizeof any);
    socklen_t length = sizeof any;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&any), &length);
    port_ = ntohs(any.sin_port);
    const int big = 4 << 20;
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  }
  bool send(std::span<const std::byte> bytes) {
    return ::sendto(fd_.get(), bytes.data(), bytes.size(), 0,
                    reinterpret_cast<const sockaddr*>(&to_),
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
// `from` picks another loopback source address (127.x.y.z), so one test can act as several
// peers.
class tcp_client {
 public:
  explicit tcp_client(std::uint16_t port, const char* from = nullptr)
      : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (from != nullptr) {
      sockaddr_in source = loopback(0);
      if (::inet_pton(AF_INET, from, &source.sin_addr) != 1 ||
          ::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&source), sizeof source) != 0)
        throw std::runtime_error(std::string("bind ") + from + ": " + std::strerror(errno));
    }
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
  // Closes with a reset (RST) instead of a normal close (FIN), as a crashed peer's kernel does.
  void reset() {
    const linger abort{.l_onoff = 1, .l_linger = 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    fd_.close();
  }

 private:
  fd_guard fd_;
};

}  // namespace pmrkit::test::net
