#include "pmrkit/byte_buffer.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory_resource>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "buffer_pool_test_resources.hpp"
#include "pmrkit/buffer_pool.hpp"
#include "pmrkit/counting_resource.hpp"

namespace {

using pmrkit::byte_buffer;
using pmrkit::counting_resource;
using pmrkit::test::ledger_resource;

std::vector<std::byte> pattern(std::size_t count, unsigned seed = 1) {
  std::vector<std::byte> bytes(count);
  for (std::size_t i = 0; i < count; ++i)
    bytes[i] = std::byte(static_cast<unsigned char>(seed + i * 7));
  return bytes;
}

bool holds(const byte_buffer& buffer, const std::vector<std::byte>& expected) {
  return buffer.size() == expected.size() &&
         std::equal(buffer.span().begin(), buffer.span().end(), expected.begin());
}

bool all_equal(std::span<const std::byte> bytes, std::byte value) {
  return std::all_of(bytes.begin(), bytes.end(), [value](std::byte b) { return b == value; });
}

// Installs a default resource for one test and restores the previous one.
class default_resource_guard {
 public:
  explicit default_resource_guard(std::pmr::memory_resource* resource)
      : previous_(std::pmr::set_default_resource(resource)) {}
  ~default_resource_guard() { std::pmr::set_default_resource(previous_); }
  default_resource_guard(const default_resource_guard&) = delete;
  default_resource_guard& operator=(const default_resource_guard&) = delete;

 private:
  std::pmr::memory_resource* previous_;
};

// Every test checks the same three things at the end: nothing in use, nothing freed with the
// wrong size or alignment, nothing asked for with another alignment.
struct accounting {
  ledger_resource ledger;
  counting_resource counting{&ledger};

  void require_all_returned() const {
    CHECK(counting.stats().bytes_in_use == 0);
    CHECK(ledger.blocks_in_use() == 0);
    CHECK(ledger.mismatched_frees() == 0);
    CHECK(ledger.unexpected_alignments() == 0);
  }
};

}  // namespace

TEST_CASE("a default-constructed buffer has no storage and allocates nothing", "[byte_buffer]") {
  accounting a;
  default_resource_guard guard(&a.counting);
  {
    byte_buffer buffer;
    CHECK(buffer.empty());
    CHECK(buffer.data() == nullptr);
    CHECK(buffer.capacity() == 0);
    CHECK(buffer.spare().empty());
    CHECK(buffer.pool() == nullptr);
    CHECK(buffer.resource() == &a.counting);
  }
  CHECK(a.counting.stats().allocations == 0);
}

TEST_CASE("a default-constructed buffer frees to the default resource it grew from",
          "[byte_buffer]") {
  // The default may change while the buffer lives; the block must still go back where it came
  // from.
  accounting first;
  accounting second;
  std::pmr::memory_resource* previous = std::pmr::set_default_resource(&first.counting);
  byte_buffer buffer;
  buffer.append(pattern(100).data(), 100);
  std::pmr::set_default_resource(&second.counting);
  buffer.append(pattern(1000).data(), 1000);  // grows: from the resource it is bound to
  CHECK(buffer.resource() == &first.counting);
  buffer.reset();
  std::pmr::set_default_resource(previous);

  CHECK(first.counting.stats().allocations == 2);
  CHECK(second.counting.stats().allocations == 0);
  CHECK(second.counting.stats().deallocations == 0);
  first.require_all_returned();
}

TEST_CASE("make_standalone allocates exactly once and frees on destruction", "[byte_buffer]") {
  accounting a;
  {
    auto buffer = byte_buffer::make_standalone(&a.counting, 1000);
    CHECK(buffer.size() == 0);
    CHECK(buffer.capacity() >= 1000);
    CHECK(buffer.pool() == nullptr);
    CHECK(buffer.resource() == &a.counting);
    CHECK(reinterpret_cast<std::uintptr_t>(buffer.data()) % byte_buffer::alignment == 0);
    CHECK(a.counting.stats().allocations == 1);
    CHECK(a.counting.stats().bytes_in_use == buffer.capacity());
  }
  a.require_all_returned();

  auto empty = byte_buffer::make_standalone(&a.counting, 0);
  CHECK(empty.data() == nullptr);
  CHECK(a.counting.stats().allocations == 1);
}

