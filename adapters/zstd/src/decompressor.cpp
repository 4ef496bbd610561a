#include "pmrkit/zstd/decompressor.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <new>
#include <span>
#include <string>
#include <utility>

#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/zstd/errors.hpp"
#include "zstd_support.hpp"

namespace pmrkit::zstd {
namespace {

constexpr int min_window_log = 10;
constexpr int max_window_log = 31;  // ZSTD_WINDOWLOG_MAX on 64-bit
constexpr std::size_t block_alignment = alignof(std::max_align_t);

// Output chunk for measuring a frame that does not declare its size (on the stack; zstd
// decodes each block into its own window buffer and copies it out in chunks this size).
constexpr std::size_t scratch_bytes = 8 * 1024;

// `destination`'s bytes, with room for `extra` more, in a new block from the same pool or
// resource; `destination` itself is left alone.
[[noreturn]] void throw_window_too_large(const decompressor_options& options) {
  throw corrupt_frame("pmrkit::zstd::decompressor: the frame needs a window larger than "
                      "2^max_window_log = 2^" + std::to_string(options.max_window_log) +
                      " bytes; raise decompressor_options::max_window_log (up to 31) if the "
                      "source is trusted");
}

// Looks at each frame's magic number before anything is decoded: only zstd frames and
// skippable frames. libzstd also reads the formats from before zstd 1.0 ("legacy"), which take
// their window from plain malloc, outside the resource and above max_window_log (a 17-byte
// v0.7 frame made it hold 128 MiB until the decompressor was destroyed): those are refused.
// Returns the content sizes of the frames that declare one, added up (saturating).
unsigned long long check_frames(std::span<const std::byte> source) {
  constexpr unsigned long long most = std::numeric_limits<unsigned long long>::max();
  unsigned long long declared = 0;
  std::size_t offset = 0;
  while (offset < source.size()) {
    const std::byte* frame = source.data() + offset;
    const std::size_t remaining = source.size() - offset;
    std::uint32_t magic = 0;
    if (remaining >= sizeof magic) std::memcpy(&magic, frame, sizeof magic);  // little-endian
    const bool skippable = (magic & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
    if (remaining < sizeof magic || (magic != ZSTD_MAGICNUMBER && !skippable)) {
      throw corrupt_frame("pmrkit::zstd::decompressor: the input at byte " +
                          std::to_string(offset) + " is not a zstd frame (zstd frames begin "
                          "28 b5 2f fd, skippable ones 5? 2a 4d 18; the formats from before "
                          "zstd 1.0 are not accepted)");
    }
    const std::size_t size = ZSTD_findFrameCompressedSize(frame, remaining);
    if (ZSTD_isError(size)) return declared;  // corrupt or truncated: the size walk names it
    // 0 for a skippable frame; a frame that does not declare its size adds nothing here.
    const unsigned long long content = ZSTD_getFrameContentSize(frame, remaining);
    if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != ZSTD_CONTENTSIZE_ERROR)
      declared = content > most - declared ? most : declared + content;
    offset += size;
  }
  return declared;
}

}  // namespace

struct decompressor::impl {
  std::pmr::memory_resource* resource;
  ZSTD_DCtx* context = nullptr;
  std::size_t memory_bytes = 0;
  // What the resource threw, which cannot cross libzstd's C code: thrown again once zstd has
  // returned its memory_allocation error, so the caller sees the resource's own exception.
  std::exception_ptr allocation_failure;

  // zstd's custom allocator: its free gets no size, so each block starts with a header holding
  // it. Failure is reported to zstd as nullptr, which it turns into an error code.
  static void* allocate(void* opaque, std::size_t bytes) noexcept {
    auto* self = static_cast<impl*>(opaque);
    // PTRDIFF_MAX: no object is larger, and libstdc++'s aligned new wraps sizes near SIZE_MAX.
    if (bytes > PTRDIFF_MAX - block_alignment) return nullptr;
    try {
      auto* block = static_cast<std::byte*>(
          self->resource->allocate(bytes + block_alignment, block_alignment));
      std::memcpy(block, &bytes, sizeof bytes);
      self->memory_bytes += bytes + block_alignment;
      return block + block_alignment;
    } catch (...) {
      self->allocation_failure = std::current_exception();
      return nullptr;
    }
  }

  static void free(void* opaque, void* address) noexcept {
    if (address == nullptr) return;
    auto* self = static_cast<impl*>(opaque);
    auto* block = static_cast<std::byte*>(address) - block_alignment;
    std::size_t bytes;
    std::memcpy(&bytes, block, sizeof bytes);
    self->memory_bytes -= bytes + block_alignment;
    self->resource->deallocate(block, bytes + block_alignment, block_alignment);
  }

