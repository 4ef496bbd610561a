// global_allocator_scope: while installed, libbson's own allocations come from the resource and
// all of them go back; afterwards libbson's default allocator is in place again.
#include <bson/bson.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>

#include "pmrkit/bson/document.hpp"
#include "pmrkit/bson/global_allocator.hpp"
#include "pmrkit/counting_resource.hpp"

TEST_CASE("libbson's global allocations go to the resource while a scope exists",
          "[bson][global]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    pmrkit::bson::global_allocator_scope scope(&counted);
    bson_t* b = bson_new();
    for (int i = 0; i < 100; ++i) BSON_APPEND_INT32(b, "key", i);  // grows past inline storage
    CHECK(counted.stats().allocations >= 2);
    char* json = bson_as_canonical_extended_json(b, nullptr);
    CHECK(std::strlen(json) > 100);
    bson_free(json);
    bson_destroy(b);
    CHECK(counted.stats().bytes_in_use == 0);

    // A document's own bson_t comes from the global allocator too: both its allocations and
    // libbson's show up here.
    const auto before = counted.stats().allocations;
    {
      pmrkit::bson::document d(&counted);
      d.append_int32("x", 1);
    }
    CHECK(counted.stats().allocations >= before + 3);
    CHECK(counted.stats().bytes_in_use == 0);
  }
  // Restored: libbson allocates from the heap again, not from the resource.
  const auto after = counted.stats().allocations;
  bson_t* b = bson_new();
  for (int i = 0; i < 100; ++i) BSON_APPEND_INT32(b, "key", i);
  bson_destroy(b);
  CHECK(counted.stats().allocations == after);
}

TEST_CASE("the scope's allocator honours alignment, calloc and realloc", "[bson][global]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    pmrkit::bson::global_allocator_scope scope(&counted);
    void* aligned = bson_aligned_alloc(128, 300);
    CHECK(reinterpret_cast<std::uintptr_t>(aligned) % 128 == 0);
    std::memset(aligned, 0xAB, 300);
    bson_free(aligned);

    auto* zeroed = static_cast<unsigned char*>(bson_malloc0(64));
    bool all_zero = true;
    for (int i = 0; i < 64; ++i) all_zero = all_zero && zeroed[i] == 0;
    CHECK(all_zero);

    for (int i = 0; i < 64; ++i) zeroed[i] = static_cast<unsigned char>(i);
    auto* grown = static_cast<unsigned char*>(bson_realloc(zeroed, 4096));
    bool kept = true;
    for (int i = 0; i < 64; ++i) kept = kept && grown[i] == i;
    CHECK(kept);
    auto* shrunk = static_cast<unsigned char*>(bson_realloc(grown, 16));
    for (int i = 0; i < 16; ++i) kept = kept && shrunk[i] == i;
    CHECK(kept);
    bson_free(shrunk);
    CHECK(counted.stats().bytes_in_use == 0);
  }
}

TEST_CASE("only one scope may exist at a time", "[bson][global]") {
  pmrkit::counting_resource counted(std::pmr::new_delete_resource());
  {
    pmrkit::bson::global_allocator_scope scope(&counted);
    CHECK_THROWS_AS(pmrkit::bson::global_allocator_scope(&counted), std::logic_error);
  }
  // Once the first is gone, a new one may be installed.
  CHECK_NOTHROW(pmrkit::bson::global_allocator_scope(&counted));
  CHECK_THROWS_AS(pmrkit::bson::global_allocator_scope(nullptr), std::invalid_argument);
}
