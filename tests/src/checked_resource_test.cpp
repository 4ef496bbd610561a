// checked_resource: each violation it must catch, the state it leaves behind after reporting
// one (on_error=throw), the abort path (in a child process), leak reports, the quarantine, the
// statistics, and that every byte goes back to upstream.
#include "pmrkit/checked_resource.hpp"

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "child_process.hpp"
#include "pmrkit/counting_resource.hpp"
#include "pmrkit/registry.hpp"
#include "test_resources.hpp"

using Catch::Matchers::Contains;
using pmrkit::allocation_error;
using pmrkit::allocation_violation;
using pmrkit::checked_options;
using pmrkit::checked_resource;
using pmrkit::counting_resource;

static_assert(std::is_base_of_v<std::logic_error, allocation_error>);

namespace {

checked_options throwing(std::size_t quarantine_blocks = 1024) {
  checked_options o;
  o.on_error = checked_options::error_action::throw_error;
  o.on_leak = checked_options::leak_action::ignore;
  o.quarantine_blocks = quarantine_blocks;
  return o;
}

// Runs `misuse` and returns the violation it threw (failing the test if it threw nothing
// or something else).
template <class Misuse>
allocation_error caught(Misuse misuse) {
  try {
    misuse();
  } catch (const allocation_error& e) {
    return e;
  }
  FAIL("no allocation_error was thrown");
  throw std::logic_error("unreachable");
}

// The misuse these tests commit on purpose (writing just outside a block, or into a freed
// one) lands in memory the resource owns; reach it through a pointer the compiler cannot
// trace back to allocate(), whose alloc_size attribute would otherwise let UBSan's
// object-size check stop the test before the resource can see what happened.
unsigned char* untracked(void* p) {
  unsigned char* volatile hidden = static_cast<unsigned char*>(p);
  return hidden;
}

bool all_bytes(const void* p, std::size_t n, unsigned char value) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != value) return false;
  return true;
}

struct fixture {
  counting_resource upstream{std::pmr::new_delete_resource()};
};

}  // namespace

TEST_CASE("checked: correct use raises nothing and returns every byte", "[checked]") {
  fixture f;
  {
    checked_resource r(throwing(), &f.upstream);
    std::vector<void*> blocks;
    for (std::size_t bytes : {0u, 1u, 7u, 16u, 100u, 4096u, 70000u})
      for (std::size_t alignment : {1u, 8u, 16u, 64u, 4096u}) {
        void* p = r.allocate(bytes, alignment);
        REQUIRE(pmrkit::test::is_aligned(p, alignment));
        pmrkit::test::fill_pattern(p, bytes, bytes + alignment);
        r.deallocate(p, bytes, alignment);
      }
    std::pmr::vector<std::pmr::string> words(&r);
    for (int i = 0; i < 1000; ++i) words.emplace_back(40, static_cast<char>('a' + i % 26));
    CHECK(words[999] == std::string_view(std::string(40, 'a' + 999 % 26)));
    words = decltype(words)(&r);
    REQUIRE_NOTHROW(r.verify());
    CHECK(r.stats().violations == 0);
    CHECK(r.stats().blocks_in_use == 0);
    CHECK(r.live_blocks().empty());
    CHECK(r.leak_report().empty());
    CHECK(f.upstream.stats().bytes_in_use > 0);  // the quarantine holds some
  }
  CHECK(f.upstream.stats().bytes_in_use == 0);
  CHECK(f.upstream.stats().blocks_in_use() == 0);
}

TEST_CASE("checked: new blocks are filled, so reading before writing shows", "[checked]") {
  checked_resource r(throwing());
  void* p = r.allocate(64, 8);
  CHECK(all_bytes(p, 64, 0xCD));
  r.deallocate(p, 64, 8);
}

