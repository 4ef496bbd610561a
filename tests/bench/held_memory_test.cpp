// bench/held_memory: how each row's held memory is measured, and that each probe sees memory
// its allocator takes (the numbers behind peak_held_bytes).
#include "held_memory.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "mimalloc_loader.hpp"
#include "sanitizers.hpp"
#include "shell_quote.hpp"

using pmrkit::bench::held_method;
using pmrkit::bench::held_method_for;
using pmrkit::bench::process_held_probe;
using pmrkit::bench::thread_page_faults;

namespace {
constexpr std::size_t big = 48u << 20;  // above any noise of the test harness
}

TEST_CASE("held memory: each kind of row is measured its own way", "[bench][held]") {
  CHECK(held_method_for("size_class", false) == held_method::upstream);
  CHECK(held_method_for("size_class:max_pooled=128K", true) == held_method::upstream);
  CHECK(held_method_for("malloc", false) == held_method::mallinfo2);
  CHECK(held_method_for("new_delete", false) == held_method::mallinfo2);
  // Under LD_PRELOAD, by the statistics the preloaded allocator exports; this process has
  // none of them, so the fallback.
  CHECK(held_method_for("malloc", true) == held_method::rss);
  CHECK(held_method_for("mimalloc", false) == held_method::mimalloc_resident);
  CHECK(held_method_for("mimalloc_heap", true) == held_method::mimalloc_resident);
  CHECK(held_method_for("mimalloc_plain", false) == held_method::mimalloc_resident);
  CHECK(held_method_for("bare_list", false) == held_method::upstream);
  CHECK(held_method_for("sharded_pages_probe", false) == held_method::upstream);
  CHECK(held_method_for("sharded_pages_probe_1m", false) == held_method::upstream);
  CHECK(held_method_for("sharded_pages_probe_grow", false) == held_method::upstream);
  CHECK(held_method_for("limit", false) == held_method::static_buffers);
  CHECK(pmrkit::bench::held_method_name(held_method::mimalloc_resident) == "mimalloc_resident");
  CHECK_THROWS_AS(held_method_for("no_such_strategy", false), std::invalid_argument);
}

TEST_CASE("held memory: glibc's statistics see a block malloc holds, and the peak stays",
          "[bench][held]") {
  if (pmrkit::test::under_address_sanitizer || pmrkit::test::under_thread_sanitizer)
    return;  // the sanitizer's allocator replaces glibc's, whose statistics are then empty
  process_held_probe probe(held_method::mallinfo2);
  probe.start();
  void* p = std::malloc(big);
  REQUIRE(p);
  CHECK(probe.now() >= big);
  probe.sample();
  std::free(p);
  CHECK(probe.now() < big);  // a block this large is mmapped and returned at once
  CHECK(probe.peak() >= big);
}

TEST_CASE("held memory: mimalloc is measured by the pages it touched, not what it committed",
          "[bench][held]") {
  const auto& mi = pmrkit::detail::mimalloc();
  process_held_probe probe(held_method::mimalloc_resident);
  probe.start();
  void* small = mi.malloc(64);
  REQUIRE(small);
  probe.note_block(small, 64);
  probe.sample();
  // Debian's mimalloc commits a whole 32 MiB segment for this block; few pages of it are used.
  CHECK(probe.now() < (4u << 20));
  void* p = mi.malloc(big);
  REQUIRE(p);
  std::memset(p, 1, big);
  probe.note_block(p, big);
  probe.sample();
  CHECK(probe.now() >= big);
  mi.free(p);
  mi.free(small);
  CHECK(probe.peak() >= big);
  probe.start();  // a new row forgets the last row's segments and peak
  CHECK(probe.peak() == 0);
}

