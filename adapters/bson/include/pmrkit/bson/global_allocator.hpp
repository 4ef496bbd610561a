// pmrkit/bson/global_allocator.hpp — opt-in: route libbson's process-global allocations to a
// memory resource.
//
// libbson allocates some memory through a process-wide table of functions (bson_malloc and
// friends: every bson_t it allocates itself, bson_new(), JSON conversion, ...), separate from
// the buffers pmrkit hands it through realloc hooks. global_allocator_scope installs that
// table (bson_mem_set_vtable) so those allocations come from `resource`, and restores libbson's
// default when destroyed. This is process-wide state — libbson's own, not pmrkit's — so:
//   * at most one scope may exist at a time (a second throws std::logic_error);
//   * create it before any libbson object exists and destroy it after the last is gone: memory
//     allocated under one allocator must not be freed under the other;
//   * the resource must be thread-safe if libbson is used from several threads, and must
//     outlive the scope;
//   * libbson cannot report a failed allocation: it aborts the process ("Failure to allocate
//     memory in bson_malloc0()"). A resource that throws std::bad_alloc under this scope is
//     answered with a null block, so libbson aborts then; give it one that does not run out
//     (one backed by the process heap, or with room to spare). The document's own buffers do
//     not go through this table and report a failure as std::bad_alloc, as everywhere else.
// libbson's free and realloc get no size, so each block carries a 16-byte header holding it.
#pragma once

#include <memory_resource>

namespace pmrkit::bson {

class global_allocator_scope {
 public:
  explicit global_allocator_scope(std::pmr::memory_resource* resource);
  ~global_allocator_scope();
  global_allocator_scope(const global_allocator_scope&) = delete;
  global_allocator_scope& operator=(const global_allocator_scope&) = delete;
};

}  // namespace pmrkit::bson