  // The content size of `source`, whose frames the caller has found complete: a frame that
  // declares its size counts as declared (decompress() decodes it in one pass, with no window:
  // streaming it here would make one, and refuse it past max_window_log), and each one that
  // does not is streamed into a scratch block to count it. Throws output_limit_exceeded as soon
  // as the total passes `limit`, corrupt_frame for anything zstd refuses.
  std::size_t measure(std::span<const std::byte> source, std::size_t limit,
                      const decompressor_options& options) {
    std::size_t produced = 0;
    for (std::size_t offset = 0; offset < source.size();) {
      const std::span<const std::byte> rest = source.subspan(offset);
      const std::size_t frame_size = ZSTD_findFrameCompressedSize(rest.data(), rest.size());
      const unsigned long long declared = ZSTD_getFrameContentSize(rest.data(), rest.size());
      if (ZSTD_isError(frame_size) || declared == ZSTD_CONTENTSIZE_ERROR) {
        throw corrupt_frame("pmrkit::zstd::decompressor: not a complete zstd frame at byte " +
                            std::to_string(offset));
      }
      if (declared == ZSTD_CONTENTSIZE_UNKNOWN) {
        produced = stream_count(rest.first(frame_size), produced, limit, options);
      } else if (declared > limit - produced) {
        throw_over_limit(limit);
      } else {
        produced += static_cast<std::size_t>(declared);
      }
      offset += frame_size;
    }
    return produced;
  }

  [[noreturn]] static void throw_over_limit(std::size_t limit) {
    throw output_limit_exceeded("pmrkit::zstd::decompressor: the input produces more than the "
                                "allowed " + std::to_string(limit) + " bytes");
  }

  // Streams one frame into a small scratch block and discards it, adding its content to
  // `produced`, without ever growing a buffer for it.
  std::size_t stream_count(std::span<const std::byte> frame, std::size_t produced,
                           std::size_t limit, const decompressor_options& options) {
    ZSTD_DCtx_reset(context, ZSTD_reset_session_only);
    try {
      std::byte scratch[scratch_bytes];
      ZSTD_inBuffer in{frame.data(), frame.size(), 0};
      for (;;) {
        ZSTD_outBuffer out{scratch, sizeof scratch, 0};
        const std::size_t in_before = in.pos;
        const std::size_t remaining = ZSTD_decompressStream(context, &out, &in);
        if (ZSTD_isError(remaining)) fail(remaining, options);
        if (out.pos > limit - produced) throw_over_limit(limit);
        produced += out.pos;
        if (remaining == 0 && in.pos == in.size) return produced;  // the frame is complete
        if (in.pos == in.size && out.pos < out.size) {
          throw corrupt_frame("pmrkit::zstd::decompressor: the input ends inside a frame "
                              "(truncated after " + std::to_string(frame.size()) + " bytes)");
        }
        if (in.pos == in_before && out.pos == 0) {
          throw corrupt_frame("pmrkit::zstd::decompressor: zstd made no progress on the input");
        }
      }
    } catch (...) {
      ZSTD_DCtx_reset(context, ZSTD_reset_session_only);
      throw;
    }
  }

  [[noreturn]] void fail(std::size_t code, const decompressor_options& options) {
    const auto e = ZSTD_getErrorCode(code);
    if (e == ZSTD_error_frameParameter_windowTooLarge) throw_window_too_large(options);
    if (e == ZSTD_error_memory_allocation) throw_allocation_failure();
    throw corrupt_frame("pmrkit::zstd::decompressor: not a valid zstd frame: " +
                        detail::error_name(code));
  }