TEST_CASE("checked: double free", "[checked]") {
  fixture f;
  checked_resource r(throwing(), &f.upstream);
  void* p = r.allocate(24, 8);
  r.deallocate(p, 24, 8);
  const auto e = caught([&] { r.deallocate(p, 24, 8); });
  CHECK(e.violation() == allocation_violation::double_free);
  CHECK_THAT(e.what(), Contains("double free") && Contains("block #1") && Contains("24 bytes") &&
                           Contains("already freed"));
  CHECK(r.stats().violations == 1);
  CHECK(r.stats().deallocations == 1);
  // The block is still in quarantine, too young to be reused: the next request of its shape
  // gets another block.
  void* q = r.allocate(24, 8);
  CHECK(q != p);
  r.deallocate(q, 24, 8);
}

TEST_CASE("checked: a double free after its shape was allocated again", "[checked]") {
  // Free, allocate the same shape, free the stale pointer again: if the second allocation
  // reused the block, the second free would free its new owner's block without a word.
  fixture f;
  checked_resource r(throwing(), &f.upstream);
  void* p = r.allocate(24, 8);
  r.deallocate(p, 24, 8);
  void* q = r.allocate(24, 8);
  CHECK(q != p);
  CHECK(caught([&] { r.deallocate(p, 24, 8); }).violation() == allocation_violation::double_free);
  CHECK(r.stats().blocks_in_use == 1);  // q is still live
  r.deallocate(q, 24, 8);
}

TEST_CASE("checked: with a quarantine of one block, a stale double free is still caught",
          "[checked]") {
  // Half of one block is none: the freed block was handed out again at once, and the stale
  // free then freed its new owner's block without a word.
  fixture f;
  checked_resource r(throwing(1), &f.upstream);
  void* p = r.allocate(24, 8);
  r.deallocate(p, 24, 8);
  void* q = r.allocate(24, 8);
  CHECK(q != p);
  CHECK(caught([&] { r.deallocate(p, 24, 8); }).violation() == allocation_violation::double_free);
  r.deallocate(q, 24, 8);
}

TEST_CASE("checked: on_error = record keeps a bad free's report and returns", "[checked]") {
  fixture f;
  checked_options o = throwing();
  o.on_error = checked_options::error_action::record;
  checked_resource r(o, &f.upstream);
  CHECK(r.violation_report().empty());
  void* p = r.allocate(24, 8);
  r.deallocate(p, 32, 8);  // wrong size: recorded, the block still live
  CHECK(r.stats().violations == 1);
  CHECK(r.stats().blocks_in_use == 1);
  r.deallocate(p, 24, 8);
  r.deallocate(p, 24, 8);  // double free: recorded
  int stack_value = 0;
  r.deallocate(&stack_value, 4, 4);  // never handed out: recorded
  CHECK(r.stats().violations == 3);
  CHECK(r.stats().blocks_in_use == 0);
  const std::string report = r.violation_report();
  CHECK_THAT(report, Catch::Contains("3 violations recorded") &&
                         Catch::Contains("wrong size") && Catch::Contains("double free") &&
                         Catch::Contains("did not hand out"));
  // allocate() has nothing to return instead: it throws as throw_error does, and its message is
  // kept with the others (a caller's catch (...) may swallow what it threw).
  volatile std::size_t three = 3;  // hidden from clang, which rejects a constant non-power of two
  CHECK(caught([&] { (void)r.allocate(8, three); }).violation() ==
        allocation_violation::bad_alignment);
  CHECK_THAT(r.violation_report(), Catch::Contains("4 violations recorded\n") &&
                                       Catch::Contains("must be a power of two"));
  // Only the first 16 messages are kept; every violation is counted.
  for (int i = 0; i < 20; ++i) r.deallocate(&stack_value, 4, 4);
  CHECK(r.stats().violations == 24);
  CHECK_THAT(r.violation_report(), Catch::Contains("24 violations recorded (the first 16 below)"));
  const std::string all = r.violation_report();  // in the order found
  CHECK(all.find("wrong size") < all.find("double free"));
  CHECK(all.find("double free") < all.find("power of two"));
}

