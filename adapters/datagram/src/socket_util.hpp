// Internal helpers shared by the UDP and TCP sockets: address parsing, option setting and
// error messages. Not installed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pmrkit/datagram/peer_address.hpp"
#include "pmrkit/datagram/unique_fd.hpp"

namespace pmrkit::datagram::detail {

// A numeric IPv4/IPv6 address and port as a socket address; throws invalid_option if the
// address is not numeric (no name lookup: a receiver binds what it is told, nothing else).
peer_address parse_address(const std::string& address, std::uint16_t port);

// Throws socket_error with "<call> <address>: <strerror>", errno preserved in code().
[[noreturn]] void throw_errno(int error_number, std::string_view call, std::string_view where);

using pmrkit::datagram::unique_fd;

// `from` plus `duration`, or the latest time the clock holds when the sum would not fit: a
// timeout of milliseconds::max() means a very long time, not an overflow into the past.
inline std::chrono::steady_clock::time_point later_by(std::chrono::steady_clock::time_point from,
                                                      std::chrono::milliseconds duration) {
  using clock = std::chrono::steady_clock;
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - from);
  return duration >= room ? clock::time_point::max() : from + duration;
}

// Sets SO_RCVBUF to `bytes`, retrying with SO_RCVBUFFORCE when the kernel capped it.
void set_receive_buffer(int fd, std::size_t bytes, std::string_view where);
std::size_t receive_buffer_size(int fd);
std::uint16_t bound_port(int fd);

// poll() on fd for input, plus wake_fd (if >= 0); retries EINTR with the time left. Returns
// true if fd is readable; false on timeout or when wake_fd fired.
bool wait_readable(int fd, int wake_fd, std::chrono::milliseconds timeout);

// A non-blocking eventfd that stop() writes to; write and read are async-signal-safe.
unique_fd make_wake_fd();
void signal_wake_fd(int fd) noexcept;

}  // namespace pmrkit::datagram::detail
