#include "global_heap.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace pmrkit::test::global_heap {
namespace {

constexpr std::uint64_t never = ~std::uint64_t{0};
std::atomic<std::uint64_t> calls{0};
std::atomic<std::uint64_t> failing_call{never};
std::atomic<bool> has_fired{false};

}  // namespace

std::uint64_t allocations() noexcept { return calls.load(std::memory_order_relaxed); }

void fail_at(std::uint64_t n) noexcept {
  has_fired.store(false, std::memory_order_relaxed);
  failing_call.store(calls.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

void disarm() noexcept { failing_call.store(never, std::memory_order_relaxed); }

bool fired() noexcept { return has_fired.load(std::memory_order_relaxed); }

// Null when this call is the one armed to fail, or when malloc fails.
static void* counted_malloc(std::size_t size) noexcept {
  const std::uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
  if (call == failing_call.load(std::memory_order_relaxed)) {
    has_fired.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  return std::malloc(size == 0 ? 1 : size);
}

}  // namespace pmrkit::test::global_heap

using pmrkit::test::global_heap::counted_malloc;

// GCC sees free() on a pointer from operator new here; they are a matched pair by design.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  if (void* p = counted_malloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return counted_malloc(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return counted_malloc(size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
