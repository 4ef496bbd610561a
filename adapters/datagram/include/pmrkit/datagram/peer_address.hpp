// pmrkit/datagram/peer_address.hpp — the address a datagram or connection came from.
//
// A plain value (copyable, no allocation, 32 bytes: it is copied once per message) holding an
// IPv4 or IPv6 socket address as the kernel reported it. Thread-safe as any value is: copies
// are independent.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace pmrkit::datagram {

class peer_address {
 public:
  peer_address() noexcept = default;
  // Copies `length` bytes of `address`; a length above capacity() is clamped.
  peer_address(const sockaddr* address, socklen_t length) noexcept;
  // A numeric IPv4 or IPv6 address ("127.0.0.1", "::1") with a port; host names are not
  // looked up. Throws invalid_option (errors.hpp) for anything else.
  static peer_address numeric(const std::string& address, std::uint16_t port);

  // AF_INET, AF_INET6, or AF_UNSPEC for an empty address.
  int family() const noexcept { return storage_.any.sa_family; }
  // The port in host byte order; 0 for an empty address.
  std::uint16_t port() const noexcept;
  // "127.0.0.1:514" or "[::1]:514"; "-" for an empty address.
  std::string to_string() const;

  const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* data() noexcept { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t size() const noexcept { return length_; }
  // For filling by recvmsg/accept: the capacity, then set_size() with what the kernel wrote.
  // Room for the two families the adapter speaks: sockaddr_in and sockaddr_in6.
  static constexpr socklen_t capacity() noexcept { return sizeof(storage_); }
  void set_size(socklen_t length) noexcept;

 private:
  union storage {
    sockaddr any;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } storage_{};
  socklen_t length_ = 0;
};

}  // namespace pmrkit::datagram