TEST_CASE("checked: a quarantined block is reused once half the quarantine was freed after it",
          "[checked]") {
  fixture f;
  checked_resource r(throwing(8), &f.upstream);
  void* p = r.allocate(24, 8);
  std::vector<void*> others;
  for (int i = 0; i < 4; ++i) others.push_back(r.allocate(16, 8));
  r.deallocate(p, 24, 8);
  for (int i = 0; i < 3; ++i) r.deallocate(others[i], 16, 8);
  void* young = r.allocate(24, 8);  // three frees after p, of a quarantine of eight: too soon
  CHECK(young != p);
  r.deallocate(others[3], 16, 8);  // four after p (the free of `young` comes later)
  void* old = r.allocate(24, 8);
  CHECK(old == p);
  CHECK(r.stats().reused_from_quarantine == 1);
  r.deallocate(old, 24, 8);
  r.deallocate(young, 24, 8);
}

TEST_CASE("checked: double free after the block left the quarantine", "[checked]") {
  checked_resource r(throwing(0));
  void* p = r.allocate(24, 8);
  r.deallocate(p, 24, 8);
  // Returned to upstream at once: it is now a pointer the resource does not know.
  const auto e = caught([&] { r.deallocate(p, 24, 8); });
  CHECK(e.violation() == allocation_violation::unknown_pointer);
  CHECK_THAT(e.what(), Contains("did not hand out"));
}

TEST_CASE("checked: deallocate with the wrong size or alignment", "[checked]") {
  fixture f;
  {
    checked_resource r(throwing(), &f.upstream);
    void* p = r.allocate(24, 16);
    SECTION("size") {
      const auto e = caught([&] { r.deallocate(p, 32, 16); });
      CHECK(e.violation() == allocation_violation::wrong_size);
      CHECK_THAT(e.what(), Contains("deallocate(") && Contains(", 32, 16)") &&
                               Contains("24 bytes, alignment 16") && Contains("still allocated"));
    }
    SECTION("alignment") {
      const auto e = caught([&] { r.deallocate(p, 24, 8); });
      CHECK(e.violation() == allocation_violation::wrong_alignment);
      CHECK_THAT(e.what(), Contains(", 24, 8)"));
    }
    // Nothing changed: the block is live and the right call frees it.
    CHECK(r.stats().blocks_in_use == 1);
    CHECK(r.live_blocks().size() == 1);
    REQUIRE_NOTHROW(r.deallocate(p, 24, 16));
    CHECK(r.stats().blocks_in_use == 0);
  }
  CHECK(f.upstream.stats().bytes_in_use == 0);
}

TEST_CASE("checked: a pointer it never handed out", "[checked]") {
  checked_resource r(throwing());
  long on_stack = 0;
  SECTION("foreign") {
    const auto e = caught([&] { r.deallocate(&on_stack, sizeof on_stack, alignof(long)); });
    CHECK(e.violation() == allocation_violation::unknown_pointer);
  }
  SECTION("inside a block") {
    auto* p = static_cast<char*>(r.allocate(100, 8));
    const auto e = caught([&] { r.deallocate(p + 8, 92, 8); });
    CHECK(e.violation() == allocation_violation::unknown_pointer);
    CHECK_THAT(e.what(), Contains("8 bytes inside block #1"));
    r.deallocate(p, 100, 8);
  }
  SECTION("into a block's guard bytes, before it or after it") {
    auto* first = static_cast<char*>(r.allocate(100, 8));
    auto* second = static_cast<char*>(r.allocate(100, 8));
    for (char* p : {first, second}) {
      const auto before = caught([&] { r.deallocate(p - 4, 100, 8); });
      CHECK(before.violation() == allocation_violation::unknown_pointer);
      CHECK_THAT(before.what(), Contains("into the guard bytes of block #" +
                                         std::to_string(p == first ? 1 : 2)));
      const auto after = caught([&] { r.deallocate(p + 104, 100, 8); });
      CHECK_THAT(after.what(), Contains("into the guard bytes of block #" +
                                        std::to_string(p == first ? 1 : 2)));
    }
    CHECK(r.stats().violations == 4);
    r.deallocate(first, 100, 8);
    r.deallocate(second, 100, 8);
    return;
  }
  CHECK(r.stats().violations == 1);
}

