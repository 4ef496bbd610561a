// pmrkit/zstd/decompressor.hpp — zstd decompression with a hard output limit.
//
// decompress() appends what a sequence of zstd frames holds to a caller-supplied byte_buffer, and
// refuses, with output_limit_exceeded, input that declares or produces more than the limit — before
// allocating for it: frames that declare their size are checked first and decoded in one pass; a
// frame that does not is first decoded into a small scratch block, only to count its output
// (stopping as soon as the total passes the limit), and then decoded again, with the others, into
// exactly the room they need. The destination grows at most once per call, to exactly its size plus
// the output. Corrupt, truncated and non-zstd input throws corrupt_frame, and so do the formats
// from before zstd 1.0 (libzstd decodes them with memory of its own, from malloc, outside the
// resource and any window limit). On any throw the destination is left exactly as it was: its
// bytes, size, capacity and storage (data()).
// The zstd context's memory comes from the resource (the frame window, for streamed frames,
// is at most 2^max_window_log bytes) and is kept for the next call; memory_bytes() reports it.
// One thread at a time; move-only (a moved-from decompressor may only be destroyed or assigned
// to). The resource must outlive the decompressor.
#pragma once

#include <cstddef>
#include <memory_resource>
#include <span>

#include "pmrkit/byte_buffer.hpp"

namespace pmrkit::zstd {

struct decompressor_options {
  std::size_t max_output_bytes = 64 * 1024 * 1024;  // per decompress() call
  // Frames that do not declare their size are streamed through a window of their own, and
  // rejected when it is larger than this; allowed 10..31. (One that declares its size is decoded
  // in one pass into its output and needs no window: max_output_bytes bounds it.)
  int max_window_log = 23;
};

class decompressor {
 public:
  // Throws std::invalid_argument for max_window_log out of range, and what the resource throws
  // if the context cannot be made. decompress() too throws what the resource throws (zstd's C
  // code cannot pass it on: it is kept and thrown again once zstd has returned).
  explicit decompressor(std::pmr::memory_resource* resource = std::pmr::get_default_resource(),
                        decompressor_options options = {});
  decompressor(decompressor&& other) noexcept;
  decompressor& operator=(decompressor&& other) noexcept;
  decompressor(const decompressor&) = delete;
  decompressor& operator=(const decompressor&) = delete;
  ~decompressor();

  // Appends the content of the frames in `source` to `destination`; returns the bytes appended.
  std::size_t decompress(std::span<const std::byte> source, byte_buffer& destination);
  // The same with a tighter limit for this call: min(max_output, options().max_output_bytes).
  std::size_t decompress(std::span<const std::byte> source, byte_buffer& destination,
                         std::size_t max_output);

  // Bytes the zstd context holds from the resource now.
  std::size_t memory_bytes() const noexcept;
  const decompressor_options& options() const noexcept { return options_; }
  std::pmr::memory_resource* resource() const noexcept { return resource_; }

 private:
  struct impl;
  // Gives impl_ back to resource_ and leaves the object moved-from (destructor, move-assign).
  void release_context() noexcept;
  std::pmr::memory_resource* resource_;
  decompressor_options options_;
  impl* impl_ = nullptr;  // allocated from resource_
};

}  // namespace pmrkit::zstd
