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

void* plain(std::size_t bytes) noexcept { return allocate(at_least_one(bytes)); }
void* aligned(std::size_t bytes, std::align_val_t alignment) noexcept {
  return allocate_aligned(static_cast<std::size_t>(alignment), at_least_one(bytes));
}

// What the standard's operator new does when memory runs out: call the installed new_handler
// and try again, or throw std::bad_alloc when there is none. The nothrow forms behave as the
// throwing ones and answer null where those throw.
template <class Attempt>
void* with_new_handler(Attempt attempt) {
  for (;;) {
    if (void* p = attempt()) return p;
    const std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}
template <class Attempt>
void* or_null(Attempt attempt) noexcept {
  try {
    return with_new_handler(attempt);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

}  // namespace

void* operator new(std::size_t bytes) {
  return with_new_handler([=] { return plain(bytes); });
}
void* operator new[](std::size_t bytes) {
  return with_new_handler([=] { return plain(bytes); });
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  return or_null([=] { return plain(bytes); });
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  return or_null([=] { return plain(bytes); });
}
void* operator new(std::size_t bytes, std::align_val_t a) {
  return with_new_handler([=] { return aligned(bytes, a); });
}
void* operator new[](std::size_t bytes, std::align_val_t a) {
  return with_new_handler([=] { return aligned(bytes, a); });
}
void* operator new(std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return or_null([=] { return aligned(bytes, a); });
}
void* operator new[](std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return or_null([=] { return aligned(bytes, a); });
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
