// Loopback sockets for the reliability tests: a UDP sender and a blocking TCP client on
// 127.0.0.1, with errors thrown rather than ignored. Nothing here leaves the machine.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pmrkit::test {

inline sockaddr_in loopback_address(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

class loopback_socket {
 public:
  explicit loopback_socket(int type) : fd_(::socket(AF_INET, type | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  }
  ~loopback_socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  loopback_socket(loopback_socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  loopback_socket& operator=(loopback_socket&&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

class udp_sender {
 public:
  explicit udp_sender(std::uint16_t port) : socket_(SOCK_DGRAM), to_(loopback_address(port)) {}
  void send(std::span<const std::byte> bytes) {
    if (::sendto(socket_.fd(), bytes.data(), bytes.size(), 0,
                 reinterpret_cast<const sockaddr*>(&to_), sizeof to_) !=
        static_cast<ssize_t>(bytes.size()))
      throw std::runtime_error(std::string("sendto: ") + std::strerror(errno));
  }

 private:
  loopback_socket socket_;
  sockaddr_in to_;
};

class tcp_client {
 public:
  explicit tcp_client(std::uint16_t port) : socket_(SOCK_STREAM) {
    const sockaddr_in to = loopback_address(port);
    if (::connect(socket_.fd(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0)
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
    const int on = 1;
    ::setsockopt(socket_.fd(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  void send(std::string_view text) {
    std::size_t sent = 0;
    while (sent < text.size()) {
      const ssize_t n = ::send(socket_.fd(), text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
      sent += static_cast<std::size_t>(n);
    }
  }

 private:
  loopback_socket socket_;
};

}  // namespace pmrkit::test