TEST_CASE("append grows geometrically and keeps the contents", "[byte_buffer]") {
  accounting a;
  {
    byte_buffer buffer(&a.counting);
    const auto expected = pattern(10000);
    for (const std::byte b : expected) buffer.append(&b, 1);
    CHECK(holds(buffer, expected));
    // One byte at a time must not reallocate per byte: doubling needs about log2(10000).
    CHECK(a.counting.stats().allocations <= 16);
    CHECK(a.counting.stats().bytes_in_use == buffer.capacity());
    CHECK(reinterpret_cast<std::uintptr_t>(buffer.data()) % byte_buffer::alignment == 0);
  }
  a.require_all_returned();
}

TEST_CASE("append of the buffer's own bytes survives the growth it causes", "[byte_buffer]") {
  accounting a;
  {
    auto buffer = byte_buffer::make_standalone(&a.counting, 64);
    const auto first = pattern(64);
    buffer.append(first);
    REQUIRE(buffer.size() == buffer.capacity());  // so the next append must grow
    buffer.append(buffer.span());
    buffer.append(buffer.span().subspan(10, 20));

    auto expected = first;
    expected.insert(expected.end(), first.begin(), first.end());
    expected.insert(expected.end(), expected.begin() + 10, expected.begin() + 30);
    CHECK(holds(buffer, expected));
  }
  a.require_all_returned();
}

TEST_CASE("spare() and commit() write past size() without a copy", "[byte_buffer]") {
  accounting a;
  auto buffer = byte_buffer::make_standalone(&a.counting, 128);
  buffer.append("head", 4);
  const auto spare = buffer.spare();
  CHECK(spare.data() == buffer.data() + 4);
  CHECK(spare.size() == buffer.capacity() - 4);

  std::memcpy(spare.data(), "tail", 4);
  buffer.commit(4);
  CHECK(buffer.size() == 8);
  CHECK(std::memcmp(buffer.data(), "headtail", 8) == 0);

  const std::size_t size_before = buffer.size();
  const std::size_t room = buffer.capacity() - buffer.size();
  CHECK_THROWS_AS(buffer.commit(room + 1), std::length_error);
  CHECK_THROWS_WITH(buffer.commit(room + 1), Catch::Contains(std::to_string(room)));
  CHECK(buffer.size() == size_before);
  buffer.commit(room);
  CHECK(buffer.size() == buffer.capacity());
  CHECK(buffer.spare().empty());
}

TEST_CASE("resize zero-fills the bytes it adds, even over old contents", "[byte_buffer]") {
  accounting a;
  auto buffer = byte_buffer::make_standalone(&a.counting, 256);
  buffer.resize_for_overwrite(buffer.capacity());
  std::memset(buffer.data(), 0xAB, buffer.size());
  buffer.resize(100);
  CHECK(buffer.size() == 100);
  CHECK(all_equal(buffer.span(), std::byte{0xAB}));  // shrinking keeps what is left

  buffer.resize(256);
  CHECK(all_equal(buffer.span().first(100), std::byte{0xAB}));
  CHECK(all_equal(buffer.span().subspan(100), std::byte{0}));

  buffer.resize(5000);  // grows: the copied part is kept, the rest is zero
  CHECK(buffer.size() == 5000);
  CHECK(all_equal(buffer.span().first(100), std::byte{0xAB}));
  CHECK(all_equal(buffer.span().subspan(100), std::byte{0}));
}

