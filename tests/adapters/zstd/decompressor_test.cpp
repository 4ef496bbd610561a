// decompressor: the output limit holds before anything is allocated for a frame that declares
// too much, and while streaming a frame that does not declare its size; corrupt, truncated and
// foreign input is rejected; a failed call leaves the destination as it was; the context's
// memory comes from the resource and all of it goes back.
#include <zstd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "pmrkit/counting_resource.hpp"
#include "pmrkit/zstd/compressor.hpp"
#include "pmrkit/zstd/decompressor.hpp"
#include "pmrkit/zstd/errors.hpp"
#include "zstd_test_support.hpp"

namespace {

using pmrkit::zstd::compressor;
using pmrkit::zstd::corrupt_frame;
using pmrkit::zstd::decompressor;
using pmrkit::zstd::output_limit_exceeded;
using bytes = std::vector<std::byte>;

bytes frame_with_size(const bytes& input, bool checksum = false) {
  compressor c(std::pmr::new_delete_resource(), {.checksum = checksum});
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  c.compress(input, out);
  return {out.data(), out.data() + out.size()};
}

// A frame whose header does not declare its content size, as a streaming compressor writes
// it. Input is fed in two steps so zstd cannot learn the size and shrink the window.
bytes frame_without_size(const bytes& input, int window_log = 20) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
  ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, window_log);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  bytes out(ZSTD_compressBound(input.size()) + 1024);
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  const std::size_t half = input.size() / 2;
  ZSTD_inBuffer first{input.data(), half, 0};
  ZSTD_compressStream2(c, &o, &first, ZSTD_e_continue);
  ZSTD_inBuffer rest{input.data() + half, input.size() - half, 0};
  while (ZSTD_compressStream2(c, &o, &rest, ZSTD_e_end) != 0) {
  }
  ZSTD_freeCCtx(c);
  out.resize(o.pos);
  REQUIRE(ZSTD_getFrameContentSize(out.data(), out.size()) == ZSTD_CONTENTSIZE_UNKNOWN);
  return out;
}

bytes contents(const pmrkit::byte_buffer& b) { return {b.data(), b.data() + b.size()}; }

}  // namespace

TEST_CASE("frames with and without a declared size decompress", "[zstd][decompressor]") {
  decompressor d;
  for (std::size_t size : {0u, 1u, 1000u, 200000u, 1500000u}) {
    INFO("size " << size);
    const bytes input = pmrkit::zstd::test::payload(size);
    pmrkit::byte_buffer out(std::pmr::new_delete_resource());
    CHECK(d.decompress(frame_with_size(input), out) == size);
    CHECK(contents(out) == input);
    if (size == 0) continue;
    out.clear();
    CHECK(d.decompress(frame_without_size(input), out) == size);
    CHECK(contents(out) == input);
  }
}

