// A socket of the benchmark's own, connected to a receiver on 127.0.0.1 (the only address a
// benchmark may send to).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace pmrkit::bench {

// type: SOCK_DGRAM or SOCK_STREAM. Throws std::runtime_error naming `who` if it cannot connect.
inline int connect_loopback(int type, std::uint16_t port, const char* who) {
  const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(std::string(who) + ": cannot connect to the receiver on 127.0.0.1");
  }
  return fd;
}

}  // namespace pmrkit::bench
