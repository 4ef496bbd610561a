// For test programs that link global_heap.cpp (the pmrkit_test_global_heap library): it
// replaces the unaligned forms of operator new and delete for the whole program, counts every
// operator new, and can make one of them fail on purpose. Use it to show that code makes no
// global-heap allocation, or that it cleans up when one fails. Thread-safe (atomics); the
// count includes every thread's allocations, so compare counts around code with no other
// thread running.
#pragma once

#include <cstdint>

namespace pmrkit::test::global_heap {

// operator new calls so far (every unaligned form, failed ones included).
std::uint64_t allocations() noexcept;
// The n-th operator new from now (n >= 1) fails: the throwing forms throw std::bad_alloc, the
// nothrow forms return null. Only that one.
void fail_at(std::uint64_t n) noexcept;
void disarm() noexcept;
// Whether the armed failure has happened since the last fail_at().
bool fired() noexcept;

}  // namespace pmrkit::test::global_heap