TEST_CASE("output exactly at the limit is accepted; one byte more is not",
          "[zstd][decompressor]") {
  const bytes input = pmrkit::zstd::test::payload(70'000);
  decompressor d(std::pmr::new_delete_resource(), {.max_output_bytes = 70'000});
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  CHECK(d.decompress(frame_with_size(input), out) == 70'000);
  out.clear();
  CHECK(d.decompress(frame_without_size(input), out) == 70'000);
  out.clear();
  CHECK_THROWS_AS(d.decompress(frame_with_size(input), out, 69'999), output_limit_exceeded);
  CHECK_THROWS_AS(d.decompress(frame_without_size(input), out, 69'999), output_limit_exceeded);
  CHECK(out.empty());
}

TEST_CASE("a frame declaring more than the limit is refused before any allocation",
          "[zstd][decompressor]") {
  const bytes big = frame_with_size(pmrkit::zstd::test::payload(4 * 1024 * 1024));
  // Every allocation counts: the output buffer's and the decompressor's own (its context).
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  decompressor d(&counted, {.max_output_bytes = 64 * 1024});
  pmrkit::byte_buffer out(&counted);
  out.append("keep", 4);
  const auto before = counted.stats();
  try {
    d.decompress(big, out);
    FAIL("accepted");
  } catch (const output_limit_exceeded& e) {
    CHECK(std::string(e.what()).find("declares 4194304") != std::string::npos);
  }
  CHECK(counted.stats().allocations == before.allocations);
  CHECK(counted.stats().bytes_allocated == before.bytes_allocated);
  CHECK(contents(out) == bytes{std::byte{'k'}, std::byte{'e'}, std::byte{'e'}, std::byte{'p'}});
}

TEST_CASE("a frame declaring more than the limit is refused though another declares nothing",
          "[zstd][decompressor]") {
  // With one frame of unknown size the total was unknown, so the declared 4 MiB went unchecked
  // into the streaming count, and zstd allocated its window for it.
  bytes input = frame_with_size(pmrkit::zstd::test::payload(4 * 1024 * 1024));
  const bytes small = frame_without_size(pmrkit::zstd::test::payload(100), 10);
  input.insert(input.end(), small.begin(), small.end());
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  decompressor d(&counted);
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  const auto before = counted.stats();
  CHECK_THROWS_WITH(d.decompress(input, out, 64 * 1024),
                    Catch::Matchers::Contains("declares 4194304"));
  CHECK(counted.stats().bytes_allocated == before.bytes_allocated);
  CHECK(out.size() == 0);
}

TEST_CASE("a streamed frame producing more than the limit stops there", "[zstd][decompressor]") {
  const bytes big = frame_without_size(pmrkit::zstd::test::payload(4 * 1024 * 1024));
  pmrkit::counting_resource buffers(std::pmr::new_delete_resource());
  constexpr std::size_t limit = 256 * 1024;
  decompressor d(std::pmr::new_delete_resource(), {.max_output_bytes = limit});
  pmrkit::byte_buffer out(&buffers);
  CHECK_THROWS_AS(d.decompress(big, out), output_limit_exceeded);
  CHECK(out.empty());
  // Counted in a scratch block before the destination is touched: nothing is allocated for it.
  CHECK(out.capacity() == 0);
  CHECK(buffers.stats().bytes_allocated == 0);
}

// The default limit, 64 MiB, is a power of two: with such a limit, growing the buffer one
// doubling past it just to see whether more output comes would cost about three times the limit
// at the peak (the full buffer and its successor at once). The scaled-down limit shows the same.
TEST_CASE("a streamed bomb at a power-of-two limit costs no more than the limit",
          "[zstd][decompressor]") {
  constexpr std::size_t limit = 1 << 20;
  constexpr std::size_t slack = 64 * 1024;
  decompressor d(std::pmr::new_delete_resource(), {.max_output_bytes = limit});
  const bytes bomb = frame_without_size(bytes(16 * limit));  // zeros: 16 MiB from a few KiB
  {
    pmrkit::counting_resource buffers(std::pmr::new_delete_resource());
    pmrkit::byte_buffer out(&buffers);
    CHECK_THROWS_AS(d.decompress(bomb, out), output_limit_exceeded);
    CHECK(out.empty());
    CHECK(buffers.stats().peak_bytes_in_use <= limit + slack);
  }
  // Output of exactly the limit is accepted, in no more room than it needs either.
  const bytes exact = pmrkit::zstd::test::payload(limit);
  pmrkit::counting_resource buffers(std::pmr::new_delete_resource());
  pmrkit::byte_buffer out(&buffers);
  CHECK(d.decompress(frame_without_size(exact), out) == limit);
  CHECK(contents(out) == exact);
  CHECK(buffers.stats().peak_bytes_in_use <= limit + slack);
}

TEST_CASE("a failed call leaves the destination's storage as it was, capacity included",
          "[zstd][decompressor]") {
  const bytes input = pmrkit::zstd::test::payload(200'000);
  bytes damaged_sized = frame_with_size(input, true);  // the checksum finds the damage
  damaged_sized[damaged_sized.size() / 2] ^= std::byte{0x5A};
  const bytes streamed = frame_without_size(input);
  const bytes truncated_streamed(streamed.begin(), streamed.begin() + streamed.size() / 2);
  const bytes too_long = frame_without_size(pmrkit::zstd::test::payload(300'000));
  decompressor d(std::pmr::new_delete_resource(), {.max_output_bytes = 250'000});
  for (const bytes& source : {damaged_sized, truncated_streamed, too_long}) {
    pmrkit::byte_buffer out(std::pmr::new_delete_resource());
    out.append("keep", 4);
    const std::byte* const storage = out.data();
    const std::size_t capacity = out.capacity();
    CHECK_THROWS_AS(d.decompress(source, out), pmrkit::zstd::error);
    CHECK(out.data() == storage);
    CHECK(out.capacity() == capacity);
    CHECK(contents(out) == bytes{std::byte{'k'}, std::byte{'e'}, std::byte{'e'}, std::byte{'p'}});
  }
}

TEST_CASE("corrupt, truncated and foreign input is rejected", "[zstd][decompressor]") {
  decompressor d;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  CHECK_THROWS_AS(d.decompress({}, out), corrupt_frame);
  CHECK_THROWS_AS(d.decompress(pmrkit::zstd::test::random_bytes(1000), out), corrupt_frame);

  const bytes input = pmrkit::zstd::test::payload(20'000);
  for (const bytes& frame : {frame_with_size(input, true), frame_without_size(input)}) {
    for (std::size_t n = 0; n < frame.size(); n += (n < 64 ? 1 : 97)) {
      INFO("truncated to " << n << " of " << frame.size());
      CHECK_THROWS_AS(d.decompress({frame.data(), n}, out), corrupt_frame);
    }
    bytes damaged = frame;
    damaged[damaged.size() / 2] ^= std::byte{0x5A};
    CHECK_THROWS_AS(d.decompress(damaged, out), corrupt_frame);
    bytes trailing = frame;
    trailing.push_back(std::byte{0x01});
    CHECK_THROWS_AS(d.decompress(trailing, out), corrupt_frame);
  }
  CHECK(out.empty());
}

TEST_CASE("a frame producing more than it declares is rejected", "[zstd][decompressor]") {
  bytes frame = frame_with_size(pmrkit::zstd::test::payload(1000));
  // Frame header: magic (4), descriptor (1); a 1000-byte single-segment frame stores its size
  // in 2 bytes as size - 256.
  const auto descriptor = static_cast<unsigned>(frame[4]);
  REQUIRE((descriptor >> 6) == 1);
  REQUIRE(((descriptor >> 5) & 1) == 1);
  frame[5] = std::byte{(500 - 256) & 0xFF};
  frame[6] = std::byte{(500 - 256) >> 8};
  decompressor d;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  CHECK_THROWS_AS(d.decompress(frame, out), corrupt_frame);
  CHECK(out.empty());
}

TEST_CASE("a window beyond max_window_log is refused", "[zstd][decompressor]") {
  const bytes frame = frame_without_size(pmrkit::zstd::test::payload(100'000), 24);
  decompressor strict(std::pmr::new_delete_resource(), {.max_window_log = 20});
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  try {
    strict.decompress(frame, out);
    FAIL("accepted");
  } catch (const corrupt_frame& e) {
    CHECK(std::string(e.what()).find("max_window_log") != std::string::npos);
  }
  decompressor lenient(std::pmr::new_delete_resource(), {.max_window_log = 24});
  CHECK(lenient.decompress(frame, out) == 100'000);
  CHECK_THROWS_AS(decompressor(std::pmr::new_delete_resource(), {.max_window_log = 40}),
                  std::invalid_argument);
}

TEST_CASE("a frame that declares its size needs no window, though another frame streams",
          "[zstd][decompressor]") {
  // The declared frame is written in one segment, its window its whole content (20,000 bytes,
  // over this decoder's 1 KiB, and over the 8 KiB a streamed frame is counted in, which libzstd
  // would decode in one go); the other declares nothing and streams through 1 KiB.
  const bytes a = pmrkit::zstd::test::payload(20'000, 1);
  const bytes b = pmrkit::zstd::test::payload(100, 2);
  bytes input = frame_with_size(a);
  const bytes streamed = frame_without_size(b, 10);
  input.insert(input.end(), streamed.begin(), streamed.end());
  decompressor d(std::pmr::new_delete_resource(), {.max_window_log = 10});
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  CHECK(d.decompress(frame_with_size(a), out) == a.size());  // alone, as documented
  out.clear();
  // With the streamed frame after it, the whole input was streamed, and the first frame's
  // window refused.
  CHECK(d.decompress(input, out) == a.size() + b.size());
  bytes expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  CHECK(contents(out) == expected);
  // The limit still counts both.
  out.clear();
  CHECK_THROWS_AS(d.decompress(input, out, a.size() + b.size() - 1), output_limit_exceeded);
  CHECK(out.empty());
}

TEST_CASE("a resource's own exception reaches the caller of the decompressor",
          "[zstd][decompressor]") {
  // libzstd's allocator interface is C: what the resource threw was lost, and a bare
  // std::bad_alloc thrown instead.
  class quota_resource : public std::pmr::memory_resource {
   public:
    explicit quota_resource(std::size_t quota) : left_(quota) {}

   private:
    void* do_allocate(std::size_t bytes, std::size_t alignment) override {
      if (bytes > left_) throw std::runtime_error("quota: " + std::to_string(bytes) + " asked");
      left_ -= bytes;
      return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    }
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
      left_ += bytes;
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    }
    bool do_is_equal(const memory_resource& other) const noexcept override {
      return this == &other;
    }
    std::size_t left_;
  };
  // Room for the decompressor's bookkeeping, not for libzstd's context.
  quota_resource tiny(1024);
  CHECK_THROWS_WITH(decompressor(&tiny), Catch::Matchers::StartsWith("quota: "));
  // Room for the context, not for a 1 MiB window.
  quota_resource small(512 * 1024);
  decompressor d(&small);
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  const bytes frame = frame_without_size(pmrkit::zstd::test::payload(3'000'000), 20);
  CHECK_THROWS_WITH(d.decompress(frame, out), Catch::Matchers::StartsWith("quota: "));
  CHECK(out.empty());
  // A decompressor that failed is still usable.
  CHECK(d.decompress(frame_with_size(pmrkit::zstd::test::payload(1000)), out) == 1000);
}

TEST_CASE("several frames, skippable ones included, decompress in order",
          "[zstd][decompressor]") {
  const bytes a = pmrkit::zstd::test::payload(5000, 1);
  const bytes b = pmrkit::zstd::test::payload(7000, 2);
  bytes input = frame_with_size(a);
  const bytes skippable = {std::byte{0x50}, std::byte{0x2A}, std::byte{0x4D}, std::byte{0x18},
                           std::byte{3},    std::byte{0},    std::byte{0},    std::byte{0},
                           std::byte{9},    std::byte{9},    std::byte{9}};
  input.insert(input.end(), skippable.begin(), skippable.end());
  const bytes fb = frame_with_size(b);
  input.insert(input.end(), fb.begin(), fb.end());
  bytes expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  decompressor d;
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  CHECK(d.decompress(input, out) == expected.size());
  CHECK(contents(out) == expected);
  // The same with the second frame streamed: the whole input goes the streaming way.
  input.resize(input.size() - fb.size());
  const bytes fb2 = frame_without_size(b);
  input.insert(input.end(), fb2.begin(), fb2.end());
  out.clear();
  CHECK(d.decompress(input, out) == expected.size());
  CHECK(contents(out) == expected);
}

TEST_CASE("move assignment frees the old context once and keeps the new one whole",
          "[zstd][decompressor][move]") {
  pmrkit::counting_resource first(std::pmr::new_delete_resource());
  pmrkit::counting_resource second(std::pmr::new_delete_resource());
  const auto input = pmrkit::zstd::test::payload(5000);
  const auto frame = frame_without_size(input, 20);
  const auto decompresses = [&](decompressor& d) {
    pmrkit::byte_buffer out(std::pmr::new_delete_resource());
    d.decompress(frame, out);
    return std::equal(out.span().begin(), out.span().end(), input.begin(), input.end());
  };
  {
    decompressor target(&first, {.max_window_log = 20});
    decompressor source(&second, {.max_window_log = 21});
    CHECK(decompresses(target));  // the context holds a window now
    target = std::move(source);  // over a live object
    CHECK(first.stats().bytes_in_use == 0);
    CHECK(first.stats().blocks_in_use() == 0);
    CHECK(target.options().max_window_log == 21);
    CHECK(source.memory_bytes() == 0);  // NOLINT(bugprone-use-after-move)
    CHECK(decompresses(target));
    CHECK(second.stats().bytes_in_use == target.memory_bytes());

    decompressor& same = target;
    target = std::move(same);  // self-move: a no-op
    CHECK(decompresses(target));

    source = std::move(target);  // into a moved-from object, and back
    target = std::move(source);
    CHECK(decompresses(target));
  }
  CHECK(first.stats().deallocations == first.stats().allocations);
  CHECK(second.stats().deallocations == second.stats().allocations);
  CHECK(second.stats().bytes_in_use == 0);
}

TEST_CASE("the context's memory comes from the resource and all goes back",
          "[zstd][decompressor]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    decompressor d(&counted, {.max_window_log = 20});
    CHECK(counted.stats().bytes_in_use == d.memory_bytes());
    pmrkit::byte_buffer out(std::pmr::new_delete_resource());
    d.decompress(frame_without_size(pmrkit::zstd::test::payload(3'000'000), 20), out);
    CHECK(counted.stats().bytes_in_use == d.memory_bytes());
    // The streaming window is bounded by max_window_log (2^20) plus zstd's block buffers.
    CHECK(d.memory_bytes() < (1u << 20) + 512 * 1024);
    decompressor moved(std::move(d));
    CHECK(counted.stats().bytes_in_use == moved.memory_bytes());
  }
  CHECK(counted.stats().bytes_in_use == 0);
  CHECK(counted.stats().blocks_in_use() == 0);
}

TEST_CASE("a frame of a format from before zstd 1.0 is refused", "[zstd][decompressor]") {
  // libzstd still reads the legacy formats, with a window from plain malloc: this 17-byte v0.7
  // frame (5 bytes of content, no declared size) made a decompressor hold 128 MiB outside its
  // resource until it was destroyed.
  const bytes legacy = [] {
    const unsigned char raw[] = {0x27, 0xB5, 0x2F, 0xFD, 0x00, 0x88, 0x40, 0x00, 0x05,
                                 'h',  'e',  'l',  'l',  'o',  0xC0, 0x00, 0x00};
    bytes out(sizeof raw);
    std::memcpy(out.data(), raw, sizeof raw);
    return out;
  }();
  REQUIRE(ZSTD_findFrameCompressedSize(legacy.data(), legacy.size()) == legacy.size());
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  decompressor d(&counted);
  pmrkit::byte_buffer out(std::pmr::new_delete_resource());
  try {
    d.decompress(legacy, out);
    FAIL("accepted");
  } catch (const corrupt_frame& e) {
    CHECK_THAT(e.what(), Catch::Contains("at byte 0 is not a zstd frame") &&
                             Catch::Contains("before zstd 1.0"));
  }
  // After a valid frame, the same.
  bytes both = frame_with_size(pmrkit::zstd::test::payload(100));
  const std::size_t legacy_at = both.size();
  both.insert(both.end(), legacy.begin(), legacy.end());
  try {
    d.decompress(both, out);
    FAIL("accepted");
  } catch (const corrupt_frame& e) {
    CHECK_THAT(e.what(), Catch::Contains("at byte " + std::to_string(legacy_at)));
  }
  CHECK(out.empty());
}