TEST_CASE("checked: writes past the end and before the start", "[checked]") {
  fixture f;
  {
    checked_resource r(throwing(), &f.upstream);
    const std::size_t bytes = GENERATE(0u, 1u, 13u, 64u, 1000u);
    const std::size_t alignment = GENERATE(1u, 8u, 64u);
    CAPTURE(bytes, alignment);
    auto* p = static_cast<unsigned char*>(r.allocate(bytes, alignment));
    SECTION("one byte past the end") {
      untracked(p)[bytes] = 0;
      const auto e = caught([&] { r.deallocate(p, bytes, alignment); });
      CHECK(e.violation() == allocation_violation::overrun);
      CHECK_THAT(e.what(), Contains("past its end") && Contains("the byte 0 past the end"));
    }
    SECTION("the last guard byte") {
      untracked(p)[bytes + 15] = 0;
      CHECK(caught([&] { r.deallocate(p, bytes, alignment); }).violation() ==
            allocation_violation::overrun);
    }
    SECTION("one byte before the start") {
      untracked(p)[-1] = 0x11;
      const auto e = caught([&] { r.deallocate(p, bytes, alignment); });
      CHECK(e.violation() == allocation_violation::underrun);
      CHECK_THAT(e.what(), Contains("before its start") && Contains("0x11"));
    }
    // The damaged block was freed all the same.
    CHECK(r.stats().blocks_in_use == 0);
    CHECK(r.stats().deallocations == 1);
    CHECK(r.stats().quarantined_blocks == 0);
  }
  CHECK(f.upstream.stats().bytes_in_use == 0);
}

TEST_CASE("checked: a write after free", "[checked]") {
  fixture f;
  {
    checked_resource r(throwing(4), &f.upstream);
    auto* p = static_cast<unsigned char*>(r.allocate(48, 8));
    r.deallocate(p, 48, 8);
    untracked(p)[20] = 0x42;  // through a dangling pointer: memory the resource still holds
    SECTION("found when the block is reused") {
      // Reused once half the quarantine (two blocks) was freed after it.
      for (int i = 0; i < 2; ++i) r.deallocate(r.allocate(16, 8), 16, 8);
      const auto e = caught([&] { (void)r.allocate(48, 8); });
      CHECK(e.violation() == allocation_violation::write_after_free);
      CHECK_THAT(e.what(), Contains("after it was freed") && Contains("byte 20 is 0x42") &&
                               Contains("about to be reused"));
      // The damaged block went back to upstream; the next request gets a fresh one.
      void* q = r.allocate(48, 8);
      CHECK(all_bytes(q, 48, 0xCD));
      r.deallocate(q, 48, 8);
    }
    SECTION("found when it leaves the quarantine") {
      std::vector<void*> others;
      for (int i = 0; i < 4; ++i) others.push_back(r.allocate(16, 8));
      for (int i = 0; i < 3; ++i) r.deallocate(others[i], 16, 8);
      // The fourth free pushes the damaged block out.
      const auto e = caught([&] { r.deallocate(others[3], 16, 8); });
      CHECK(e.violation() == allocation_violation::write_after_free);
      CHECK_THAT(e.what(), Contains("left the quarantine"));
      CHECK(r.stats().quarantined_blocks == 4);
      CHECK(r.stats().blocks_in_use == 0);
    }
    SECTION("found by verify()") {
      const auto e = caught([&] { r.verify(); });
      CHECK(e.violation() == allocation_violation::write_after_free);
      CHECK(r.stats().quarantined_blocks == 0);
      REQUIRE_NOTHROW(r.verify());  // reported once: the damaged block is gone
    }
    SECTION("found by flush_quarantine()") {
      CHECK(caught([&] { r.flush_quarantine(); }).violation() ==
            allocation_violation::write_after_free);
      CHECK(r.stats().quarantined_blocks == 0);
    }
    CHECK(r.stats().violations == 1);
  }
  CHECK(f.upstream.stats().bytes_in_use == 0);
}

