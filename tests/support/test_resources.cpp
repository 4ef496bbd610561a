#include "test_resources.hpp"

#include <catch2/catch.hpp>
#include <new>
#include <vector>

namespace pmrkit::test {

void* failing_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (succeeded_ >= allowed_) {
    ++failures_;
    throw std::bad_alloc();
  }
  void* p = upstream_->allocate(bytes, alignment);
  ++succeeded_;
  return p;
}

namespace {
unsigned char pattern_byte(std::uint64_t seed, std::size_t i) noexcept {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  return static_cast<unsigned char>(x ^ (x >> 17));
}
}  // namespace

void fill_pattern(void* p, std::size_t bytes, std::uint64_t seed) noexcept {
  auto* b = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) b[i] = pattern_byte(seed, i);
}

bool check_pattern(const void* p, std::size_t bytes, std::uint64_t seed) noexcept {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i)
    if (b[i] != pattern_byte(seed, i)) return false;
  return true;
}

void check_alignment_and_overlap(std::pmr::memory_resource& r,
                                 std::initializer_list<std::size_t> sizes,
                                 std::size_t max_alignment) {
  struct block {
    void* p;
    std::size_t bytes, alignment;
  };
  std::vector<block> live;
  for (std::size_t alignment = 1; alignment <= max_alignment; alignment *= 2)
    for (std::size_t bytes : sizes) {
      CAPTURE(bytes, alignment);
      void* p = r.allocate(bytes, alignment);
      REQUIRE(is_aligned(p, alignment));
      fill_pattern(p, bytes, live.size());
      live.push_back({p, bytes, alignment});
    }
  for (std::size_t i = 0; i < live.size(); ++i) {
    CAPTURE(live[i].bytes, live[i].alignment);
    CHECK(check_pattern(live[i].p, live[i].bytes, i));
    r.deallocate(live[i].p, live[i].bytes, live[i].alignment);
  }
}

void check_usable(std::pmr::memory_resource& r, std::size_t bytes, std::size_t alignment) {
  void* p = r.allocate(bytes, alignment);
  CHECK(is_aligned(p, alignment));
  fill_pattern(p, bytes, bytes);
  CHECK(check_pattern(p, bytes, bytes));
  r.deallocate(p, bytes, alignment);
}

}  // namespace pmrkit::test
