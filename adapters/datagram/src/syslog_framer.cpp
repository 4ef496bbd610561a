#include "pmrkit/datagram/syslog_framer.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "pmrkit/datagram/errors.hpp"

namespace pmrkit::datagram {
namespace {

constexpr std::size_t largest_frame_limit = std::size_t{1} << 30;
// Ten digits hold every count up to the 1 GiB limit; more can only be an attack or garbage.
constexpr std::size_t max_count_digits = 10;
// The first buffer of a frame that arrives in pieces; it grows as the rest comes in.
constexpr std::size_t first_partial_bytes = 4096;

bool is_digit(std::byte b) noexcept { return b >= std::byte{'0'} && b <= std::byte{'9'}; }
bool is_separator(std::byte b) noexcept {
  return b == std::byte{'\n'} || b == std::byte{'\r'} || b == std::byte{0};
}

}  // namespace

std::string_view to_string(framing_error error) noexcept {
  switch (error) {
    case framing_error::none: return "no error";
    case framing_error::frame_too_large: return "frame too large (longer than max_frame_size)";
    case framing_error::bad_octet_count:
      return "bad octet count (expected 1-10 digits without a leading zero, then a space)";
    case framing_error::aborted:
      return "framing was interrupted by an exception (the frame handler's, or out of memory); "
             "the rest of the stream cannot be framed";
  }
  return "unknown framing error";
}

syslog_framer::syslog_framer(buffer_pool& pool, const framer_options& options)
    : pool_(&pool), options_(options), partial_(pool.resource()) {
  if (options.max_frame_size == 0 || options.max_frame_size > largest_frame_limit) {
    throw invalid_option("max_frame_size " + std::to_string(options.max_frame_size) +
                         " is out of range; allowed: 1.." + std::to_string(largest_frame_limit) +
                         " bytes");
  }
}

bool syslog_framer::has_partial_frame() const noexcept {
  return state_ == state::count_digits || state_ == state::octet_body ||
         state_ == state::line_body;
}

void syslog_framer::reset() noexcept {
  partial_.reset();
  state_ = state::between_frames;
  error_ = framing_error::none;
  count_ = 0;
  count_digits_ = 0;
}

framing_error syslog_framer::fail(framing_error error) noexcept {
  partial_.reset();
  state_ = state::failed;
  error_ = error;
  return error;
}

// Hands on the assembled frame; its buffer then goes back to the pool, since an idle
// connection should not pin a frame-sized block.
void syslog_framer::finish_frame(function_ref<void(std::span<const std::byte>)>& on_frame) {
  state_ = state::between_frames;
  ++frames_;
  std::span<const std::byte> frame = partial_.span();
  if (options_.mode != framing::octet_counting && count_digits_ == 0 && !frame.empty() &&
      frame.back() == std::byte{'\r'}) {
    frame = frame.first(frame.size() - 1);
  }
  on_frame(frame);
  partial_.reset();
}

framing_error syslog_framer::feed(std::span<const std::byte> bytes,
                                  function_ref<void(std::span<const std::byte>)> on_frame) {
  if (state_ == state::failed) return error_;
  const std::byte* p = bytes.data();
  const std::byte* const end = p + bytes.size();
  const std::size_t max = options_.max_frame_size;
  try {
    while (p < end) {
      switch (state_) {
        case state::between_frames:
          if (is_separator(*p)) {
            ++p;
            break;
          }
          count_ = 0;
          count_digits_ = 0;
          if (options_.mode == framing::octet_counting ||
              (options_.mode == framing::automatic && is_digit(*p))) {
            state_ = state::count_digits;
          } else {
            state_ = state::line_body;
          }
          break;

        case state::count_digits:
          if (is_digit(*p)) {
            if ((count_digits_ == 0 && *p == std::byte{'0'}) ||
                count_digits_ == max_count_digits) {
              return fail(framing_error::bad_octet_count);
            }
            ++count_digits_;
            count_ = count_ * 10 + static_cast<unsigned>(std::to_integer<unsigned char>(*p) - '0');
            // Refused as soon as the count says so: no byte of the body is ever buffered.
            if (count_ > max) return fail(framing_error::frame_too_large);
            ++p;
          } else if (*p == std::byte{' '} && count_digits_ > 0) {
            ++p;
            state_ = state::octet_body;
          } else {
            return fail(framing_error::bad_octet_count);
          }
          break;

        case state::octet_body: {
          const std::size_t length = static_cast<std::size_t>(count_);
          const std::size_t available = static_cast<std::size_t>(end - p);
          if (partial_.empty() && available >= length) {
            const std::span<const std::byte> frame(p, length);
            p += length;
            state_ = state::between_frames;
            ++frames_;
            on_frame(frame);
            break;
          }
          // Sized by what has arrived, not by what the count announces: a peer must not pin
          // max_frame_size bytes with a ten-byte prefix. append() grows it through the pool.
          if (partial_.capacity() == 0)
            partial_ = pool_->acquire(std::min(length, std::max(available, first_partial_bytes)));
          const std::size_t take = std::min(length - partial_.size(), available);
          partial_.append(p, take);
          p += take;
          if (partial_.size() == length) finish_frame(on_frame);
          break;
        }

        case state::line_body: {
          const auto available = static_cast<std::size_t>(end - p);
          const auto* line_feed = static_cast<const std::byte*>(std::memchr(p, '\n', available));
          const std::size_t length =
              line_feed ? static_cast<std::size_t>(line_feed - p) : available;
          // The limit counts every byte before the line feed, a carriage return included, so
          // it does not depend on where the chunks were cut.
          if (partial_.size() + length > max) return fail(framing_error::frame_too_large);
          if (line_feed != nullptr && partial_.empty()) {
            std::span<const std::byte> frame(p, length);
            if (!frame.empty() && frame.back() == std::byte{'\r'}) frame = frame.first(length - 1);
            p = line_feed + 1;
            state_ = state::between_frames;
            ++frames_;
            on_frame(frame);
            break;
          }
          if (length > 0) {
            if (partial_.capacity() == 0) partial_ = pool_->acquire(length);
            partial_.append(p, length);
          }
          p += length;
          if (line_feed != nullptr) {
            ++p;
            finish_frame(on_frame);
          }
          break;
        }

        case state::failed:
          return error_;
      }
    }
  } catch (...) {
    fail(framing_error::aborted);
    throw;
  }
  return framing_error::none;
}

}  // namespace pmrkit::datagram
