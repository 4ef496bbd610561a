// Every replaceable form of operator new and delete, routed through the interposer this file is
// compiled into (interpose_hooks.hpp). An interposer that replaces only malloc and free would
// miss a preloaded allocator's own operator new (jemalloc, tcmalloc and mimalloc each define
// one), so both of pmrkit's interposers replace these too, with one definition here.
#include <new>

#include "interpose_hooks.hpp"

namespace {

using pmrkit::interpose::allocate;
using pmrkit::interpose::allocate_aligned;
using pmrkit::interpose::release;

std::size_t at_least_one(std::size_t bytes) noexcept { return bytes ? bytes : 1; }

void* or_throw(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}

void* aligned(std::size_t bytes, std::align_val_t alignment) noexcept {
  return allocate_aligned(static_cast<std::size_t>(alignment), at_least_one(bytes));
}

}  // namespace

void* operator new(std::size_t bytes) { return or_throw(allocate(at_least_one(bytes))); }
void* operator new[](std::size_t bytes) { return or_throw(allocate(at_least_one(bytes))); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  return allocate(at_least_one(bytes));
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  return allocate(at_least_one(bytes));
}
void* operator new(std::size_t bytes, std::align_val_t a) { return or_throw(aligned(bytes, a)); }
void* operator new[](std::size_t bytes, std::align_val_t a) { return or_throw(aligned(bytes, a)); }
void* operator new(std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return aligned(bytes, a);
}
void* operator new[](std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return aligned(bytes, a);
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
