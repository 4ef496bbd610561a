// pmrkit/datagram/errors.hpp — the exceptions the datagram adapter throws.
//
// socket_error: a system call failed (bind, listen, setsockopt...); what() names the call, the
// address and the reason, code() holds errno. invalid_option: an option was out of range;
// what() names the option and the range allowed.
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace pmrkit::datagram {

class socket_error : public std::system_error {
 public:
  socket_error(int error_number, const std::string& what)
      : std::system_error(error_number, std::generic_category(), what) {}
};

class invalid_option : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace pmrkit::datagram