TEST_CASE("checked: verify() finds an overrun of a live block", "[checked]") {
  checked_resource r(throwing());
  auto* p = static_cast<unsigned char*>(r.allocate(10, 2));
  untracked(p)[10] = 1;
  CHECK(caught([&] { r.verify(); }).violation() == allocation_violation::overrun);
  untracked(p)[10] = 0xFD;  // repaired: now it frees cleanly
  REQUIRE_NOTHROW(r.deallocate(p, 10, 2));
}

TEST_CASE("checked: an alignment that is not a power of two", "[checked]") {
  checked_resource r(throwing());
  volatile std::size_t three = 3;  // hidden from clang, which rejects a constant non-power of two
  const allocation_error e = caught([&] { (void)r.allocate(8, three); });
  CHECK(e.violation() == allocation_violation::bad_alignment);
  CHECK_THAT(e.what(), Contains("allocate(8, 3)"));  // the call as made: no pointer in it
  CHECK(r.stats().allocations == 0);
}

// Hands out addresses `step` bytes apart in one buffer and takes nothing back: a broken
// upstream, which gives a block that overlaps one it gave before (or is the same, for 0).
class overlapping_upstream final : public std::pmr::memory_resource {
 public:
  explicit overlapping_upstream(std::size_t step) : step_(step) {}
  std::size_t returned = 0;

 private:
  void* do_allocate(std::size_t, std::size_t) override { return buffer_ + step_ * given_++; }
  void do_deallocate(void*, std::size_t, std::size_t) override { ++returned; }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
    return this == &o;
  }
  alignas(64) std::byte buffer_[4096];
  std::size_t step_;
  std::size_t given_ = 0;
};

TEST_CASE("checked: an upstream that hands out a block overlapping one it holds", "[checked]") {
  const std::size_t step = GENERATE(0, 16, 64);  // the same address; inside; the guards only
  CAPTURE(step);
  overlapping_upstream upstream(step);
  checked_resource r(throwing(), &upstream);
  void* first = r.allocate(64, 8);  // 16 guard bytes each side: 96 bytes from upstream
  const allocation_error e = caught([&] { (void)r.allocate(64, 8); });
  CHECK(e.violation() == allocation_violation::corrupt_upstream);
  CHECK_THAT(e.what(), Contains("allocate(64, 8)") && Contains("overlapping block #"));
  CHECK(upstream.returned == 1);  // the bad block went back; the first is untouched
  CHECK(r.live_blocks().size() == 1);
  CHECK(all_bytes(first, 64, 0xCD));
  r.deallocate(first, 64, 8);
}

TEST_CASE("checked: blocks live at destruction are listed, and all memory goes back",
          "[checked]") {
  fixture f;
  {
    checked_resource r(throwing(), &f.upstream);
    void* a = r.allocate(8, 8);
    void* b = r.allocate(32, 8);
    void* c = r.allocate(32, 16);
    r.deallocate(b, 32, 8);
    const auto live = r.live_blocks();
    REQUIRE(live.size() == 2);
    CHECK(live[0].address == a);
    CHECK(live[0].serial == 1);
    CHECK(live[1].address == c);
    CHECK(live[1].bytes == 32);
    CHECK(live[1].alignment == 16);
    CHECK(r.leak_report() ==
          "2 blocks (40 bytes) still allocated; sizes: 8 x1 32 x1; the oldest is block #1 (8 "
          "bytes, alignment 8) at " +
              [&] {
                char text[32];
                std::snprintf(text, sizeof text, "%p", a);
                return std::string(text);
              }());
  }
  CHECK(f.upstream.stats().bytes_in_use == 0);
}

