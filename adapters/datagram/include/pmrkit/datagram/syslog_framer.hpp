// pmrkit/datagram/syslog_framer.hpp — splits a syslog TCP byte stream into messages (RFC 6587).
//
// A pure parser: bytes in, frames out, no I/O. Two framings exist on the wire:
//   octet counting          "<length> <message>"   e.g. "11 <13>hello w"
//   newline-delimited       "<message>\n"          (RFC 6587's non-transparent framing)
// In `automatic` mode each frame's first byte decides: a digit starts an octet count, anything
// else a newline-delimited message (a syslog message starts with '<', never with a digit).
// Line feeds, carriage returns and NULs between frames are skipped, and so are empty lines; a
// carriage return just before a newline-delimited message's line feed is not part of it.
// Feed the stream in chunks of any size, down to one byte: a frame cut across chunks is
// assembled in a buffer from the framer's pool; a frame that lies inside one chunk is handed
// on in place, without a copy. It never reads outside the bytes it is given.
//
// Errors: a frame longer than max_frame_size (an octet count above it, or more than that many
// bytes before a line feed, a carriage return included) is frame_too_large; an octet count
// that is not 1-10 digits without a leading zero, followed by one space, is bad_octet_count.
// After an error the framer hands nothing on until reset(): the stream cannot be
// resynchronised, so the connection should be closed.
//
// Thread-safety: none; one framer per connection, used by one thread at a time. The pool must
// outlive the framer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/function_ref.hpp"

namespace pmrkit::datagram {

enum class framing { automatic, octet_counting, newline };

enum class framing_error {
  none,
  frame_too_large,  // a frame longer than max_frame_size
  bad_octet_count,  // not "<1-10 digits, no leading zero> <space>"
  aborted,          // an exception (on_frame's, or out of memory) interrupted a chunk
};

// "frame too large (...)": what each error means, for messages and logs.
std::string_view to_string(framing_error error) noexcept;

struct framer_options {
  framing mode = framing::automatic;
  std::size_t max_frame_size = 64 * 1024;  // largest message (without its count or line feed)
};

class syslog_framer {
 public:
  // Throws invalid_option for max_frame_size 0 or above 1 GiB.
  explicit syslog_framer(buffer_pool& pool, const framer_options& options = {});

  // Splits `bytes`, calling on_frame once per complete frame with the message bytes (valid
  // only during the call). Returns the error that stopped it, or none. If on_frame throws, the
  // exception propagates and the framer is left failed with `aborted`: the rest of the chunk
  // was not framed, so the stream cannot be followed any further. The same holds if the pool
  // throws while a cut frame is assembled.
  framing_error feed(std::span<const std::byte> bytes,
                     function_ref<void(std::span<const std::byte>)> on_frame);

  framing_error error() const noexcept { return error_; }
  // True while part of a frame (its count, or some of its bytes) has been seen: at the end of
  // a stream this means the last frame was cut off.
  bool has_partial_frame() const noexcept;
  std::size_t frames() const noexcept { return frames_; }
  const framer_options& options() const noexcept { return options_; }
  // Forgets any partial frame (giving its buffer back) and the error.
  void reset() noexcept;

 private:
  enum class state : std::uint8_t { between_frames, count_digits, octet_body, line_body, failed };

  framing_error fail(framing_error error) noexcept;
  void finish_frame(function_ref<void(std::span<const std::byte>)>& on_frame);

  buffer_pool* pool_;
  framer_options options_;
  state state_ = state::between_frames;
  framing_error error_ = framing_error::none;
  std::uint64_t count_ = 0;         // octet count being read, or the body length expected
  std::size_t count_digits_ = 0;
  byte_buffer partial_;              // a frame cut across chunks, assembled here
  std::size_t frames_ = 0;
};

}  // namespace pmrkit::datagram
