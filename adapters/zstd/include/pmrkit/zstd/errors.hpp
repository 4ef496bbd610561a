// pmrkit/zstd/errors.hpp — what the zstd adapter throws. Every what() says what was wrong and
// what is allowed. Configuration mistakes throw std::invalid_argument; a failing memory
// resource throws what it throws (std::bad_alloc); nothing is appended to a destination buffer
// by a call that throws.
#pragma once

#include <stdexcept>

namespace pmrkit::zstd {

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Input that is not a valid zstd frame: bad magic number, corrupt data, a truncated frame, a
// checksum mismatch, a frame that produces more than its header declares, or one without a
// declared size whose window exceeds decompressor_options::max_window_log.
class corrupt_frame : public error {
 public:
  using error::error;
};

// A frame that declares or produces more bytes than the decompressor may write.
class output_limit_exceeded : public error {
 public:
  using error::error;
};

}  // namespace pmrkit::zstd
