// Fuzz target: the zstd adapter's bounded decompressor, fed untrusted frames. Byte 0 picks the
// output limit, the rest is the input. It must append the frames' content or throw its
// documented errors (corrupt_frame, output_limit_exceeded; std::bad_alloc only from the
// bounded upstream), and:
//  - never append more than the limit; grow the buffer only to what the output needs;
//  - return exactly what it appended; leave the buffer unchanged when it throws, capacity too;
//  - decompress what the adapter's own compressor made from the same bytes back to them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>

#include "fuzz_support.hpp"
#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "pmrkit/zstd/errors.hpp"

namespace {

using pmrkit::fuzz::broken;

struct codecs {
  pmrkit::zstd::compressor compressor{std::pmr::new_delete_resource(),
                                      {.level = 1, .window_log = 12}};
  pmrkit::zstd::decompressor decompressor{std::pmr::new_delete_resource(),
                                          {.max_output_bytes = 8 << 20, .max_window_log = 20}};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static codecs z;
  static constexpr std::size_t limits[] = {1 << 20, 100, 4096, 0, 1, 65536, 8 << 20, 17};
  const std::size_t limit = limits[data[0] % 8];
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data + 1), size - 1);

  pmrkit::fuzz::bounded_upstream upstream;
  {
    pmrkit::byte_buffer out = pmrkit::byte_buffer::make_standalone(&upstream, 16);
    const std::byte marker[5] = {std::byte{9}, std::byte{8}, std::byte{7}, std::byte{6},
                                 std::byte{5}};
    out.append(marker, sizeof marker);
    const std::size_t capacity_before = out.capacity();
    try {
      const std::size_t n = z.decompressor.decompress(input, out, limit);
      if (n > limit) broken("decompress appended more than the limit");
      if (out.size() != sizeof marker + n) broken("decompress returned a size it did not append");
      if (std::memcmp(out.data(), marker, sizeof marker) != 0)
        broken("decompress overwrote what was there");
      if (out.capacity() > std::max(capacity_before, sizeof marker + n))
        broken("the buffer grew beyond what the output needs");
    } catch (const pmrkit::zstd::error&) {
      if (out.size() != sizeof marker || std::memcmp(out.data(), marker, sizeof marker) != 0 ||
          out.capacity() != capacity_before)
        broken("a failed decompress changed its output buffer");
    } catch (const std::bad_alloc&) {
      if (out.size() != sizeof marker || out.capacity() != capacity_before)
        broken("a failed decompress changed its output buffer");
    }

    // Round trip of the input as content.
    pmrkit::byte_buffer frame = pmrkit::byte_buffer::make_standalone(&upstream, 64);
    pmrkit::byte_buffer back = pmrkit::byte_buffer::make_standalone(&upstream, 64);
    try {
      z.compressor.compress(input, frame);
      if (z.decompressor.decompress(frame.span(), back) != input.size() ||
          std::memcmp(back.data(), input.data(), input.size()) != 0)
        broken("compress then decompress changed the bytes");
    } catch (const pmrkit::zstd::error&) {
      broken("the adapter could not decompress its own frame");
    }
  }
  if (upstream.blocks_in_use() != 0) broken("a buffer kept memory after it was destroyed");
  return 0;
}