TEST_CASE("checked: the quarantine reuses only exact shapes and stays within its bounds",
          "[checked]") {
  fixture f;
  checked_options o = throwing(3);
  o.quarantine_bytes = 1 << 20;
  checked_resource r(o, &f.upstream);
  void* p = r.allocate(100, 8);
  void* spacer = r.allocate(8, 8);
  r.deallocate(p, 100, 8);
  r.deallocate(spacer, 8, 8);  // one free after p: with a quarantine of 3, p may be reused
  void* other_size = r.allocate(101, 8);
  void* other_alignment = r.allocate(100, 16);
  CHECK(other_size != p);
  CHECK(other_alignment != p);
  void* again = r.allocate(100, 8);
  CHECK(again == p);
  CHECK(all_bytes(again, 100, 0xCD));
  CHECK(r.stats().reused_from_quarantine == 1);
  r.deallocate(again, 100, 8);
  r.deallocate(other_size, 101, 8);
  r.deallocate(other_alignment, 100, 16);

  std::vector<void*> many;
  for (int i = 0; i < 10; ++i) many.push_back(r.allocate(200 + i, 8));
  for (int i = 0; i < 10; ++i) r.deallocate(many[i], 200 + i, 8);
  CHECK(r.stats().quarantined_blocks == 3);
  CHECK(f.upstream.stats().blocks_in_use() == 3);
  // A block larger than quarantine_bytes never enters it.
  void* big = r.allocate(2 << 20, 8);
  r.deallocate(big, 2 << 20, 8);
  CHECK(f.upstream.stats().blocks_in_use() == 3);
  // The byte bound.
  checked_options by_bytes = throwing(1000);
  by_bytes.quarantine_bytes = 4096;
  checked_resource small(by_bytes, &f.upstream);
  for (int i = 0; i < 20; ++i) small.deallocate(small.allocate(1000 + i, 8), 1000 + i, 8);
  CHECK(small.stats().quarantined_bytes <= 4096);
  CHECK(small.stats().quarantined_blocks == 3);  // 3 x ~1040 bytes
  r.flush_quarantine();
  CHECK(f.upstream.stats().blocks_in_use() == 3);
}

TEST_CASE("checked: statistics", "[checked]") {
  checked_resource r(throwing());
  void* a = r.allocate(100, 8);
  void* b = r.allocate(50, 8);
  r.deallocate(a, 100, 8);
  void* c = r.allocate(10, 8);
  const auto s = r.stats();
  CHECK(s.allocations == 3);
  CHECK(s.deallocations == 1);
  CHECK(s.blocks_in_use == 2);
  CHECK(s.bytes_in_use == 60);
  CHECK(s.peak_blocks_in_use == 2);
  CHECK(s.peak_bytes_in_use == 150);
  CHECK(s.bytes_allocated == 160);
  CHECK(s.quarantined_blocks == 1);
  // Upstream holds the blocks plus their guards (16 before, 16 after each).
  CHECK(s.upstream_bytes_in_use == 160 + 3 * 32);
  r.deallocate(b, 50, 8);
  r.deallocate(c, 10, 8);
}

