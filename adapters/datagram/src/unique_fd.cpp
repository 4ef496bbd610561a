#include "pmrkit/datagram/unique_fd.hpp"

#include <unistd.h>

namespace pmrkit::datagram {

unique_fd::~unique_fd() {
  if (fd_ >= 0) ::close(fd_);
}

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

}  // namespace pmrkit::datagram
