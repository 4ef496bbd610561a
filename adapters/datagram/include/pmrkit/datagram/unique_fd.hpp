// pmrkit/datagram/unique_fd.hpp — a file descriptor that closes itself.
//
// The receivers hold their sockets, epoll set and wake-up eventfd in these, so a constructor
// that throws part way closes what it had opened. Move-only; release() gives the descriptor
// up. Not thread-safe: one owner, like the descriptor it holds.
#pragma once

namespace pmrkit::datagram {

class unique_fd {
 public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  ~unique_fd();
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  int get() const noexcept { return fd_; }  // -1 when empty
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace pmrkit::datagram