TEST_CASE("resize_for_overwrite leaves the bytes as they are", "[byte_buffer]") {
  accounting a;
  auto buffer = byte_buffer::make_standalone(&a.counting, 256);
  const std::size_t capacity = buffer.capacity();
  buffer.resize_for_overwrite(capacity);
  std::memset(buffer.data(), 0xCD, capacity);
  buffer.clear();
  CHECK(buffer.capacity() == capacity);
  buffer.resize_for_overwrite(capacity);
  CHECK(all_equal(buffer.span(), std::byte{0xCD}));  // not zeroed: that is the point
  CHECK(a.counting.stats().allocations == 1);
}

TEST_CASE("moving a buffer moves its storage and leaves the source empty", "[byte_buffer]") {
  accounting a;
  {
    auto source = byte_buffer::make_standalone(&a.counting, 100);
    const auto contents = pattern(100);
    source.append(contents);
    std::byte* const storage = source.data();

    byte_buffer moved(std::move(source));
    CHECK(moved.data() == storage);
    CHECK(holds(moved, contents));
    CHECK(source.data() == nullptr);  // NOLINT(bugprone-use-after-move): defined state
    CHECK(source.size() == 0);
    CHECK(source.capacity() == 0);

    auto target = byte_buffer::make_standalone(&a.counting, 50);
    CHECK(a.counting.stats().blocks_in_use() == 2);
    target = std::move(moved);  // frees the target's own block first
    CHECK(a.counting.stats().blocks_in_use() == 1);
    CHECK(target.data() == storage);
    CHECK(holds(target, contents));

    byte_buffer& alias = target;
    target = std::move(alias);  // self-move keeps everything
    CHECK(target.data() == storage);
    CHECK(holds(target, contents));
  }
  a.require_all_returned();
}

TEST_CASE("reset frees now and the buffer stays bound to its resource", "[byte_buffer]") {
  accounting a;
  auto buffer = byte_buffer::make_standalone(&a.counting, 300);
  buffer.append(pattern(10));
  buffer.reset();
  CHECK(buffer.data() == nullptr);
  CHECK(buffer.size() == 0);
  CHECK(buffer.capacity() == 0);
  CHECK(buffer.resource() == &a.counting);
  a.require_all_returned();

  buffer.append(pattern(10));
  CHECK(a.counting.stats().allocations == 2);
  buffer.reset();
  a.require_all_returned();
}

TEST_CASE("clear keeps the storage", "[byte_buffer]") {
  accounting a;
  auto buffer = byte_buffer::make_standalone(&a.counting, 300);
  buffer.append(pattern(200));
  std::byte* const storage = buffer.data();
  buffer.clear();
  CHECK(buffer.empty());
  CHECK(buffer.data() == storage);
  buffer.append(pattern(200));
  CHECK(a.counting.stats().allocations == 1);
}

TEST_CASE("a failed growth leaves the buffer unchanged and leaks nothing", "[byte_buffer]") {
  accounting a;
  {
    auto buffer = byte_buffer::make_standalone(&a.counting, 100);
    const auto contents = pattern(100);
    buffer.append(contents);
    std::byte* const storage = buffer.data();
    const std::size_t capacity = buffer.capacity();
    const auto before = a.counting.stats();

    a.ledger.fail_above(capacity);
    CHECK_THROWS_AS(buffer.reserve(capacity + 1), std::bad_alloc);
    CHECK_THROWS_AS(buffer.append(contents), std::bad_alloc);
    CHECK_THROWS_AS(buffer.resize(capacity * 4), std::bad_alloc);
    CHECK_THROWS_AS(buffer.resize_for_overwrite(capacity * 4), std::bad_alloc);
    CHECK(a.ledger.failed_allocations() == 4);

    CHECK(buffer.data() == storage);
    CHECK(buffer.capacity() == capacity);
    CHECK(holds(buffer, contents));
    CHECK(a.counting.stats().bytes_in_use == before.bytes_in_use);

    a.ledger.stop_failing();
    buffer.append(contents);  // and it still works afterwards
    auto doubled = contents;
    doubled.insert(doubled.end(), contents.begin(), contents.end());
    CHECK(holds(buffer, doubled));
  }
  a.require_all_returned();
}