TEST_CASE("checked: an upstream that throws std::bad_alloc", "[checked]") {
  fixture f;
  {
    pmrkit::test::failing_resource failing(&f.upstream, 2);
    checked_resource r(throwing(2), &failing);  // a block may be reused after one more free
    void* a = r.allocate(10, 8);
    void* b = r.allocate(10, 8);
    CHECK_THROWS_AS(r.allocate(10, 8), std::bad_alloc);
    CHECK(r.stats().allocations == 2);
    CHECK(r.stats().blocks_in_use == 2);
    CHECK_THROWS_AS(r.allocate(std::size_t(-1) - 8, 8), std::bad_alloc);  // too big to guard
    r.deallocate(a, 10, 8);
    r.deallocate(b, 10, 8);
    CHECK(r.allocate(10, 8) == a);  // served from the quarantine, upstream not asked
    failing.allow_all();
    void* c = r.allocate(20, 8);
    r.deallocate(c, 20, 8);
    r.deallocate(a, 10, 8);
    CHECK(r.stats().violations == 0);
  }
  CHECK(f.upstream.stats().bytes_in_use == 0);
}

TEST_CASE("checked: guard bytes are configurable, including none", "[checked]") {
  checked_options o = throwing();
  o.guard_bytes = 0;
  checked_resource none(o);
  auto* p = static_cast<unsigned char*>(none.allocate(16, 8));
  void* q = none.allocate(0, 8);
  void* q2 = none.allocate(0, 8);
  CHECK(q != q2);  // zero-byte blocks still have distinct addresses
  CHECK(none.stats().upstream_bytes_in_use == 16 + 1 + 1);
  none.deallocate(p, 16, 8);
  none.deallocate(q, 0, 8);
  none.deallocate(q2, 0, 8);
  o.guard_bytes = 4097;
  CHECK_THROWS_AS(checked_resource(o), std::invalid_argument);
  CHECK_THROWS_AS(checked_resource(checked_options{}, nullptr), std::invalid_argument);
}

TEST_CASE("checked: made by name, with its options checked", "[checked][registry]") {
  fixture f;
  {
    auto r = pmrkit::make_resource(
        "checked:on_error=throw,on_leak=ignore,guard=32,quarantine=8,quarantine_bytes=64K",
        &f.upstream);
    auto* checked = dynamic_cast<checked_resource*>(r.get());
    REQUIRE(checked != nullptr);
    CHECK(checked->options().guard_bytes == 32);
    CHECK(checked->options().quarantine_blocks == 8);
    CHECK(checked->options().quarantine_bytes == 64 * 1024);
    CHECK(checked->upstream_resource() == &f.upstream);
    void* p = r->allocate(8, 8);
    r->deallocate(p, 8, 8);
    CHECK_THROWS_AS(r->deallocate(p, 8, 8), allocation_error);
    (void)r->allocate(5, 1);  // left live: on_leak=ignore keeps quiet, memory still returned
  }
  CHECK(f.upstream.stats().bytes_in_use == 0);
  auto plain = pmrkit::make_resource("checked");
  const auto& o = dynamic_cast<checked_resource&>(*plain).options();
  CHECK(o.on_error == checked_options::error_action::abort);
  CHECK(o.on_leak == checked_options::leak_action::report);
  CHECK_THROWS_WITH(pmrkit::make_resource("checked:on_error=maybe"),
                    Contains("on_error=maybe") && Contains("abort, throw"));
  CHECK_THROWS_WITH(pmrkit::make_resource("checked:on_leak=throw"),
                    Contains("report, abort, ignore"));
  CHECK_THROWS_WITH(pmrkit::make_resource("checked:guard=8K"), Contains("0 to 4K"));
  CHECK_THROWS_WITH(pmrkit::make_resource("checked:gaurd=8"), Contains("has no option 'gaurd'"));
}

// ------------------------------------------------------------------------------------------
// The default: print and abort (checked in a child process).

TEST_CASE("checked: by default a violation prints its name and aborts", "[checked][abort]") {
  const auto outcome = pmrkit::test::run_in_child([] {
    checked_resource r;
    void* p = r.allocate(24, 8);
    r.deallocate(p, 24, 8);
    r.deallocate(p, 24, 8);
  });
  CHECK(outcome.aborted);
  CHECK_THAT(outcome.stderr_text, Contains("pmrkit checked_resource: double free: deallocate("));
}