TEST_CASE("held memory: a mapping that ends inside a MiB counts up to its end",
          "[bench][held]") {
  // mimalloc maps a huge block's segment only as far as the block: 2.5 MiB of a 32 MiB-aligned
  // slot here, every page touched. Read a whole MiB at a time, the last half MiB was missed.
  constexpr std::size_t segment = std::size_t{1} << 25;
  constexpr std::size_t length = (std::size_t{5} << 20) / 2;
  void* reserved = mmap(nullptr, 2 * segment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(reserved != MAP_FAILED);
  const auto at = (reinterpret_cast<std::uintptr_t>(reserved) + segment - 1) & ~(segment - 1);
  void* base = reinterpret_cast<void*>(at);
  // Unmapped around the 2.5 MiB, so that nothing past them can be counted.
  REQUIRE(munmap(reserved, 2 * segment) == 0);
  REQUIRE(mmap(base, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
               -1, 0) == base);
  std::memset(base, 1, length);
  process_held_probe probe(held_method::mimalloc_resident);
  probe.start();
  probe.note_block(static_cast<char*>(base) + 4096, length - 4096);
  probe.sample();
  CHECK(probe.now() == length);
  munmap(base, length);
}

namespace {
// Runs the child under LD_PRELOAD=library; answers its "<method> <peak>" line, "" if absent.
std::string run_preloaded_child(const char* library) {
  const std::string command =
      "LD_PRELOAD=" + pmrkit::test::shell_quoted(library) + " " + pmrkit::test::shell_quoted(PMRKIT_PRELOAD_CHILD) + " 2>&1";
  std::FILE* child = popen(command.c_str(), "r");
  REQUIRE(child);
  char line[256] = {};
  const bool read = std::fgets(line, sizeof line, child) != nullptr;
  const int status = pclose(child);
  INFO("child said: " << line);
  CHECK(status == 0);
  return read ? std::string(line) : std::string();
}

void check_preloaded_probe(const char* library, const std::string& method) {
  if (pmrkit::test::under_address_sanitizer || pmrkit::test::under_thread_sanitizer) return;
  if (access(library, R_OK) != 0) {
    WARN("skipped: " << library << " is not installed");
    return;
  }
  const std::string said = run_preloaded_child(library);
  const auto space = said.find(' ');
  REQUIRE(space != std::string::npos);
  CHECK(said.substr(0, space) == method);
  CHECK(std::strtoull(said.c_str() + space + 1, nullptr, 10) >= (8u << 20));
}
}  // namespace

TEST_CASE("held memory: preloaded jemalloc, tcmalloc and mimalloc are asked, and see 8 MiB",
          "[bench][held]") {
  SECTION("jemalloc") {
    check_preloaded_probe("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "jemalloc_stats");
  }
  SECTION("tcmalloc") {
    check_preloaded_probe("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
                          "tcmalloc_stats");
  }
  SECTION("mimalloc") {
    check_preloaded_probe("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", "mimalloc_resident");
  }
}

TEST_CASE("held memory: the RSS high-water mark sees pages touched since start",
          "[bench][held]") {
  process_held_probe probe(held_method::rss);
  probe.start();
  auto* p = static_cast<char*>(std::malloc(big));
  REQUIRE(p);
  std::memset(p, 1, big);
  // Read back through volatile, or the compiler may drop the malloc, memset and free together.
  CHECK(static_cast<volatile char*>(p)[big - 1] == 1);
  std::free(p);
  CHECK(probe.peak() >= big * 9 / 10);  // RSS is counted in pages, and the baseline moves
}

TEST_CASE("page faults: a thread that touches new pages is charged one fault for each",
          "[bench][faults]") {
  constexpr std::size_t pages = 256;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* const region =
      ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  auto* const bytes = static_cast<volatile char*>(region);
  const std::uint64_t before = thread_page_faults();
  for (std::size_t i = 0; i < pages; ++i) bytes[i * page] = 1;
  const std::uint64_t first_touch = thread_page_faults() - before;
  // Touching them again costs nothing: the pages are the process's now.
  const std::uint64_t again_from = thread_page_faults();
  for (std::size_t i = 0; i < pages; ++i) bytes[i * page] = 2;
  const std::uint64_t again = thread_page_faults() - again_from;
  ::munmap(region, pages * page);
  // At least one fault per page (fault-around does not map anonymous pages ahead; a
  // transparent huge page would take fewer, so the region is smaller than one).
  CHECK(first_touch >= pages);
  CHECK(again < pages / 8);
}