TEST_CASE("sizes beyond what a buffer can hold are length errors, not allocations",
          "[byte_buffer]") {
  accounting a;
  auto buffer = byte_buffer::make_standalone(&a.counting, 16);
  buffer.append("x", 1);
  constexpr std::size_t huge = std::numeric_limits<std::size_t>::max();
  CHECK_THROWS_AS(buffer.reserve(huge), std::length_error);
  CHECK_THROWS_AS(buffer.resize(huge), std::length_error);
  CHECK_THROWS_AS(buffer.append(buffer.data(), huge), std::length_error);
  CHECK_THROWS_WITH(buffer.append(buffer.data(), huge), Catch::Contains("largest buffer size"));
  // Each names the call that asked, and the size it asked for.
  // Appended, not "(" + ...: GCC 12 at -O3 reports a false -Wrestrict on that form.
  std::string asked = "(";
  asked += std::to_string(huge);
  asked += "): more than the largest buffer size";
  CHECK_THROWS_WITH(buffer.reserve(huge), Catch::Contains("::reserve" + asked));
  CHECK_THROWS_WITH(buffer.resize(huge), Catch::Contains("::resize" + asked));
  CHECK_THROWS_WITH(buffer.resize_for_overwrite(huge),
                    Catch::Contains("::resize_for_overwrite" + asked));
  CHECK(buffer.size() == 1);
  CHECK(a.counting.stats().allocations == 1);
}

TEST_CASE("copy_with_room copies into new storage from the same source and leaves the original",
          "[byte_buffer]") {
  accounting a;
  {
    auto buffer = byte_buffer::make_standalone(&a.counting, 100);
    const auto contents = pattern(100);
    buffer.append(contents);
    std::byte* const storage = buffer.data();
    byte_buffer copy = buffer.copy_with_room(50);
    CHECK(holds(copy, contents));
    CHECK(copy.capacity() >= 150);
    CHECK(copy.data() != storage);
    CHECK(copy.resource() == &a.counting);
    CHECK(copy.pool() == nullptr);
    CHECK(buffer.data() == storage);  // the original as it was
    CHECK(buffer.capacity() == 100);
    CHECK(holds(buffer, contents));
    // Exactly the room asked for: a decompressor sizes its output by its limit, and the copy
    // must not grow past it.
    CHECK(copy.capacity() == 150);
    CHECK(copy.copy_with_room(0).capacity() == 100);

    constexpr std::size_t huge = std::numeric_limits<std::size_t>::max();
    CHECK_THROWS_WITH(buffer.copy_with_room(huge), Catch::Contains("largest buffer size"));
    a.ledger.fail_above(0);
    CHECK_THROWS_AS(buffer.copy_with_room(1), std::bad_alloc);
    a.ledger.stop_failing();
    CHECK(holds(buffer, contents));
  }
  {
    pmrkit::buffer_pool pool(&a.counting);
    byte_buffer pooled = pool.acquire(64);
    pooled.append("abc", 3);
    byte_buffer copy = pooled.copy_with_room(1000);
    CHECK(copy.pool() == &pool);  // goes back to the pool it came from
    CHECK(copy.capacity() >= 1003);
    CHECK(std::memcmp(copy.data(), "abc", 3) == 0);
  }
  a.require_all_returned();
}

TEST_CASE("span() views exactly the contents", "[byte_buffer]") {
  accounting a;
  auto buffer = byte_buffer::make_standalone(&a.counting, 64);
  buffer.append("abc", 3);
  const byte_buffer& view = buffer;
  CHECK(view.span().data() == buffer.data());
  CHECK(view.span().size() == 3);
  CHECK(buffer.span().size() == 3);
  buffer.span()[1] = std::byte{'X'};
  CHECK(std::memcmp(view.data(), "aXc", 3) == 0);
}