TEST_CASE("checked: damage found at destruction is printed, and aborts by default",
          "[checked][abort]") {
  const auto outcome = pmrkit::test::run_in_child([] {
    checked_resource r;
    auto* p = static_cast<unsigned char*>(r.allocate(24, 8));
    r.deallocate(p, 24, 8);
    untracked(p)[3] = 7;
  });
  CHECK(outcome.aborted);
  CHECK_THAT(outcome.stderr_text,
             Contains("write after free") && Contains("the resource was destroyed"));
}

TEST_CASE("checked: on_error=log from PMRKIT_STRATEGY prints a bad free as it happens, and the "
          "program goes on",
          "[checked][abort]") {
  // The installed default is never destroyed: a report kept for destruction would never come.
  const auto outcome = pmrkit::test::run_in_child([] {
    setenv("PMRKIT_STRATEGY", "checked:on_error=log", 1);
    std::pmr::memory_resource& r = pmrkit::install_default_from_env();
    void* p = r.allocate(24, 8);
    r.deallocate(p, 24, 8);
    r.deallocate(p, 24, 8);  // printed now; the call returns
    std::fputs("carried on\n", stderr);
    void* q = r.allocate(40, 8);
    r.deallocate(q, 40, 8);
  });
  CHECK_FALSE(outcome.aborted);
  CHECK(outcome.exit_code == 0);
  const std::string& text = outcome.stderr_text;
  const auto violation = text.find("pmrkit checked_resource: double free: deallocate(");
  REQUIRE(violation != std::string::npos);
  CHECK(violation < text.find("carried on"));
}

TEST_CASE("checked: on_error=log keeps what it printed for violation_report(); record prints "
          "nothing",
          "[checked][abort]") {
  const auto misuse = [](checked_options::error_action action) {
    return pmrkit::test::run_in_child([action] {
      checked_options o;
      o.on_error = action;
      checked_resource r(o);
      void* p = r.allocate(24, 8);
      r.deallocate(p, 24, 8);
      r.deallocate(p, 24, 8);
      if (r.violation_report().find("1 violation recorded") == std::string::npos) std::_Exit(4);
    });
  };
  const auto logged = misuse(checked_options::error_action::log);
  CHECK(logged.exit_code == 0);
  CHECK_THAT(logged.stderr_text, Contains("pmrkit checked_resource: double free: deallocate("));
  // record is for a harness that reads the report itself (failure_sweep): not a word, not even
  // when the resource is destroyed.
  const auto recorded = misuse(checked_options::error_action::record);
  CHECK(recorded.exit_code == 0);
  CHECK(recorded.stderr_text.empty());
}

TEST_CASE("checked: leaks are reported at destruction; on_leak decides what follows",
          "[checked][abort]") {
  const auto leak_with = [](checked_options::leak_action action) {
    return pmrkit::test::run_in_child([action] {
      checked_options o;
      o.on_leak = action;
      checked_resource r(o);
      (void)r.allocate(40, 8);
      (void)r.allocate(40, 8);
      (void)r.allocate(7, 1);
    });
  };
  const auto reported = leak_with(checked_options::leak_action::report);
  CHECK_FALSE(reported.aborted);
  CHECK(reported.exit_code == 0);
  CHECK_THAT(reported.stderr_text,
             Contains("at destruction, 3 blocks (87 bytes) still allocated; sizes: 7 x1 40 x2"));
  const auto aborted = leak_with(checked_options::leak_action::abort);
  CHECK(aborted.aborted);
  CHECK_THAT(aborted.stderr_text, Contains("3 blocks (87 bytes)"));
  const auto ignored = leak_with(checked_options::leak_action::ignore);
  CHECK(ignored.exit_code == 0);
  CHECK(ignored.stderr_text.empty());
}
