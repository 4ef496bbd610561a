// pmrkit/allocation_error.hpp — what a checked_resource reports when memory is misused.
//
// checked_resource (checked_resource.hpp) finds misuse such as a double free or a write past the
// end of a block. With on_error=throw it throws allocation_error, so a test can assert which
// violation happened; with the default, on_error=abort, it prints the same message and aborts; with
// on_error=record, a violation found by deallocate() is kept for violation_report() instead, and
// the others throw as with throw. allocation_error is a std::logic_error: it signals a bug in the
// calling code, not a shortage of memory (that stays std::bad_alloc). Plain value type; no
// ownership concerns.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace pmrkit {

enum class allocation_violation {
  double_free,       // deallocate of a block that was already freed
  unknown_pointer,   // deallocate of a pointer this resource did not hand out (or one inside
                     // a block)
  wrong_size,        // deallocate with a size other than the one allocated
  wrong_alignment,   // deallocate with an alignment other than the one allocated
  bad_alignment,     // an alignment that is not a power of two
  overrun,           // bytes just past the end of a block were written
  underrun,          // bytes just before the start of a block were written
  write_after_free,  // a freed block was written to before it was reused or returned
  corrupt_upstream,  // upstream handed out a block overlapping one still in use
};

constexpr std::string_view to_string(allocation_violation v) noexcept {
  switch (v) {
    case allocation_violation::double_free: return "double free";
    case allocation_violation::unknown_pointer: return "unknown pointer";
    case allocation_violation::wrong_size: return "wrong size";
    case allocation_violation::wrong_alignment: return "wrong alignment";
    case allocation_violation::bad_alignment: return "bad alignment";
    case allocation_violation::overrun: return "overrun";
    case allocation_violation::underrun: return "underrun";
    case allocation_violation::write_after_free: return "write after free";
    case allocation_violation::corrupt_upstream: return "corrupt upstream";
  }
  return "unknown violation";
}

class allocation_error : public std::logic_error {
 public:
  allocation_error(allocation_violation violation, const std::string& message)
      : std::logic_error(message), violation_(violation) {}
  allocation_violation violation() const noexcept { return violation_; }

 private:
  allocation_violation violation_;
};

}  // namespace pmrkit
