#include "pmrkit/zstd/compressor.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "pmrkit/zstd/errors.hpp"
#include "zstd_support.hpp"

namespace pmrkit::zstd {
namespace {

constexpr int min_window_log = 10;  // ZSTD_WINDOWLOG_MIN
// Frames with larger windows need decoders configured beyond zstd's default limit (27).
constexpr int max_window_log = 27;
constexpr std::size_t workspace_alignment = alignof(std::max_align_t);

void check_options(const compressor_options& options) {
  if (options.level < ZSTD_minCLevel() || options.level > ZSTD_maxCLevel()) {
    throw std::invalid_argument("pmrkit::zstd::compressor: level " +
                                std::to_string(options.level) + " is out of range: allowed " +
                                std::to_string(ZSTD_minCLevel()) + ".." +
                                std::to_string(ZSTD_maxCLevel()));
  }
  if (options.window_log < min_window_log || options.window_log > max_window_log) {
    throw std::invalid_argument("pmrkit::zstd::compressor: window_log " +
                                std::to_string(options.window_log) +
                                " is out of range: allowed " + std::to_string(min_window_log) +
                                ".." + std::to_string(max_window_log));
  }
}

// The workspace a one-shot compression of any input size can need. zstd picks its parameters
// from the level and the input size (four size tiers), overrides the window, then shrinks the
// tables to fit the window and the input; within a tier, a larger input never needs less. So
// the largest need is at the top of one of the tiers; the last tier is open-ended, and an input
// of 2^window_log bytes or more no longer shrinks anything.
std::size_t workspace_bound(const compressor_options& options) {
  static constexpr unsigned long long tier_tops[] = {16 * 1024, 128 * 1024, 256 * 1024,
                                                     1ULL << 40};
  std::size_t most = 0;
  for (const unsigned long long size : tier_tops) {
    ZSTD_compressionParameters p = ZSTD_getCParams(options.level, size, 0);
    p.windowLog = static_cast<unsigned>(options.window_log);
    p = ZSTD_adjustCParams(p, size, 0);
    most = std::max(most, ZSTD_estimateCCtxSize_usingCParams(p));
  }
  return most;
}

}  // namespace

struct compressor::impl {
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  ZSTD_CCtx* context = nullptr;  // lives inside the workspace: nothing to free separately
};

std::size_t compressor::memory_bound(const compressor_options& options) {
  check_options(options);
  return workspace_bound(options) + sizeof(impl);
}

compressor::compressor(std::pmr::memory_resource* resource, compressor_options options)
    : resource_(resource), options_(options) {
  if (resource == nullptr) throw std::invalid_argument("pmrkit::zstd::compressor: null resource");
  check_options(options);
  std::pmr::polymorphic_allocator<std::byte> alloc(resource);
  impl* d = alloc.new_object<impl>();
  try {
    d->workspace_bytes = workspace_bound(options);
    d->workspace = resource->allocate(d->workspace_bytes, workspace_alignment);
    d->context = ZSTD_initStaticCCtx(d->workspace, d->workspace_bytes);
    if (d->context == nullptr) throw error("pmrkit::zstd::compressor: ZSTD_initStaticCCtx refused "
                                           "the workspace");
    const auto set = [&](ZSTD_cParameter parameter, int value) {
      const std::size_t r = ZSTD_CCtx_setParameter(d->context, parameter, value);
      if (ZSTD_isError(r)) {
        throw std::invalid_argument("pmrkit::zstd::compressor: zstd refused parameter " +
                                    std::to_string(static_cast<int>(parameter)) + " = " +
                                    std::to_string(value) + ": " + detail::error_name(r));
      }
    };
    set(ZSTD_c_compressionLevel, options.level);
    set(ZSTD_c_windowLog, options.window_log);
    set(ZSTD_c_checksumFlag, options.checksum ? 1 : 0);
    set(ZSTD_c_contentSizeFlag, 1);  // lets the decompressor check the size before it allocates
  } catch (...) {
    if (d->workspace) resource->deallocate(d->workspace, d->workspace_bytes, workspace_alignment);
    alloc.delete_object(d);
    throw;
  }
  impl_ = d;
}

compressor::compressor(compressor&& other) noexcept
    : resource_(other.resource_),
      options_(other.options_),
      impl_(std::exchange(other.impl_, nullptr)) {}

compressor& compressor::operator=(compressor&& other) noexcept {
  if (this != &other) {
    release_context();
    resource_ = other.resource_;
    options_ = other.options_;
    impl_ = std::exchange(other.impl_, nullptr);
  }
  return *this;
}

compressor::~compressor() { release_context(); }

void compressor::release_context() noexcept {
  if (impl_ == nullptr) return;
  resource_->deallocate(impl_->workspace, impl_->workspace_bytes, workspace_alignment);
  std::pmr::polymorphic_allocator<std::byte>(resource_).delete_object(impl_);
  impl_ = nullptr;
}

std::size_t compressor::compress(std::span<const std::byte> source, byte_buffer& destination) {
  if (impl_ == nullptr) throw std::logic_error("pmrkit::zstd::compressor: used after a move");
  const std::size_t bound = ZSTD_compressBound(source.size());
  if (ZSTD_isError(bound) || bound == 0) {
    throw std::length_error("pmrkit::zstd::compressor::compress: " +
                            std::to_string(source.size()) + " bytes is more than zstd can "
                            "compress in one frame");
  }
  // Into the destination when it has room for the worst case, else into a larger copy of it
  // that replaces it only on success: a failure leaves its storage alone, as decompress does.
  const std::size_t start = destination.size();
  const bool fits = destination.capacity() - start >= bound;
  // At least doubling, as an append grows a buffer: frames appended one after another to one
  // buffer copy it a logarithmic number of times, not once a frame.
  byte_buffer larger =
      fits ? byte_buffer() : destination.copy_with_room(std::max(bound, destination.capacity()));
  byte_buffer& target = fits ? destination : larger;
  const std::size_t written = ZSTD_compress2(impl_->context, target.data() + start, bound,
                                             source.data(), source.size());
  if (ZSTD_isError(written)) {
    throw error("pmrkit::zstd::compressor::compress: zstd failed: " +
                detail::error_name(written));
  }
  target.commit(written);
  if (!fits) destination = std::move(larger);
  return written;
}

std::size_t compressor::memory_bytes() const noexcept {
  return impl_ ? impl_->workspace_bytes + sizeof(impl) : 0;
}

}  // namespace pmrkit::zstd
