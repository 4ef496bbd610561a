// What a preloaded interposer (pmrkit's heap counter, pmrkit-record's recorder) supplies so that
// operator_new_forms.cpp can route every replaceable operator new and delete through it: the
// interposer defines these three, alongside its own malloc, free and the rest. They must not
// allocate through the functions they interpose, and must be callable before main and from any
// thread.
#pragma once

#include <cstddef>

namespace pmrkit::interpose {

// malloc's contract: a block of `bytes` (never 0 here), or null.
void* allocate(std::size_t bytes) noexcept;
// memalign's contract: a block of `bytes` aligned to `alignment` (a power of two), or null.
void* allocate_aligned(std::size_t alignment, std::size_t bytes) noexcept;
// free's contract; null is allowed.
void release(void* p) noexcept;

}  // namespace pmrkit::interpose