  // The resource's exception, or std::bad_alloc where none was thrown (a size past PTRDIFF_MAX).
  [[noreturn]] void throw_allocation_failure() {
    if (allocation_failure) std::rethrow_exception(std::exchange(allocation_failure, nullptr));
    throw std::bad_alloc();
  }
};

decompressor::decompressor(std::pmr::memory_resource* resource, decompressor_options options)
    : resource_(resource), options_(options) {
  if (resource == nullptr) {
    throw std::invalid_argument("pmrkit::zstd::decompressor: null resource");
  }
  if (options.max_window_log < min_window_log || options.max_window_log > max_window_log) {
    throw std::invalid_argument("pmrkit::zstd::decompressor: max_window_log " +
                                std::to_string(options.max_window_log) +
                                " is out of range: allowed " + std::to_string(min_window_log) +
                                ".." + std::to_string(max_window_log));
  }
  std::pmr::polymorphic_allocator<std::byte> alloc(resource);
  impl* d = alloc.new_object<impl>();
  d->resource = resource;
  const ZSTD_customMem memory{&impl::allocate, &impl::free, d};
  d->context = ZSTD_createDCtx_advanced(memory);
  if (d->context == nullptr) {
    const std::exception_ptr failure = std::exchange(d->allocation_failure, nullptr);
    alloc.delete_object(d);
    if (failure) std::rethrow_exception(failure);
    throw std::bad_alloc();
  }
  const std::size_t r = ZSTD_DCtx_setParameter(d->context, ZSTD_d_windowLogMax,
                                               options.max_window_log);
  if (ZSTD_isError(r)) {
    ZSTD_freeDCtx(d->context);
    alloc.delete_object(d);
    throw std::invalid_argument("pmrkit::zstd::decompressor: zstd refused max_window_log " +
                                std::to_string(options.max_window_log) + ": " +
                                detail::error_name(r));
  }
  impl_ = d;
}

decompressor::decompressor(decompressor&& other) noexcept
    : resource_(other.resource_),
      options_(other.options_),
      impl_(std::exchange(other.impl_, nullptr)) {}

decompressor& decompressor::operator=(decompressor&& other) noexcept {
  if (this != &other) {
    release_context();
    resource_ = other.resource_;
    options_ = other.options_;
    impl_ = std::exchange(other.impl_, nullptr);
  }
  return *this;
}

decompressor::~decompressor() { release_context(); }

void decompressor::release_context() noexcept {
  if (impl_ == nullptr) return;
  ZSTD_freeDCtx(impl_->context);
  std::pmr::polymorphic_allocator<std::byte>(resource_).delete_object(impl_);
  impl_ = nullptr;
}

std::size_t decompressor::memory_bytes() const noexcept {
  return impl_ ? impl_->memory_bytes + sizeof(impl) : 0;
}

std::size_t decompressor::decompress(std::span<const std::byte> source,
                                     byte_buffer& destination) {
  return decompress(source, destination, options_.max_output_bytes);
}

std::size_t decompressor::decompress(std::span<const std::byte> source, byte_buffer& destination,
                                     std::size_t max_output) {
  if (impl_ == nullptr) throw std::logic_error("pmrkit::zstd::decompressor: used after a move");
  const std::size_t limit = std::min(max_output, options_.max_output_bytes);
  impl_->allocation_failure = nullptr;  // only what this call's allocations throw
  if (source.empty()) {
    throw corrupt_frame("pmrkit::zstd::decompressor: empty input is not a zstd frame");
  }
  // The sizes the frames that have one declare, added up: checked against the limit even when
  // another frame declares none, since zstd sizes a frame's window from its declared size, and
  // streaming such a frame through measure() would allocate for it.
  const unsigned long long declared_by_some = check_frames(source);
  // Walks the frame headers only (bounded by source.size()): the total they declare, or
  // UNKNOWN if a frame does not declare its size, or ERROR for anything malformed/truncated.
  const unsigned long long declared = ZSTD_findDecompressedSize(source.data(), source.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) {
    throw corrupt_frame("pmrkit::zstd::decompressor: the " + std::to_string(source.size()) +
                        " input bytes are not a sequence of complete zstd frames (bad magic "
                        "number, corrupt header, or truncated)");
  }
  if (declared_by_some > limit) {
    throw output_limit_exceeded("pmrkit::zstd::decompressor: the input declares " +
                                std::to_string(declared_by_some) + " bytes of content, more " +
                                "than the allowed " + std::to_string(limit));
  }
  // Some frame does not declare its size: decode each such frame once into a scratch block just
  // to count (and validate) it, so that neither a bomb nor a buffer grown for it ever costs more
  // than the limit.
  const std::size_t size = declared == ZSTD_CONTENTSIZE_UNKNOWN
                               ? impl_->measure(source, limit, options_)
                               : static_cast<std::size_t>(declared);

  // One pass into exactly the room needed. If the destination lacks it, its bytes are copied
  // into a larger block that replaces it only on success: a failure leaves its storage alone.
  const std::size_t start = destination.size();
  const bool fits = destination.capacity() - start >= size;
  byte_buffer larger = fits ? byte_buffer() : destination.copy_with_room(size);
  byte_buffer& target = fits ? destination : larger;
  // A frame that produces more than it declared fails with dstSize_tooSmall.
  const std::size_t produced = ZSTD_decompressDCtx(impl_->context, target.data() + start, size,
                                                   source.data(), source.size());
  if (ZSTD_isError(produced)) {
    if (ZSTD_getErrorCode(produced) == ZSTD_error_dstSize_tooSmall) {
      throw corrupt_frame("pmrkit::zstd::decompressor: the frame produces more than the " +
                          std::to_string(size) + " bytes it declares");
    }
    impl_->fail(produced, options_);
  }
  if (produced != size) {
    throw corrupt_frame("pmrkit::zstd::decompressor: the frame declares " + std::to_string(size) +
                        " bytes but produces " + std::to_string(produced));
  }
  target.commit(produced);
  if (!fits) destination = std::move(larger);
  return produced;
}

}  // namespace pmrkit::zstd
