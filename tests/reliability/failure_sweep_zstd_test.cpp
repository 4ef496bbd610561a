// Allocation-failure sweeps over the zstd adapter: building compressors and decompressors,
// compressing into a growing buffer, decompressing frames with and without a declared size
// (the streamed ones make the context allocate its window), OP_COMPRESSED wrap and unwrap (the
// bson adapter's framing around these compressors, when that adapter is built), and the shared
// compressor_pool. The header promises that a call that throws leaves the output
// buffer unchanged: each sweep compares it with a snapshot after the failure.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include <zstd.h>

#include "pmrkit/byte_buffer.hpp"
#include "pmrkit/testing/failure_sweep.hpp"
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "sweep_helpers.hpp"

#ifdef PMRKIT_TEST_HAVE_BSON
#include "pmrkit/bson/op_compressed.hpp"
#endif

using pmrkit::byte_buffer;
using pmrkit::test::payload;
using pmrkit::test::require;
using pmrkit::test::same_bytes;
using pmrkit::test::snapshot;
using pmrkit::testing::failure_sweep;
namespace zs = pmrkit::zstd;

namespace {

const zs::compressor_options small_window{.level = 3, .window_log = 16, .checksum = true};

struct output {
  byte_buffer out;
  std::vector<std::byte> last_good;
  std::size_t calls = 0;
};

// Frames made outside the swept memory: declared size, and streamed (no declared size).
std::vector<std::vector<std::byte>> sample_frames() {
  std::vector<std::vector<std::byte>> frames;
  zs::compressor c(std::pmr::new_delete_resource(), small_window);
  for (std::size_t n : {100u, 70000u, 3000u}) {
    byte_buffer b;
    c.compress(payload(n, static_cast<unsigned>(n)), b);
    frames.push_back(snapshot(b.span()));
  }
  const auto content = payload(200000, 5);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 17);
  std::vector<std::byte> streamed(ZSTD_compressBound(content.size()) + 64);
  ZSTD_outBuffer o{streamed.data(), streamed.size(), 0};
  ZSTD_inBuffer in{content.data(), content.size(), 0};
  ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_end);
  ZSTD_freeCCtx(cctx);
  streamed.resize(o.pos);
  frames.push_back(streamed);
  return frames;
}

}  // namespace

TEST_CASE("failure sweep: constructing compressors and decompressors", "[failure_sweep][zstd]") {
  struct slot {
    std::pmr::memory_resource* memory;
    std::unique_ptr<zs::compressor> c;
    std::unique_ptr<zs::decompressor> d;
  };
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) { return slot{&memory, nullptr, nullptr}; },
      [](slot& s) {
        s.c = std::make_unique<zs::compressor>(s.memory, small_window);
        s.d = std::make_unique<zs::decompressor>(s.memory);
      },
      [](slot& s) {
        // What a failure left unbuilt builds now, and the pair round-trips on the same memory.
        if (!s.c) s.c = std::make_unique<zs::compressor>(s.memory, small_window);
        if (!s.d) s.d = std::make_unique<zs::decompressor>(s.memory);
        byte_buffer frame(s.memory), out(s.memory);
        s.c->compress(payload(5000, 3), frame);
        s.d->decompress(frame.span(), out);
        require(same_bytes(out.span(), payload(5000, 3)), "round trip broken after the failure");
      });
  // A constructor cannot absorb a failure: each one surfaces, in both constructors.
  CHECK(result.surfaced == result.steps - 1);
  CHECK(result.surfaced >= 3);
}

TEST_CASE("failure sweep: compressing into a growing buffer", "[failure_sweep][zstd]") {
  struct subject {
    std::unique_ptr<zs::compressor> c;  // its context is built outside the sweep
    output o;
  };
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) {
        subject s{std::make_unique<zs::compressor>(std::pmr::new_delete_resource(), small_window),
                  {byte_buffer(&memory), {}, 0}};
        return s;
      },
      [](subject& s) {
        for (std::size_t n : {10u, 5000u, 300000u, 64u, 1000000u}) {
          s.c->compress(payload(n, 1), s.o.out);
          s.o.last_good = snapshot(s.o.out.span());
        }
      },
      [](subject& s) {
        require(same_bytes(s.o.out.span(), s.o.last_good), "a failed compress changed the buffer");
        s.c->compress(payload(100, 2), s.o.out);
      });
  CHECK(result.surfaced > 3);
}

