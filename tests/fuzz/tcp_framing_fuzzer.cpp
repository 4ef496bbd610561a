// Fuzz target: the datagram adapter's syslog TCP framing (syslog_framer, RFC 6587), which
// reads bytes straight from the network. Input: byte 0 picks the mode and max_frame_size,
// byte 1 seeds how the rest is cut into chunks, the rest is the stream. Besides ASan/UBSan
// (no read outside the given bytes), it checks what the header promises:
//  - the same frames and the same error however the stream is cut (one chunk, or chunks of
//    1..17 bytes);
//  - no frame longer than max_frame_size; frames() counts what was handed on;
//  - once failed, nothing more is handed on until reset(); after reset() it frames a stream
//    as a new framer would;
//  - every pooled buffer goes back to the pool and the pool's memory to its resource;
//  - a failed allocation (a declared count beyond what the bounded upstream grants) surfaces
//    as std::bad_alloc and leaves the framer aborted.
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/datagram/syslog_framer.hpp"

namespace {

using pmrkit::datagram::framer_options;
using pmrkit::datagram::framing;
using pmrkit::datagram::framing_error;
using pmrkit::datagram::syslog_framer;
using pmrkit::fuzz::broken;

struct outcome {
  std::vector<std::string> frames;
  framing_error error = framing_error::none;
};

// Feeds `stream` in chunks: all at once when seed is 0, else of 1..17 bytes from a small LCG.
outcome frame(syslog_framer& framer, std::span<const std::byte> stream, unsigned seed) {
  outcome out;
  const auto on_frame = [&](std::span<const std::byte> bytes) {
    if (bytes.size() > framer.options().max_frame_size) broken("a frame over max_frame_size");
    if (out.error != framing_error::none) broken("a frame handed on after an error");
    out.frames.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  std::uint32_t state = seed;
  std::size_t at = 0;
  while (at < stream.size()) {
    std::size_t chunk = stream.size() - at;
    if (seed != 0) {
      state = state * 1664525u + 1013904223u;
      chunk = std::min<std::size_t>(chunk, 1 + (state >> 16) % 17);
    }
    framing_error e;
    try {
      e = framer.feed(stream.subspan(at, chunk), on_frame);
    } catch (const std::bad_alloc&) {
      // Documented: the pool failed while a cut frame was assembled (here, a declared count
      // beyond what the bounded upstream grants); the framer is left aborted.
      if (framer.error() != framing_error::aborted)
        broken("a failed allocation did not abort the framer");
      e = framing_error::aborted;
    }
    at += chunk;
    if (e != framing_error::none) {
      if (out.error == framing_error::none) out.error = e;
      if (framer.feed(stream.subspan(at), on_frame) != e)
        broken("a failed framer changed its error");
      if (framer.error() != e) broken("error() disagrees with feed()");
      break;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  static constexpr framing modes[] = {framing::automatic, framing::octet_counting,
                                      framing::newline};
  static constexpr std::size_t limits[] = {1, 2, 5, 16, 100, 1000, 64 * 1024, 1 << 30};
  framer_options options;
  options.mode = modes[(data[0] & 0x0F) % 3];
  options.max_frame_size = limits[(data[0] >> 4) % 8];
  const unsigned seed = data[1];
  const std::span<const std::byte> stream(reinterpret_cast<const std::byte*>(data + 2), size - 2);

  pmrkit::fuzz::bounded_upstream upstream;
  {
    pmrkit::buffer_pool_options pool_options;
    pool_options.max_capacity = 4096;  // frames above that are allocated and freed exactly
    pmrkit::buffer_pool pool(&upstream, pool_options);
    syslog_framer whole(pool, options);
    syslog_framer cut(pool, options);
    const outcome a = frame(whole, stream, 0);
    const outcome b = frame(cut, stream, seed == 0 ? 1 : seed);
    if (a.frames != b.frames) broken("the frames depend on where the stream was cut");
    if (a.error != b.error) broken("the error depends on where the stream was cut");
    if (whole.frames() != a.frames.size()) broken("frames() disagrees with what was handed on");
    cut.reset();
    const outcome again = frame(cut, stream, 0);
    if (again.frames != a.frames || again.error != a.error) broken("reset() did not start afresh");
  }
  if (upstream.blocks_in_use() != 0) broken("the pool kept memory after it was destroyed");
  return 0;
}
