#include "socket_util.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "pmrkit/datagram/errors.hpp"

namespace pmrkit::datagram::detail {

peer_address parse_address(const std::string& address, std::uint16_t port) {
  return peer_address::numeric(address, port);
}

void throw_errno(int error_number, std::string_view call, std::string_view where) {
  std::string what(call);
  if (!where.empty()) {
    what += ' ';
    what += where;
  }
  what += ": ";
  what += std::strerror(error_number);
  throw socket_error(error_number, what);
}

void set_receive_buffer(int fd, std::size_t bytes, std::string_view where) {
  if (bytes == 0) return;
  if (bytes > static_cast<std::size_t>(INT32_MAX / 2)) {
    throw invalid_option("receive_buffer_size " + std::to_string(bytes) +
                         " is too large; allowed: 0 (system default) up to " +
                         std::to_string(INT32_MAX / 2) + " bytes");
  }
  const int value = static_cast<int>(bytes);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof value) != 0)
    throw_errno(errno, "setsockopt(SO_RCVBUF)", where);
  // The kernel doubles the value for its bookkeeping and silently caps it at rmem_max; only
  // a privileged process can go past that cap, so a failure here is not an error.
  if (receive_buffer_size(fd) < bytes * 2)
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &value, sizeof value);
}

std::size_t receive_buffer_size(int fd) {
  int value = 0;
  socklen_t length = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, &length) != 0) return 0;
  return value > 0 ? static_cast<std::size_t>(value) : 0;
}

std::uint16_t bound_port(int fd) {
  peer_address local;
  socklen_t length = peer_address::capacity();
  if (::getsockname(fd, local.data(), &length) != 0) throw_errno(errno, "getsockname", "");
  local.set_size(length);
  return local.port();
}

bool wait_readable(int fd, int wake_fd, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const bool forever = timeout.count() < 0;
  const auto deadline = later_by(clock::now(), forever ? std::chrono::milliseconds(0) : timeout);
  pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const nfds_t count = wake_fd >= 0 ? 2 : 1;
  for (;;) {
    int wait_ms = -1;
    if (!forever) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
      wait_ms = left > 0 ? static_cast<int>(std::min<long long>(left, INT32_MAX)) : 0;
    }
    const int ready = ::poll(fds, count, wait_ms);
    if (ready > 0) {
      if (count == 2 && (fds[1].revents & POLLIN)) return false;
      return (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
    }
    if (ready == 0) return false;
    if (errno != EINTR) throw_errno(errno, "poll", "");
  }
}

unique_fd make_wake_fd() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw_errno(errno, "eventfd", "");
  return unique_fd(fd);
}

void signal_wake_fd(int fd) noexcept {
  const std::uint64_t one = 1;
  // A full counter (EAGAIN) already wakes every poller, so the result does not matter.
  [[maybe_unused]] const ssize_t written = ::write(fd, &one, sizeof one);
}

}  // namespace pmrkit::datagram::detail