TEST_CASE("failure sweep: decompressing, with and without a declared size",
          "[failure_sweep][zstd]") {
  const auto frames = sample_frames();
  struct subject {
    std::unique_ptr<zs::decompressor> d;
    output o;
  };
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) {
        return subject{std::make_unique<zs::decompressor>(&memory), {byte_buffer(&memory), {}, 0}};
      },
      [&](subject& s) {
        for (const auto& f : frames) {
          s.d->decompress(f, s.o.out);
          s.o.last_good = snapshot(s.o.out.span());
        }
      },
      [&](subject& s) {
        require(same_bytes(s.o.out.span(), s.o.last_good),
                "a failed decompress changed the buffer");
        const std::size_t before = s.o.out.size();
        s.d->decompress(frames.back(), s.o.out);
        require(same_bytes(s.o.out.span().subspan(before), payload(200000, 5)),
                "the decompressor is broken after the failure");
      });
  CHECK(result.surfaced > 2);
}

#ifdef PMRKIT_TEST_HAVE_BSON
TEST_CASE("failure sweep: OP_COMPRESSED wrap and unwrap", "[failure_sweep][zstd]") {
  using pmrkit::bson::compressor_id_zstd;
  // An OP_MSG-shaped message: header then body (the framing needs only the header).
  auto message = payload(50000, 9);
  const std::int32_t length = static_cast<std::int32_t>(message.size());
  const std::int32_t fields[4] = {length, 77, 0, 2013};
  std::memcpy(message.data(), fields, sizeof fields);
  struct subject {
    std::unique_ptr<zs::compressor> c;
    std::unique_ptr<zs::decompressor> d;
    output wrapped;
    output unwrapped;
  };
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) {
        return subject{
            std::make_unique<zs::compressor>(std::pmr::new_delete_resource(), small_window),
            std::make_unique<zs::decompressor>(&memory),
            {byte_buffer(&memory), {}, 0},
            {byte_buffer(&memory), {}, 0}};
      },
      [&](subject& s) {
        for (int i = 0; i < 3; ++i) {
          s.wrapped.out.clear();
          pmrkit::bson::wrap_op_compressed(message, compressor_id_zstd, *s.c, s.wrapped.out);
          s.wrapped.last_good = snapshot(s.wrapped.out.span());
          s.unwrapped.out.clear();
          s.unwrapped.last_good.clear();
          pmrkit::bson::unwrap_op_compressed(s.wrapped.out.span(), compressor_id_zstd, *s.d,
                                             s.unwrapped.out);
          require(same_bytes(s.unwrapped.out.span(), message), "round trip changed the message");
          s.unwrapped.last_good = snapshot(s.unwrapped.out.span());
        }
      },
      [&](subject& s) {
        require(same_bytes(s.wrapped.out.span(), s.wrapped.last_good),
                "a failed wrap changed its buffer");
        require(same_bytes(s.unwrapped.out.span(), s.unwrapped.last_good),
                "a failed unwrap changed its buffer");
        byte_buffer w, u;
        pmrkit::bson::wrap_op_compressed(message, compressor_id_zstd, *s.c, w);
        pmrkit::bson::unwrap_op_compressed(w.span(), compressor_id_zstd, *s.d, u);
        require(same_bytes(u.span(), message), "round trip broken after the failure");
      });
  // Into empty buffers: the wrap's copy with room for its result, the unwrap's copy with room
  // for the header, and the decompressor's copy with room for the message.
  CHECK(result.surfaced >= 3);
}
#endif

TEST_CASE("failure sweep: compressor_pool acquire, compress, trim", "[failure_sweep][zstd]") {
  const auto result = failure_sweep(
      [](std::pmr::memory_resource& memory) {
        return std::make_unique<zs::compressor_pool>(
            &memory, zs::compressor_options{.level = 1, .window_log = 12}, 2);
      },
      [](std::unique_ptr<zs::compressor_pool>& pool) {
        byte_buffer out;
        {
          auto a = pool->acquire();
          auto b = pool->acquire();
          auto c = pool->acquire();
          a->compress(payload(1000, 1), out);
          c->compress(payload(1000, 2), out);
        }
        pool->compress(payload(5000, 3), out);
        pool->trim();
        pool->compress(payload(5000, 4), out);
      },
      [](std::unique_ptr<zs::compressor_pool>& pool) {
        const auto st = pool->stats();
        require(st.idle <= 2, "the pool keeps more idle contexts than max_idle");
        byte_buffer out;
        pool->compress(payload(100, 1), out);
      });
  CHECK(result.surfaced > 2);
}
