#include "pmrkit/datagram/peer_address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "pmrkit/datagram/errors.hpp"

namespace pmrkit::datagram {

peer_address::peer_address(const sockaddr* address, socklen_t length) noexcept {
  length_ = std::min<socklen_t>(length, capacity());
  std::memcpy(&storage_, address, length_);
}

peer_address peer_address::numeric(const std::string& address, std::uint16_t port) {
  sockaddr_in v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    return peer_address(reinterpret_cast<const sockaddr*>(&v4), sizeof v4);
  }
  sockaddr_in6 v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    return peer_address(reinterpret_cast<const sockaddr*>(&v6), sizeof v6);
  }
  throw invalid_option("address \"" + address +
                       "\" is not a numeric IPv4 or IPv6 address (e.g. 127.0.0.1 or ::1); "
                       "host names are not looked up");
}

void peer_address::set_size(socklen_t length) noexcept { length_ = std::min(length, capacity()); }

std::uint16_t peer_address::port() const noexcept {
  if (family() == AF_INET && length_ >= sizeof(sockaddr_in)) return ntohs(storage_.v4.sin_port);
  if (family() == AF_INET6 && length_ >= sizeof(sockaddr_in6)) return ntohs(storage_.v6.sin6_port);
  return 0;
}

std::string peer_address::to_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET && length_ >= sizeof(sockaddr_in)) {
    ::inet_ntop(AF_INET, &storage_.v4.sin_addr, text, sizeof text);
    return std::string(text) + ':' + std::to_string(port());
  }
  if (family() == AF_INET6 && length_ >= sizeof(sockaddr_in6)) {
    ::inet_ntop(AF_INET6, &storage_.v6.sin6_addr, text, sizeof text);
    return '[' + std::string(text) + "]:" + std::to_string(port());
  }
  return "-";
}

}  // namespace pmrkit::datagram
